"""Helpers for the log tests: batches built by kafka-python, small configs, raw file readers."""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from pathlib import Path

from helpers.batches import producer_batch
from kafka.record.default_records import DefaultRecordBatch

from odradek.log.log import PartitionLog
from odradek.topic_config import LogConfig

NOW = int(time.time() * 1000)

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def batch(
    n: int = 1,
    ts: int | None = None,
    *,
    key: bytes | None = b"k",
    keys: Sequence[bytes | None] | None = None,
    value: bytes | None = b"v" * 50,
    values: Sequence[bytes | None] | None = None,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    codec: int = 0,
    ts_step: int = 1,
) -> bytearray:
    """One v2 batch of ``n`` records as a producer sends it (offsets 0..n-1)."""
    base_ts = NOW if ts is None else ts
    return producer_batch(
        (
            (
                base_ts + i * ts_step,
                keys[i] if keys is not None else key,
                values[i] if values is not None else value,
            )
            for i in range(n)
        ),
        codec=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def small_config(**kw: object) -> LogConfig:
    base: dict[str, object] = dict(
        segment_bytes=4096,
        index_interval_bytes=200,
        segment_index_bytes=800,
        file_delete_delay_ms=0,
    )
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def open_log(path: Path, config: LogConfig | None = None, **kw: object) -> PartitionLog:
    return PartitionLog.open(path, "topic", 0, config or small_config(), **kw)  # type: ignore[arg-type]


def decode_all(records: bytes) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, timestamp) of every record in a fetched blob (kafka-python reader)."""
    out = []
    pos = 0
    while pos + 12 <= len(records):
        length = struct.unpack_from(">i", records, pos + 8)[0]
        end = pos + 12 + length
        if end > len(records):
            break
        b = DefaultRecordBatch(bytes(records[pos:end]))
        for r in b:
            out.append((r.offset, r.key, r.value, r.timestamp))
        pos = end
    return out


def read_everything(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None, int]]:
    out: list[tuple[int, bytes | None, bytes | None, int]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        rr = log.read(offset, 1 << 20)
        if not rr.size:
            break
        recs = decode_all(rr.records)
        out.extend(r for r in recs if r[0] >= offset)
        offset = _next_offset(rr.records)
    return out


def _next_offset(records: bytes) -> int:
    pos = 0
    nxt = -1
    while pos + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        last_delta = struct.unpack_from(">i", records, pos + 23)[0]
        nxt = base + last_delta + 1
        pos += 12 + length
    return nxt


def batch_offsets(records: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) per batch."""
    out = []
    pos = 0
    while pos + 12 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        last_delta = struct.unpack_from(">i", records, pos + 23)[0]
        out.append((base, base + last_delta))
        pos += 12 + length
    return out


def read_index(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)]


def read_time_index(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - len(data) % 12, 12)]


def fill(
    log: PartitionLog, batches: int, records: int = 3, *, epoch: int = 0, ts: int | None = None
) -> None:
    base_ts = NOW if ts is None else ts
    for i in range(batches):
        log.append_as_leader(batch(records, base_ts + i * 10), epoch)
