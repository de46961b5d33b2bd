"""The pipeline's record walk and record layout in C (``odradek.records._columns``)
against the numpy reference paths they replace (``record_fields_numpy``,
``record_bodies_numpy``).

The C walk may only answer where the numpy walk would read the same fields; on
anything malformed it returns None and the numpy path decides. Compared on valid
Fetch answers (headers, null keys and values, every codec, control batches,
LogAppendTime, offset gaps, a last batch cut short) and on fuzzed record sections.
The C layout must write byte for byte what the numpy layout writes, for sliced
arrays, nulls, empty values and strings.
"""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from helpers import fetch_answers
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.pipeline import batch_encoder, record_columns
from odradek.pipeline.schema import arrow_schema, source_schema
from odradek.records import (
    BatchBuilder,
    decode_batches,
)
from odradek.records.batch import HEADER_SIZE

columns_c = pytest.importorskip("odradek.records._columns")


@settings(deadline=None, max_examples=80)  # numpy/Arrow start-up varies on a busy machine
@given(
    batches=fetch_answers.batches(max_records=150, max_batches=4, min_delta=-(10**7)),
    cut=st.integers(min_value=0, max_value=80),
)
def test_c_walk_decodes_what_the_numpy_walk_decodes(
    batches: list[fetch_answers.Batch], cut: int
) -> None:
    wire = fetch_answers.fetch_answer(batches)
    wire = wire[: max(0, len(wire) - cut)]
    schema = arrow_schema(source_schema(True))
    view = memoryview(wire)
    answers: list[bool] = []

    def fields(whole: bytes, spans: bytes) -> bytes | None:
        raw = columns_c.fields(whole, spans)
        answers.append(raw is not None)
        return raw

    with mock.patch.object(record_columns, "_columns", SimpleNamespace(fields=fields)):
        with_c = record_columns.decode_records(view, 5, 0, 10**9, "t", 1, schema, True)
    with mock.patch.object(record_columns, "_columns", None):
        reference = record_columns.decode_records(view, 5, 0, 10**9, "t", 1, schema, True)
    assert with_c.next_offset == reference.next_offset
    got = with_c.batch.to_pylist() if with_c.batch is not None else []
    want = reference.batch.to_pylist() if reference.batch is not None else []
    assert got == want
    assert all(answers)  # the C walk answered: no silent fallback on well-formed batches
    whole = [b for b in decode_batches(wire) if not b.is_control] if wire else []
    assert len(got) == sum(b.record_count for b in whole)


@settings(deadline=None, max_examples=80)
@given(
    records=st.lists(fetch_answers.records(min_delta=-(10**7)), min_size=1, max_size=60),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
    trim=st.integers(-3, 3),
)
def test_c_walk_is_never_more_lenient_than_numpy(
    records: list[fetch_answers.Record],
    edits: list[tuple[int, int]],
    trim: int,
) -> None:
    """Flipped bytes and a wrong span end: the C walk answers None, or exactly what the
    numpy walk reads from the same bytes; a clean section always gets an answer."""
    builder = BatchBuilder(base_offset=0)
    for key, value, headers, ts in records:
        builder.append(1_700_000_000_000 + ts, key, value, headers)
    section = bytearray(builder.build()[HEADER_SIZE:])
    spans = [(0, len(section), len(records))]
    clean = columns_c.fields(bytes(section), np.asarray(spans, np.int64).tobytes())
    assert clean is not None
    assert np.array_equal(
        np.frombuffer(clean, np.int64).reshape(8, -1),
        record_columns.record_fields_numpy(bytes(section), spans),
    )
    for at, byte in edits:
        section[at % len(section)] = byte
    end = min(max(0, len(section) + trim), len(section))
    padded = bytes(section) + b"\x00" * 16  # room for the numpy walk to read past `end`
    spans = [(0, end, len(records))]
    raw = columns_c.fields(padded, np.asarray(spans, np.int64).tobytes())
    if raw is not None:
        got = np.frombuffer(raw, np.int64).reshape(8, -1)
        assert np.array_equal(got, record_columns.record_fields_numpy(padded, spans))
        ends = got[4] + np.maximum(got[5], 0)  # every value inside the span
        assert int(ends.max()) <= end


@settings(deadline=None, max_examples=80)
@given(
    rows=st.lists(
        st.tuples(st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=2000)),
        min_size=1,
        max_size=300,
    ),
    no_keys=st.booleans(),
    as_text=st.booleans(),
    window=st.tuples(st.integers(0, 50), st.integers(0, 300)),
)
def test_c_layout_writes_what_the_numpy_layout_writes(
    rows: list[tuple[bytes | None, bytes | None]],
    no_keys: bool,
    as_text: bool,
    window: tuple[int, int],
) -> None:
    """Byte-equal record bodies for sliced Arrow arrays (non-zero offsets), null keys,
    values and whole key columns, empty values, string columns and records past 64 and
    8192 (longer offsetDelta varints)."""
    rows = rows * (1 + 9000 // (len(rows) * 50))  # some batches long enough for 2-byte deltas
    keys: pa.Array | None = pa.array([k for k, _ in rows], pa.binary())
    values = pa.array([v for _, v in rows], pa.binary())
    if as_text:
        values = pa.array([None if v is None else v.hex() for _, v in rows], pa.string())
    lo = min(window[0], len(rows) - 1)
    n = min(window[1], len(rows) - lo)
    assert keys is not None
    keys, values = keys.slice(lo, n), values.slice(lo, n)
    if no_keys:
        keys = None
    c = batch_encoder.record_bodies(keys, values)
    assert bytes(c) == batch_encoder.record_bodies_numpy(keys, values)
    with mock.patch.object(batch_encoder, "_columns", None):
        assert batch_encoder.record_bodies(keys, values, 61) == bytearray(61) + c


def test_c_layout_refuses_buffers_shorter_than_the_rows() -> None:
    values = pa.array([b"abc", b"de"], pa.binary())
    validity, offsets, data = values.buffers()
    with pytest.raises(ValueError, match="value buffers shorter"):
        columns_c.records(None, (validity, offsets, data, 0), 5, 0)
    bad = pa.py_buffer(np.array([0, 3, 99], dtype=np.int32).tobytes())
    with pytest.raises(ValueError, match="value offsets outside"):
        columns_c.records(None, (None, bad, data, 0), 2, 0)
