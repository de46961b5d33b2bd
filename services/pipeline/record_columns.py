"""Kafka record batches (magic 2, as a Fetch response carries them) to the source's
Arrow columns, column-wise.

A v2 record is ``length`` (varint) then ``attributes``, ``timestampDelta``
(varlong), ``offsetDelta``, ``keyLength``, key, ``valueLength``, value,
``headerCount`` and headers (KIP-98's record format, Kafka's
``DefaultRecord``). Each record's start depends on the previous one's length, so one
short loop per batch walks the length prefixes; every field is then decoded for all
records at once with numpy (vectorised varints), and keys, values and header fields
become Arrow binary columns by one gather (``take``) over the batch bytes, without a
Python object per record.

Batch headers are read with ``odradek.records.batch.BatchView``. Control batches
(transaction markers) are skipped, compressed batches are decompressed first
(``odradek.records.compression``), a truncated last batch (Fetch
may cut one short) is left for the next fetch. Legacy message sets (magic 0/1) raise
``LegacyFormatError``: the caller reads those through librdkafka.

The record walk (every field of every record) runs in C
(``odradek.records._columns``, issue 20: in Python it was 3 us a record, the
source's largest cost) and falls back to the numpy walk below without the extension.

Pure code: bytes in, Arrow out.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.native import load_columns
from odradek.records.batch import HEADER_SIZE, BatchView, Compression, TimestampType

# the record walk in C; optional (setup.py), the numpy path does the same
_columns: ModuleType | None = load_columns()


class LegacyFormatError(ValueError):
    """A magic 0/1 message set: not decoded here."""


@dataclass
class Chunk:
    """Records of one Fetch response, decoded: the Arrow batch (``None`` when no record
    fell inside the range) and the offset to fetch next."""

    batch: pa.RecordBatch | None
    next_offset: int


@dataclass
class _Batch:
    base_offset: int
    base_timestamp: int
    max_timestamp: int
    log_append_time: bool
    data: bytes | memoryview
    count: int


def next_offset(buf: memoryview, fetch_offset: int) -> int:
    """The offset after the last complete batch in ``buf`` (headers only): where the
    next Fetch starts, known before the records are decoded."""
    pos, nxt = 0, fetch_offset
    while pos + HEADER_SIZE <= len(buf):
        view = BatchView(buf, pos)
        if pos + view.size > len(buf):
            break
        nxt = max(nxt, view.next_offset)
        pos += view.size
    return nxt


def _walk_headers(buf: memoryview, fetch_offset: int) -> tuple[list[_Batch], int]:
    """Complete data batches in ``buf`` and the offset after the last complete batch."""
    batches: list[_Batch] = []
    pos = 0
    nxt = fetch_offset
    while pos + HEADER_SIZE <= len(buf):
        view = BatchView(buf, pos)
        if view.magic != 2:
            raise LegacyFormatError(f"message format v{view.magic} at offset {view.base_offset}")
        end = pos + view.size
        if end > len(buf):
            break  # cut short by the fetch size: fetched again next time
        nxt = max(nxt, view.next_offset)
        count = view.record_count
        if not view.is_control and count > 0:
            data: bytes | memoryview = buf[pos + HEADER_SIZE : end]
            if view.compression != Compression.NONE:
                from odradek.records.compression import decompress

                data = decompress(view.compression, data)
            batches.append(
                _Batch(
                    view.base_offset,
                    view.base_timestamp,
                    view.max_timestamp,
                    view.timestamp_type == TimestampType.LOG_APPEND_TIME,
                    data,
                    count,
                )
            )
        pos = end
    return batches, nxt


def _record_starts(data: bytes | memoryview, count: int, out: list[int], shift: int) -> None:
    """Append the start of each record's body (after its length prefix) to ``out``.

    Records of one size (common: fixed-size payloads) are recognised at once: the
    starts that size predicts are checked against the length prefixes found there,
    all together. Otherwise one short loop reads the zig-zag length varints, the only
    per-record step."""
    raw = bytes(data)
    b0 = raw[0]
    if b0 < 0x80:
        first, k = (b0 >> 1) ^ -(b0 & 1), 1
    elif raw[1] < 0x80:
        v = (b0 & 0x7F) | (raw[1] << 7)
        first, k = (v >> 1) ^ -(v & 1), 2
    else:
        first, k = -1, 0
    if first >= 0 and (first + k) * count == len(raw) and count > 1:
        step = first + k
        arr = np.frombuffer(raw, dtype=np.uint8)
        heads = np.arange(count, dtype=np.int64) * step
        ok = np.all(arr[heads] == b0) and (k == 1 or np.all(arr[heads + 1] == raw[1]))
        if ok:
            out.extend((heads + k + shift).tolist())
            return
    pos = 0
    append = out.append
    for _ in range(count):
        b = raw[pos]
        if b < 0x80:
            pos += 1
            append(pos + shift)
            pos += (b >> 1) ^ -(b & 1)
            continue
        n, bits = b & 0x7F, 7
        pos += 1
        while True:
            b = raw[pos]
            pos += 1
            n |= (b & 0x7F) << bits
            if b < 0x80:
                break
            bits += 7
        append(pos + shift)
        pos += (n >> 1) ^ -(n & 1)


def _varint(buf: np.ndarray, pos: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at every position of ``pos``: ``(values, encoded sizes)``.
    One-byte varints (most lengths and deltas) take one gather; longer ones are
    finished byte by byte for just those records."""
    last = len(buf) - 1
    b = buf[np.minimum(pos, last)].astype(np.int64)
    raw = b & 0x7F
    size = np.ones(len(pos), dtype=np.int64)
    more = np.nonzero(b >= 0x80)[0]
    if len(more):
        acc = raw[more].astype(np.uint64)
        at = pos[more]
        going = np.ones(len(more), dtype=bool)
        n = np.ones(len(more), dtype=np.int64)
        for k in range(1, max_bytes):
            nb = buf[np.minimum(at + k, last)].astype(np.uint64)
            acc |= np.where(going, (nb & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
            n += going
            going &= nb >= 0x80
            if not going.any():
                break
        value_more = (acc >> np.uint64(1)).astype(np.int64) ^ -(acc & np.uint64(1)).astype(np.int64)
        value = (raw >> 1) ^ -(raw & 1)
        value[more] = value_more
        size[more] = n
        return value, size
    return (raw >> 1) ^ -(raw & 1), size


def _binary(
    data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, out_type: pa.DataType
) -> pa.Array:
    """Arrow binary/string values ``data[start:start+length]``; negative length is null.
    Built as one array of 2n slices (each value, then the gap to the next one) whose
    even elements are taken: a single gather in Arrow's C++."""
    n = len(starts)
    if n == 0:
        return pa.array([], out_type)
    valid = lengths >= 0
    stop = starts + np.where(valid, lengths, 0)
    bounds = np.empty(2 * n + 1, dtype=np.int64)
    bounds[0:-1:2] = starts
    bounds[1::2] = stop
    bounds[-1] = stop[-1]
    if not np.all(np.diff(bounds) >= 0):
        raise ValueError("record fields out of order")
    if bounds[-1] >= 2**31:
        out_type_big = pa.large_binary()
        offsets = pa.py_buffer(bounds)
    else:
        out_type_big = pa.binary()
        offsets = pa.py_buffer(bounds.astype(np.int32))
    mask = np.ones(2 * n, dtype=bool)
    mask[0::2] = valid
    bitmap = pa.py_buffer(np.packbits(mask, bitorder="little"))
    both = pa.Array.from_buffers(out_type_big, 2 * n, [bitmap, offsets, data])
    taken = both.take(pa.array(np.arange(0, 2 * n, 2)))
    return taken.cast(out_type)


def record_fields(whole: bytes | bytearray, spans: list[tuple[int, int, int]]) -> np.ndarray:
    """The fields of every record in ``spans`` (``(start, end, count)`` of each batch's
    records inside ``whole``) as 8 int64 rows: timestampDelta, offsetDelta, key start
    and length, value start and length, header count, headers start (lengths -1 for
    null). The C walk (``odradek.records._columns``) where it is built and the input is
    well formed, else :func:`record_fields_numpy`."""
    if _columns is not None and spans:
        raw = _columns.fields(whole, np.asarray(spans, dtype=np.int64).tobytes())
        if raw is not None:
            return np.frombuffer(raw, dtype=np.int64).reshape(8, -1)
    return record_fields_numpy(whole, spans)


def record_fields_numpy(whole: bytes | bytearray, spans: list[tuple[int, int, int]]) -> np.ndarray:
    """:func:`record_fields` with numpy: the record starts by one walk over the length
    prefixes, every field then for all records at once."""
    starts_list: list[int] = []
    for start, end, count in spans:
        _record_starts(memoryview(whole)[start:end], count, starts_list, start)
    data = np.frombuffer(whole, dtype=np.uint8)
    starts = np.asarray(starts_list, dtype=np.int64)
    # attributes (int8), then the varints in order.
    pos = starts + 1
    ts_delta, n = _varint(data, pos, 10)
    pos = pos + n
    off_delta, n = _varint(data, pos, 5)
    pos = pos + n
    key_len, n = _varint(data, pos, 5)
    key_start = pos + n
    pos = key_start + np.maximum(key_len, 0)
    value_len, n = _varint(data, pos, 5)
    value_start = pos + n
    pos = value_start + np.maximum(value_len, 0)
    header_count, n = _varint(data, pos, 5)
    header_pos = pos + n
    return np.stack(
        [ts_delta, off_delta, key_start, key_len, value_start, value_len, header_count, header_pos]
    )


def decode_records(
    buf: memoryview,
    fetch_offset: int,
    start: int,
    end: int,
    topic: str,
    partition: int,
    schema: pa.Schema,
    include_headers: bool,
) -> Chunk:
    """Records of ``buf`` with ``start <= offset < end``, as one Arrow batch in the
    source's schema (key, value, topic, partition, offset, timestamp, timestampType
    [, headers])."""
    batches, nxt = _walk_headers(buf, fetch_offset)
    if not batches:
        return Chunk(None, nxt)
    views = [b.data for b in batches if isinstance(b.data, memoryview) and b.data.obj is buf.obj]
    whole: bytes | bytearray
    if len(views) == len(batches) and isinstance(buf.obj, bytes | bytearray):
        whole = buf.obj  # uncompressed: decode in place, no copy
        shifts = [_offset_in(whole, v) for v in views]
    else:
        parts = [bytes(b.data) for b in batches]
        whole = b"".join(parts)
        shifts = list(np.cumsum([0] + [len(p) for p in parts[:-1]]))
    spans = [
        (int(shift), int(shift) + len(b.data), b.count)
        for b, shift in zip(batches, shifts, strict=True)
    ]
    data = np.frombuffer(whole, dtype=np.uint8)
    counts = np.array([b.count for b in batches])
    (
        ts_delta,
        off_delta,
        key_start,
        key_len,
        value_start,
        value_len,
        header_count,
        header_pos,
    ) = record_fields(whole, spans)

    offsets = (
        np.repeat(np.array([b.base_offset for b in batches], dtype=np.int64), counts) + off_delta
    )
    log_append = np.repeat(np.array([b.log_append_time for b in batches]), counts)
    timestamps = np.where(
        log_append,
        np.repeat(np.array([b.max_timestamp for b in batches], dtype=np.int64), counts),
        np.repeat(np.array([b.base_timestamp for b in batches], dtype=np.int64), counts) + ts_delta,
    )
    keep = (offsets >= start) & (offsets < end)
    if not keep.any():
        return Chunk(None, nxt)
    if not keep.all():
        idx = np.nonzero(keep)[0]
        offsets, timestamps, log_append = offsets[idx], timestamps[idx], log_append[idx]
        key_start, key_len = key_start[idx], key_len[idx]
        value_start, value_len = value_start[idx], value_len[idx]
        header_count, header_pos = header_count[idx], header_pos[idx]
    count = len(offsets)
    buffer = pa.py_buffer(whole)
    ts_type = schema.field("timestamp").type
    columns: list[pa.Array] = [
        _binary(buffer, key_start, key_len, pa.binary()),
        _binary(buffer, value_start, value_len, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array(offsets, pa.int64()),
        pc.multiply(pa.array(timestamps, pa.int64()), 1000).cast(ts_type),
        # Java's timestampType ids: 0 CreateTime, 1 LogAppendTime.
        pa.array(log_append.astype(np.int32), pa.int32()),
    ]
    if include_headers:
        columns.append(
            _headers(data, buffer, header_pos, header_count, schema.field("headers").type)
        )
    return Chunk(pa.RecordBatch.from_arrays(columns, schema=schema), nxt)


def _offset_in(whole: bytes | bytearray, part: memoryview) -> int:
    """Where the view ``part`` starts inside ``whole``."""
    base = np.frombuffer(whole, dtype=np.uint8).__array_interface__["data"][0]
    here = np.frombuffer(part, dtype=np.uint8).__array_interface__["data"][0]
    return int(here - base)


def _headers(
    data: np.ndarray,
    buffer: pa.Buffer,
    pos: np.ndarray,
    count: np.ndarray,
    list_type: pa.DataType,
) -> pa.Array:
    """``array<struct<key:string,value:binary>>``; null where a record has none."""
    total = int(count.sum())
    record_of = np.repeat(np.arange(len(count)), count)
    key_start = np.empty(total, dtype=np.int64)
    key_len = np.empty(total, dtype=np.int64)
    val_start = np.empty(total, dtype=np.int64)
    val_len = np.empty(total, dtype=np.int64)
    cursor = pos.copy()
    for k in range(int(count.max()) if len(count) else 0):
        rows = np.nonzero(count > k)[0]
        at = cursor[rows]
        klen, n = _varint(data, at, 5)
        kstart = at + n
        at = kstart + np.maximum(klen, 0)
        vlen, n = _varint(data, at, 5)
        vstart = at + n
        cursor[rows] = vstart + np.maximum(vlen, 0)
        slots = np.searchsorted(record_of, rows) + k  # header k of each such record
        key_start[slots], key_len[slots] = kstart, klen
        val_start[slots], val_len[slots] = vstart, vlen
    struct_type = list_type.value_type
    items = pa.StructArray.from_arrays(
        [
            _binary(buffer, key_start, key_len, pa.string()),
            _binary(buffer, val_start, val_len, pa.binary()),
        ],
        fields=list(struct_type),
    )
    list_offsets = np.zeros(len(count) + 1, dtype=np.int32)
    np.cumsum(count, out=list_offsets[1:])
    mask = pa.array(count == 0)
    return pa.ListArray.from_arrays(pa.array(list_offsets), items, type=list_type, mask=mask)
