"""What the compat tests send and expect, independent of which client carries it.

Records compare by content (key, value, headers); where they landed (partition,
offset, timestamp) rides along without taking part in equality, so "consumed ==
produced" reads naturally and offsets are checked where a test means to.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

Header = tuple[str, bytes | None]

MIB = 1 << 20
# Kafka's default max.message.bytes: 1 MiB + LOG_OVERHEAD (offset + length) of the
# old message format. It bounds a whole batch (61-byte v2 header included), so a
# record alone in a batch may carry a value of at most this minus its framing.
DEFAULT_MAX_MESSAGE_BYTES = 1048588
V2_BATCH_HEADER = 61


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = field(default=None, compare=False)
    partition: int = field(default=-1, compare=False)
    offset: int = field(default=-1, compare=False)

    def short(self) -> str:
        """A readable form for assertion messages (1 MiB values would drown them)."""

        def cut(b: bytes | None) -> str:
            if b is None:
                return "None"
            return repr(b[:24]) + (f"...({len(b)} bytes)" if len(b) > 24 else "")

        return f"p{self.partition}@{self.offset} k={cut(self.key)} v={cut(self.value)} h={self.headers}"


class ClientError(Exception):
    """A client reported a failure; ``code`` is the client's own name for it (e.g.
    librdkafka's ``MSG_SIZE_TOO_LARGE``, Java's ``RecordTooLargeException``)."""

    def __init__(self, client: str, code: str, message: str = "") -> None:
        super().__init__(f"{client}: {code}: {message}")
        self.client = client
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Features:
    """What a client can put on the wire; record sets are cut to fit."""

    binary: bool = True  # arbitrary bytes in keys and values (kcat: text lines only)
    per_record_headers: bool = True  # kcat: one header set for the whole run
    null_header_values: bool = True  # kafkajs cannot send a null header value
    timestamps: bool = True  # explicit record timestamps
    headers: bool = True  # magic 0/1 message sets carry no headers
    empty_values: bool = True  # kcat -Z turns an empty line into a null value


def standard_records(features: Features, count: int = 120, tag: str = "") -> list[Rec]:
    """Keys, null keys, tombstones, empty values, headers (repeated names, non-ASCII
    names, null values), in an order a consumer must preserve."""
    recs: list[Rec] = []
    for i in range(count):
        kind = i % 6
        key: bytes | None = f"key-{tag}{i}".encode()
        value: bytes | None = f"value-{tag}{i}-".encode() + b"x" * (i * 7 % 90)
        headers: tuple[Header, ...] = ()
        if features.binary and kind == 1:
            key = bytes([0, 255, i % 256]) + b"\n\t"
            value = os.urandom(32) + b"\x00\n"
        if kind == 2:
            key = None
        if kind == 3:
            value = None  # tombstone
        if kind == 4 and features.empty_values:
            value = b""  # empty, not null
        if features.headers and not features.per_record_headers:
            headers = (("trace", b"same"), ("gr\u00fc\u00dfe", b"\xc3\xa4"))
        elif features.headers and kind in (0, 5):
            headers = (
                ("trace", b"t%d" % i),
                ("trace", b"second"),
                ("gr\u00fc\u00dfe", b"\xc3\xa4"),
            )
            if features.null_header_values and kind == 5:
                headers += (("empty", None),)
        recs.append(Rec(key, value, headers))
    return recs


def by_partition(records: Sequence[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


def assert_same_records(got: Sequence[Rec], want: Sequence[Rec], what: str) -> None:
    """Equal content in the same order; on failure, name the first difference."""
    if list(got) == list(want):
        return
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            raise AssertionError(
                f"{what}: record {i} differs:\n  got  {g.short()}\n  want {w.short()}"
                f"\n({len(got)} records consumed, {len(want)} expected)"
            )
    raise AssertionError(f"{what}: consumed {len(got)} records, expected {len(want)}")


def assert_consecutive(records: Sequence[Rec], start: int, what: str) -> None:
    offsets = [r.offset for r in records]
    want = list(range(start, start + len(records)))
    assert offsets == want, f"{what}: offsets {offsets[:10]}... are not {want[:10]}..."


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    magic: int
    attributes: int
    records: bytes  # the (possibly compressed) records section

    @property
    def codec(self) -> int:
        return self.attributes & 0x7


def stored_batches(partition_dir: Path) -> list[StoredBatch]:
    """The v2 batches of every ``.log`` segment in ``partition_dir``, as the storage node
    wrote them (DESIGN.md: segments hold batches exactly as on the wire): baseOffset
    int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
    attributes int16, ... 61 header bytes, then the records section."""
    out: list[StoredBatch] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + V2_BATCH_HEADER <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            if length <= 0:
                break  # preallocated tail
            (magic,) = struct.unpack_from(">b", data, pos + 16)
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            end = pos + 12 + length
            out.append(
                StoredBatch(base_offset, magic, attributes, data[pos + V2_BATCH_HEADER : end])
            )
            pos = end
    return out
