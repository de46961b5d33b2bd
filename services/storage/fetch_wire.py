"""The data link's Fetch messages encoded by hand (sans-io): ``storage_pb2.FetchResponse``
as a leader answers and ``storage_pb2.FetchRequest`` as a follower asks, byte for byte
what protobuf's ``SerializeToString`` gives (fields in number order, proto3 defaults
left out, negative integers as ten-byte varints).

Why: building these messages through the protobuf runtime (keyword construction, a
repeated field's copy, serialization) costs 15-20 us each on this machine, and with
one-record acks=all requests a leader answers three fetches per record (two
followers, one consumer) and each follower asks once: about a tenth of the storage
nodes' CPU per replicated record (issue 18). Parsing stays with protobuf (a few us).
tests/unit/storage/test_storage_fetch_wire.py checks these bytes against protobuf's.
The field numbers are those of proto/odradek/v1/storage.proto.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


def varint(value: int) -> bytes:
    """A protobuf varint; a negative int32/int64 as its 64-bit two's complement."""
    if value < 0:
        value += 1 << 64
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def _int(tag: bytes, value: int) -> bytes:
    """A varint field, or nothing for proto3's default 0."""
    return tag + varint(value) if value else b""


def _message(tag: bytes, body: bytes) -> bytes:
    return tag + varint(len(body)) + body


@functools.lru_cache(maxsize=4096)
def _topic(topic: str) -> bytes:
    """Field 1 (``topic``) of FetchPartition and FetchPartitionResult, per topic name."""
    return _message(b"\x0a", topic.encode()) if topic else b""


@dataclass(slots=True)
class FetchResult:
    """One partition of a Fetch answer (``storage_pb2.FetchPartitionResult`` without
    its records, which travel beside it)."""

    topic: str
    partition: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    log_end_offset: int = -1
    diverging: tuple[int, int] | None = None  # (epoch, end offset)
    aborted: Sequence[tuple[int, int]] = field(default_factory=tuple)  # (producer, first)

    def encode(self) -> bytes:
        parts = [
            _topic(self.topic),
            _int(b"\x10", self.partition),
            _int(b"\x18", self.error_code),
            _int(b"\x20", self.high_watermark),
            _int(b"\x28", self.last_stable_offset),
            _int(b"\x30", self.log_start_offset),
        ]
        if self.diverging is not None:
            epoch, end = self.diverging
            parts.append(_message(b"\x42", _int(b"\x08", epoch) + _int(b"\x10", end)))
        parts.append(_int(b"\x48", self.current_leader_epoch))
        parts.append(_int(b"\x50", self.log_end_offset))
        for producer_id, first_offset in self.aborted:
            parts.append(
                _message(b"\x5a", _int(b"\x08", producer_id) + _int(b"\x10", first_offset))
            )
        return b"".join(parts)


def fetch_response(results: Iterable[FetchResult], error_code: int = 0) -> bytes:
    """A serialized ``storage_pb2.FetchResponse`` holding ``results``."""
    parts = [_int(b"\x08", error_code)]
    parts.extend(_message(b"\x12", r.encode()) for r in results)
    return b"".join(parts)


@dataclass(slots=True)
class FetchAsk:
    """One partition of a replica fetch (``storage_pb2.FetchPartition``)."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    log_start_offset: int
    last_fetched_epoch: int

    def encode(self) -> bytes:
        return b"".join(
            (
                _topic(self.topic),
                _int(b"\x10", self.partition),
                _int(b"\x18", self.fetch_offset),
                _int(b"\x20", self.partition_max_bytes),
                _int(b"\x28", self.current_leader_epoch),
                _int(b"\x30", self.log_start_offset),
                _int(b"\x38", self.last_fetched_epoch),
            )
        )


def fetch_request(
    *,
    replica_id: int,
    replica_incarnation: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partitions: Iterable[FetchAsk],
    isolation_level: int = 0,
) -> bytes:
    """A serialized ``storage_pb2.FetchRequest``."""
    parts = [
        _int(b"\x08", replica_id),
        _int(b"\x10", replica_incarnation),
        _int(b"\x18", max_wait_ms),
        _int(b"\x20", min_bytes),
        _int(b"\x28", max_bytes),
        _int(b"\x30", isolation_level),
    ]
    parts.extend(_message(b"\x3a", p.encode()) for p in partitions)
    return b"".join(parts)
