"""A consumer's repeated Fetch told from its bytes: same request, new offsets (sans-io).

A consumer that does not use fetch sessions (KIP-227; the gateway answers session id 0,
docs/compatibility.md C11) sends the same Fetch again and again, only each partition's
``fetch_offset`` moved: librdkafka's long polls in the latency loop, one per record or
few records (issue 18). :func:`offset_positions` finds where those offsets lie in a
request body; :class:`RepeatedFetch` holds a body with them blanked out, and
:meth:`RepeatedFetch.offsets` reads the offsets of a later body that equals it
everywhere else. Every other byte being equal (lengths, counts, names, epochs, limits,
isolation, forgotten topics, rack, tagged fields), the later body decodes to the same
request with those offsets: the fixed-width fields blanked out cannot change how the
rest is laid out. So the caller may reuse what it made of the first one.

Field layout: Kafka's ``FetchRequest.json`` (clients/src/main/resources/common/message),
versions 4-16.
"""

from __future__ import annotations

import struct

from odradek.protocol.decoder import read_uvarint

Buffer = bytes | bytearray | memoryview

FIRST_VERSION = 4  # older versions are down-converted (not repeated by this path)
LAST_VERSION = 16
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BLANK = bytes(8)


def offset_positions(version: int, body: Buffer) -> tuple[int, ...] | None:
    """Where each partition's ``fetch_offset`` (INT64) lies in a Fetch request body (the
    bytes after the request header), in request order; None for a version outside
    4-16, tagged fields inside a topic or partition entry, or a body cut short."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        return None
    view = memoryview(body)
    end = len(view)
    flexible = version >= 12
    # replica_id (v0-14), max_wait_ms, min_bytes, max_bytes, isolation_level,
    # session_id and session_epoch (v7+)
    pos = (4 if version <= 14 else 0) + 12 + 1 + (8 if version >= 7 else 0)
    # A partition: partition, current_leader_epoch (v9+), fetch_offset,
    # last_fetched_epoch (v12+), log_start_offset (v5+), partition_max_bytes.
    before_offset = 4 + (4 if version >= 9 else 0)
    entry = before_offset + 8 + (4 if version >= 12 else 0) + (8 if version >= 5 else 0) + 4
    out: list[int] = []
    try:
        topics, pos = _count(view, pos, flexible)
        for _ in range(topics):
            if version >= 13:
                pos += 16  # topic_id
            elif flexible:
                size, pos = read_uvarint(view, pos)
                pos += size - 1
            else:
                (size,) = _I16.unpack_from(view, pos)
                pos += 2 + size
            partitions, pos = _count(view, pos, flexible)
            for _ in range(partitions):
                out.append(pos + before_offset)
                pos += entry
                if flexible:
                    if view[pos] != 0:  # tagged fields: not this path's
                        return None
                    pos += 1
            if flexible:
                if view[pos] != 0:
                    return None
                pos += 1
    except (IndexError, ValueError, struct.error):
        return None
    if pos > end:
        return None
    return tuple(out)


def _count(view: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, pos = read_uvarint(view, pos)
        if n == 0:
            raise ValueError("null array")
        return n - 1, pos
    (n,) = _I32.unpack_from(view, pos)
    if n < 0:
        raise ValueError("null array")
    return n, pos + 4


class RepeatedFetch:
    """A Fetch body with its offsets blanked: what later bodies are compared with."""

    __slots__ = ("_template", "positions", "version")

    def __init__(self, version: int, body: Buffer, positions: tuple[int, ...]) -> None:
        self.version = version
        self.positions = positions
        self._template = _blanked(body, positions)

    def offsets(self, version: int, body: Buffer) -> list[int] | None:
        """Each partition's ``fetch_offset`` in ``body`` when it is this request with
        other offsets (the same version, every other byte equal); else None."""
        if version != self.version or len(body) != len(self._template):
            return None
        positions = self.positions
        if _blanked(body, positions) != self._template:
            return None
        unpack = _I64.unpack_from
        return [unpack(body, p)[0] for p in positions]


def _blanked(body: Buffer, positions: tuple[int, ...]) -> bytearray:
    out = bytearray(body)
    for p in positions:
        out[p : p + 8] = _BLANK
    return out
