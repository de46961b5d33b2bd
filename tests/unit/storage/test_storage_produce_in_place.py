"""The leader appends a data link blob in place: offsets are patched into the frame's
own buffer (a writable view, which nothing reads after the append) instead of a copy
of it, one pass less over every produced byte (issue 18). Immutable bytes (a gRPC
request's) are copied first, as before; both land the same in the log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.batches import producer_batch
from test_storage_replica_manager import snapshot

from odradek.log.manager import LogManager
from odradek.records.header import read_batch_header
from odradek.rpc.v1 import storage_pb2
from odradek.storage.metrics import StorageMetrics
from odradek.storage.produce import ProduceHandler
from odradek.storage.replica_manager import ReplicaManager

ME = 1


@pytest.fixture
def handler(tmp_path: Path) -> Iterator[tuple[ProduceHandler, ReplicaManager]]:
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    replicas = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    replicas.apply(snapshot(1, [(0, [ME], ME, 0)]))
    yield ProduceHandler(replicas, StorageMetrics()), replicas
    logs.shutdown()


def _request() -> storage_pb2.ProduceRequest:
    return storage_pb2.ProduceRequest(
        acks=1, timeout_ms=1000, partitions=[storage_pb2.ProducePartition(topic="t", partition=0)]
    )


async def test_a_writable_view_is_patched_in_place(
    handler: tuple[ProduceHandler, ReplicaManager],
) -> None:
    produce, replicas = handler
    frame = bytearray(b"head") + producer_batch([(1000, None, b"a"), (1000, None, b"b")])
    first = await produce.produce(_request(), [memoryview(frame)[4:]])
    assert first.partitions[0].error_code == 0 and first.partitions[0].base_offset == 0
    frame2 = bytearray(producer_batch([(1000, None, b"c")]))
    second = await produce.produce(_request(), [memoryview(frame2)])
    assert second.partitions[0].base_offset == 2
    # The caller's buffer itself now carries the assigned offset and leader epoch.
    assert read_batch_header(frame2).base_offset == 2
    part = replicas.get("t", 0)
    assert part is not None
    assert bytes(part.log.read(2, 1 << 20).records) == bytes(frame2)


async def test_immutable_bytes_are_copied_and_land_the_same(
    handler: tuple[ProduceHandler, ReplicaManager],
) -> None:
    produce, replicas = handler
    data = bytes(producer_batch([(1000, None, b"a")]))
    for expected in (0, 1):
        answer = await produce.produce(_request(), [data])
        assert answer.partitions[0].base_offset == expected
    assert read_batch_header(data).base_offset == 0  # untouched
    part = replicas.get("t", 0)
    assert part is not None
    assert read_batch_header(bytes(part.log.read(1, 1 << 20).records)).base_offset == 1
