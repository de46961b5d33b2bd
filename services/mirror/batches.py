"""Fetched source records as batches ready to produce to the target (sans-io).

The mirror copies record batches, not records: a v2 batch fetched from the source is
produced to the target with its records section untouched (keys, values, headers,
timestamps, offset deltas and compression as the source producer wrote them). Only
the header fields a producer owns are rewritten when it is sent
(:func:`stamp_producer`): base offset 0, partition leader epoch -1, the mirror's
producer id, epoch and sequence, the transactional bit, then the CRC-32C (which
covers attributes onwards, Kafka's ``DefaultRecordBatch``).

A batch is rebuilt record by record (:func:`_rebuild`) only when copying its bytes
would not give the target the same records: legacy magic 0/1 message sets, batches
stamped LogAppendTime (the source's append time becomes each record's CreateTime, the
timestamp consumers saw), batches with offset gaps left by compaction (a produced
batch's offsets are consecutive), and a first batch that starts before the resume
position (only the records at or after it are sent again).

Small batches are merged (:func:`merge_batches`): a Produce request carries one batch
per partition (Kafka refuses more from v3 on), so copying N small source batches one
by one costs N round trips to the target, and a mirror behind a producer that sends
many small batches would never catch up. Consecutive batches of one fetch are
spliced into one: their records sections (decompressed when compressed) are
concatenated with each record's offset and timestamp deltas rewritten for the new
batch's base, and compressed again with the same codec. Records, keys, values,
headers and timestamps are unchanged.

What is skipped, as a read_committed consumer skips it (Kafka's ``CompletedFetch``):
control batches (transaction markers) and batches of aborted transactions, from the
Fetch response's ``aborted_transactions`` list. Every skipped entry still advances the
source position, so the mirror's committed source offset moves past it.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.records.batch import BatchView, iter_entries
from odradek.records.compression import compress, decompress
from odradek.records.control import ControlRecordType, parse_control_key
from odradek.records.convert import upconvert_legacy
from odradek.records.header import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    COMPRESSION_CODEC_MASK,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from odradek.records.record import BatchBuilder, assemble_batch, decode_batch
from odradek.records.varint import decode_varint, decode_varlong, write_varint, write_varlong

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_DELETE_HORIZON_FLAG = 0x40


@dataclass(slots=True)
class MirrorBatch:
    """One batch to produce, with the source offsets it covers.

    ``data`` is None for a placeholder that only moves the source position (skipped
    control or aborted batches): it is "acknowledged" as soon as everything before it is.
    """

    data: bytearray | None
    source_next: int  # the source offset after this batch: what is committed once acked
    record_count: int = 0
    max_timestamp: int = -1
    # The source offsets [source_next - record_count, source_next) map one to one onto
    # the target offsets the batch gets (a dense batch copied whole): exact translation.
    dense: bool = False


@dataclass
class AbortedTransactions:
    """Read-committed filtering of one partition's fetched batches (Kafka's
    ``CompletedFetch.abortedProducerIds``): the fetch's aborted transactions, ordered by
    first offset, become active when a batch reaches them and end at their abort marker."""

    pending: list[tuple[int, int]] = field(default_factory=list)  # (first_offset, producer_id)
    active: set[int] = field(default_factory=set)

    def add(self, aborted: Iterable[tuple[int, int]]) -> None:
        for producer_id, first_offset in aborted:
            heapq.heappush(self.pending, (first_offset, producer_id))

    def is_aborted(self, view: BatchView) -> bool:
        while self.pending and self.pending[0][0] <= view.last_offset:
            self.active.add(heapq.heappop(self.pending)[1])
        return view.is_transactional and view.producer_id in self.active

    def end_marker(self, view: BatchView) -> None:
        """A control batch: an ABORT marker ends its producer's aborted transaction."""
        if not view.is_transactional or view.producer_id not in self.active:
            return
        batch = decode_batch(view.buf, view.pos)
        if batch.records:
            kind, _ = parse_control_key(batch.records[0].key)
            if kind == ControlRecordType.ABORT:
                self.active.discard(view.producer_id)


def mirror_batches(
    buf: bytes | bytearray,
    position: int,
    aborted: AbortedTransactions | None = None,
) -> list[MirrorBatch]:
    """The batches to produce for the records of ``buf`` at or after ``position``.

    Entries wholly before ``position`` are dropped; a trailing partial batch (a Fetch
    answer cut at its byte limit) is left for the next fetch. The last item's
    ``source_next`` is the position to fetch from next (unchanged when nothing whole
    was fetched: the result is then empty)."""
    out: list[MirrorBatch] = []
    data = bytearray(buf)
    for entry in iter_entries(data):
        if entry.magic != 2:
            chunk = upconvert_legacy(
                bytes(data[entry.position : entry.position + entry.size]), keep_offsets=True
            )
            for inner in iter_entries(chunk):
                out.extend(_one(BatchView(bytearray(chunk), inner.position), position, aborted))
        else:
            out.extend(_one(BatchView(data, entry.position), position, aborted))
        if out:
            position = max(position, out[-1].source_next)
    return out


def _one(view: BatchView, position: int, aborted: AbortedTransactions | None) -> list[MirrorBatch]:
    next_offset = view.next_offset
    if next_offset <= position:
        return []
    if view.is_control:
        if aborted is not None:
            aborted.end_marker(view)
        return [MirrorBatch(None, next_offset)]
    if aborted is not None and aborted.is_aborted(view):
        return [MirrorBatch(None, next_offset)]
    attributes = view.attributes
    if (
        view.base_offset < position
        or attributes & (TIMESTAMP_TYPE_MASK | _DELETE_HORIZON_FLAG)
        or view.last_offset_delta + 1 != view.record_count
    ):
        return [_rebuild(view, position)]
    raw = bytearray(view.raw())
    return [MirrorBatch(raw, next_offset, view.record_count, view.max_timestamp, dense=True)]


def _rebuild(view: BatchView, position: int) -> MirrorBatch:
    batch = decode_batch(view.buf, view.pos)
    builder = BatchBuilder(compression=view.compression)
    max_ts = -1
    for record in batch.records:
        if record.offset < position:
            continue
        # record.timestamp is maxTimestamp for a LogAppendTime batch: what consumers saw.
        builder.append(record.timestamp, record.key, record.value, record.headers)
        max_ts = max(max_ts, record.timestamp)
    if not len(builder):
        return MirrorBatch(None, view.next_offset)
    return MirrorBatch(bytearray(builder.build()), view.next_offset, len(builder), max_ts)


# Batches at most this big are merged, into batches of at most MERGED_MAX_BYTES (well
# under the 1 MiB max.message.bytes a target topic has by default).
SMALL_BATCH_BYTES = 64 * 1024
MERGED_MAX_BYTES = 512 * 1024


def merge_batches(
    batches: list[MirrorBatch],
    *,
    small: int = SMALL_BATCH_BYTES,
    limit: int = MERGED_MAX_BYTES,
) -> list[MirrorBatch]:
    """``batches`` with each run of consecutive small batches of one codec spliced into
    one batch (see the module docstring); placeholders and big batches stay as they are.
    A merged batch is dense (exact offset translation) when all its parts were and
    their source offsets are contiguous."""
    out: list[MirrorBatch] = []
    run: list[MirrorBatch] = []
    size = 0

    def flush() -> None:
        out.append(run[0] if len(run) == 1 else _splice(run))
        run.clear()

    for batch in batches:
        data = batch.data
        if data is None or len(data) > small:
            if run:
                flush()
            out.append(batch)
            continue
        codec = _codec(data)
        if run and (size + len(data) > limit or codec != _codec(run[0].data)):
            flush()
        if not run:
            size = 0
        run.append(batch)
        size += len(data)
    if run:
        flush()
    return out


def _codec(data: bytearray | None) -> int:
    assert data is not None
    return _H.unpack_from(data, ATTRIBUTES_OFFSET)[0] & COMPRESSION_CODEC_MASK


def _splice(run: list[MirrorBatch]) -> MirrorBatch:
    """One batch holding the records of ``run`` (CreateTime v2 batches, consecutive
    offset deltas), in order."""
    first = BatchView(run[0].data or bytearray())
    codec = first.compression
    base_timestamp = first.base_timestamp
    section = bytearray()
    count = 0
    max_timestamp = -1
    dense = True
    previous_next: int | None = None
    for batch in run:
        view = BatchView(batch.data or bytearray())
        records = view.records()
        if codec:
            records = memoryview(decompress(codec, records))
        shift = view.base_timestamp - base_timestamp
        pos = 0
        for _ in range(view.record_count):
            length, body = decode_varint(records, pos)
            end = body + length
            timestamp_delta, at = decode_varlong(records, body + 1)
            offset_delta, at = decode_varint(records, at)
            record = bytearray(records[body : body + 1])  # attributes
            write_varlong(record, timestamp_delta + shift)
            write_varint(record, offset_delta + count)
            record += records[at:end]
            write_varint(section, len(record))
            section += record
            pos = end
        first_offset = batch.source_next - batch.record_count
        dense = dense and batch.dense and previous_next in (None, first_offset)
        previous_next = batch.source_next
        count += view.last_offset_delta + 1
        max_timestamp = max(max_timestamp, view.max_timestamp)
    data = assemble_batch(
        compress(codec, section) if codec else section,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=int(codec),
        last_offset_delta=count - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        count=count,
    )
    return MirrorBatch(bytearray(data), run[-1].source_next, count, max_timestamp, dense=dense)


def stamp_producer(
    data: bytearray,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    *,
    transactional: bool,
) -> None:
    """Make ``data`` the mirror producer's batch (one batch, at position 0), re-CRC'd."""
    view = BatchView(data)
    view.set_base_offset(0)
    view.set_partition_leader_epoch(-1)
    attributes = view.attributes & ~(TRANSACTIONAL_FLAG_MASK | TIMESTAMP_TYPE_MASK)
    if transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    _H.pack_into(data, ATTRIBUTES_OFFSET, attributes)
    _Q.pack_into(data, PRODUCER_ID_OFFSET, producer_id)
    _H.pack_into(data, PRODUCER_EPOCH_OFFSET, producer_epoch)
    _I.pack_into(data, BASE_SEQUENCE_OFFSET, base_sequence)
    view.update_crc()


__all__ = [
    "AbortedTransactions",
    "MirrorBatch",
    "merge_batches",
    "mirror_batches",
    "stamp_producer",
]
