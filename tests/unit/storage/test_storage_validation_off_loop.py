"""A large compressed Produce is decompressed and checked record by record in a worker
thread (odradek.offload), so the storage node's event loop keeps serving meanwhile;
the outcome is the same as inline: appended when valid, refused with Kafka's error and
per-record errors (KIP-467), nothing appended, when not. Real on-disk log, real
ProduceHandler; the replica manager is a one-partition lookup."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from helpers.batches import producer_batch

from odradek.log.log import PartitionLog
from odradek.log.producer_state import AppendOrigin
from odradek.protocol.errors import ErrorCode
from odradek.records.batch import BatchesSummary
from odradek.records.compression import Compression
from odradek.rpc.v1 import common_pb2, storage_pb2
from odradek.storage.metrics import StorageMetrics
from odradek.storage.partition import Partition
from odradek.storage.produce import VALIDATE_OFF_LOOP_BYTES, ProduceHandler
from odradek.topic_config import LogConfig


class _Replicas:
    def __init__(self, part: Partition) -> None:
        self.part = part

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.part if (topic, partition) == ("t", 0) else None


def _leader(tmp_path: Path, *, compact: bool = False) -> Partition:
    config = LogConfig(
        segment_bytes=1 << 30,
        cleanup_policy=("compact",) if compact else ("delete",),
        max_message_bytes=1 << 26,
    )
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, config)
    part = Partition(
        1,
        "t",
        0,
        b"\x01" * 16,
        log,
        config,
        replica_lag_time_max_ms=1000,
        clock_ms=lambda: 1_000,  # the replica clock (monotonic), not record time
        is_replica_eligible=lambda n: True,
    )
    part.make_leader(
        common_pb2.Partition(partition=0, replicas=[1], isr=[1], leader=1, leader_epoch=0)
    )
    return part


def _big_batch(n: int, key: bytes | None) -> bytearray:
    """``n`` records of 16 random bytes: zstd cannot shrink them below the threshold."""
    now = int(time.time() * 1000)
    return producer_batch(((now, key, os.urandom(16)) for _ in range(n)), codec=Compression.ZSTD)


def _validating_threads(part: Partition) -> list[str]:
    """Record the thread each record check runs in."""
    threads: list[str] = []
    check = part.validate_records

    def recorded(records: bytearray, origin: AppendOrigin) -> BatchesSummary:
        threads.append(threading.current_thread().name)
        return check(records, origin)

    part.validate_records = recorded  # type: ignore[method-assign]
    return threads


async def _produce(handler: ProduceHandler, records: bytearray) -> storage_pb2.ProduceResponse:
    request = storage_pb2.ProduceRequest(
        acks=1,
        timeout_ms=10_000,
        partitions=[storage_pb2.ProducePartition(topic="t", partition=0)],
    )
    return await handler.produce(request, [records])


async def test_large_compressed_produce_is_checked_in_a_worker_thread(tmp_path: Path) -> None:
    part = _leader(tmp_path)
    threads = _validating_threads(part)
    handler = ProduceHandler(_Replicas(part), StorageMetrics())  # type: ignore[arg-type]
    records = _big_batch(5_000, b"k")
    assert len(records) >= VALIDATE_OFF_LOOP_BYTES
    (result,) = (await _produce(handler, records)).partitions
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    assert part.log_end_offset == 5_000
    assert len(threads) == 1 and threads[0] != threading.main_thread().name
    # A small one stays on the loop (a thread hop would cost more than the check).
    (small,) = (await _produce(handler, _big_batch(10, b"k"))).partitions
    assert (small.error_code, small.base_offset) == (ErrorCode.NONE, 5_000)
    assert threads[1:] == [threading.main_thread().name]


async def test_invalid_records_found_off_the_loop_are_refused(tmp_path: Path) -> None:
    part = _leader(tmp_path, compact=True)
    threads = _validating_threads(part)
    handler = ProduceHandler(_Replicas(part), StorageMetrics())  # type: ignore[arg-type]
    records = _big_batch(5_000, None)  # null keys on a compacted topic
    assert len(records) >= VALIDATE_OFF_LOOP_BYTES
    (result,) = (await _produce(handler, records)).partitions
    assert threads and threads[0] != threading.main_thread().name
    assert result.error_code == ErrorCode.INVALID_RECORD
    assert result.record_errors and result.record_errors[0].batch_index == 0
    assert part.log_end_offset == 0
