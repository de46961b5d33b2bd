"""Arrow columns to one Kafka record batch (magic 2, uncompressed), column-wise.

Each record is ``length``, ``attributes`` (0), ``timestampDelta`` (0: the batch's
records share its timestamp), ``offsetDelta``, ``keyLength``, key, ``valueLength``,
value and ``headerCount`` (0) (Kafka's ``DefaultRecord``). The records are laid
out from the Arrow buffers (validity, offsets, data) in one pass by the C encoder
``odradek.records._columns`` (issue 20: the numpy layout below cost several passes
over every byte); without the extension, the varints of all records are computed at
once with numpy and one Arrow gather interleaves, record by record, the varint
prefixes with the key and value bytes. The header and its CRC-32C
(``odradek.records.batch.crc32c``) follow, as the Java producer writes them
(``MemoryRecordsBuilder``).

Pure code: Arrow in, bytes out.
"""

from __future__ import annotations

import struct
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.native import load_columns
from odradek.records.batch import crc32c

# the record layout in C; optional (setup.py), the numpy path does the same
_columns: ModuleType | None = load_columns()

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
CRC_FROM = 21  # the CRC covers attributes .. end


def _zigzag(v: np.ndarray) -> np.ndarray:
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varint encodings of int64 ``values``: ``(n x 10 byte matrix, lengths)``."""
    z = _zigzag(values.astype(np.int64))
    n = len(z)
    out = np.zeros((n, 10), dtype=np.uint8)
    lengths = np.ones(n, dtype=np.int64)
    rest = z
    for k in range(10):
        more = rest >= np.uint64(0x80)
        out[:, k] = (
            (rest & np.uint64(0x7F)) | np.where(more, np.uint64(0x80), np.uint64(0))
        ).astype(np.uint8)
        lengths += more
        rest = rest >> np.uint64(7)
        if not more.any():
            break
    return out, lengths


def _packed(pieces: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """One binary value per record: the concatenation, in order, of each piece's first
    ``length`` bytes (pieces are ``(n x w matrix, lengths)``)."""
    matrix = np.concatenate([m for m, _ in pieces], axis=1)
    widths = np.concatenate(
        [np.arange(m.shape[1])[None, :] < lens[:, None] for m, lens in pieces], axis=1
    )
    data = matrix[widths]  # row-major: record by record
    lengths = np.add.reduce([lens for _, lens in pieces])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())]
    )


def _as_binary(column: pa.Array | None, n: int) -> tuple[pa.Array, np.ndarray]:
    """The column as binary with nulls as empty values, and the Kafka lengths (-1 null)."""
    if column is None:
        return pa.repeat(pa.scalar(b"", pa.binary()), n), np.full(n, -1, dtype=np.int64)
    col = column.cast(pa.binary()) if not pa.types.is_binary(column.type) else column
    lengths = pc.binary_length(col).to_numpy(zero_copy_only=False)
    lengths = np.where(np.isnan(lengths.astype(float)), -1, lengths).astype(np.int64)
    return col.fill_null(b""), lengths


def _buffers(
    column: pa.Array | None,
) -> tuple[pa.Buffer | None, pa.Buffer, pa.Buffer | None, int] | None:
    """An Arrow binary/string column's (validity, offsets, data, offset), as the C
    encoder takes them; large or other types are cast to binary first."""
    if column is None:
        return None
    if not pa.types.is_binary(column.type):
        column = column.cast(pa.binary())
    validity, offsets, data = column.buffers()
    if column.null_count == 0:
        validity = None
    assert offsets is not None
    return validity, offsets, data, column.offset


def record_bodies(keys: pa.Array | None, values: pa.Array, head: int = 0) -> bytearray:
    """``head`` zero bytes (room for the batch header), then the length-prefixed records
    of one batch, in order: by the C encoder (``odradek.records._columns``) where it is
    built, else :func:`record_bodies_numpy`."""
    if _columns is not None:
        out = _columns.records(_buffers(keys), _buffers(values), len(values), head)
        assert isinstance(out, bytearray)
        return out
    return bytearray(head) + record_bodies_numpy(keys, values)


def record_bodies_numpy(keys: pa.Array | None, values: pa.Array) -> bytes:
    """:func:`record_bodies` with numpy and one Arrow gather."""
    n = len(values)
    key_col, key_len = _as_binary(keys, n)
    value_col, value_len = _as_binary(values, n)
    delta, delta_len = varints(np.arange(n, dtype=np.int64))
    klen, klen_len = varints(key_len)
    vlen, vlen_len = varints(value_len)
    zero = np.zeros((n, 1), dtype=np.uint8)
    one = np.ones(n, dtype=np.int64)
    body = (
        2  # attributes, timestampDelta 0
        + delta_len
        + klen_len
        + np.maximum(key_len, 0)
        + vlen_len
        + np.maximum(value_len, 0)
        + 1  # headerCount 0
    )
    blen, blen_len = varints(body)
    prefix = _packed(
        [(blen, blen_len), (zero, one), (zero, one), (delta, delta_len), (klen, klen_len)]
    )
    middle = _packed([(vlen, vlen_len)])
    suffix = pa.repeat(pa.scalar(b"\x00", pa.binary()), n)
    parts = pa.concat_arrays([prefix, key_col, middle, value_col, suffix])
    order = (np.arange(5)[None, :] * n + np.arange(n)[:, None]).ravel()
    records = parts.take(pa.array(order))
    offsets = np.frombuffer(records.buffers()[1], dtype=np.int32, count=len(records) + 1)
    start = int(offsets[0])
    end = int(offsets[-1])
    return records.buffers()[2].to_pybytes()[start:end]


def encode_batch(
    keys: pa.Array | None,
    values: pa.Array,
    *,
    timestamp_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    """One v2 batch holding every row (keys/values binary or string, nulls allowed),
    written in place: records after room for the header, then header and CRC."""
    n = len(values)
    out = record_bodies(keys, values, HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        0,
        len(out) - 12,
        -1,
        2,
        0,
        0,
        n - 1,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        n,
    )
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[CRC_FROM:]))
    return out
