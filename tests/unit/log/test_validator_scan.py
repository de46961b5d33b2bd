"""The validator's record walk in C (``odradek.log._scan``) against the Python walk.

The C walk may only say "clean" where the Python walk finds nothing wrong, and must
say so with the same maximum timestamp; everything else is left to the Python walk,
which holds Kafka's messages. Compared here on valid sections and on fuzzed ones
(flipped, cut, grown bytes), so a C walk that is more lenient than Python fails.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.log import validator
from odradek.records.varint import encode_varint, encode_varlong

scan_c = pytest.importorskip("odradek.log._scan").scan
NOW = 1_700_000_000_000
LOW, HIGH = NOW - 3_600_000, NOW + 3_600_000


def record(
    index: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: int,
    pad: bytes = b"",
) -> bytes:
    body = bytearray(b"\x00")
    body += encode_varlong(ts_delta) + encode_varint(index)
    for field in (key, value):
        body += encode_varint(-1) if field is None else encode_varint(len(field)) + field
    body += encode_varint(headers)
    for h in range(headers):
        body += encode_varint(2) + b"h%d" % (h % 10) + encode_varint(3) + b"val"
    body += pad  # bytes the record's length covers but no field reads
    return encode_varint(len(body)) + bytes(body)


records_strategy = st.lists(
    st.tuples(
        st.integers(-2000, 2000),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=30,
)


def both(section: bytes, count: int, compacted: bool, check_ts: bool) -> tuple[object, object]:
    padded = b"\xff" * 7 + section + b"\xee" * 5  # the walk must stay inside start..stop
    c = scan_c(padded, 7, 7 + len(section), count, NOW, compacted, check_ts, LOW, HIGH)
    py = validator._python_scan(
        section, 0, len(section), count, NOW, compacted, check_ts, LOW, HIGH
    )
    return c, py


@settings(max_examples=200, deadline=None)
@given(records_strategy, st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_c_and_python_walks_agree_on_valid_and_fuzzed_sections(
    recs: list[tuple[int, bytes | None, bytes | None, int]],
    compacted: bool,
    check_ts: bool,
    rnd: random.Random,
) -> None:
    section = b"".join(record(i, *r) for i, r in enumerate(recs))
    c, py = both(section, len(recs), compacted, check_ts)
    assert c == py
    for _ in range(20):
        fuzzed = bytearray(section)
        action = rnd.randrange(4)
        if action == 0 and fuzzed:
            fuzzed[rnd.randrange(len(fuzzed))] = rnd.randrange(256)
        elif action == 1:
            del fuzzed[rnd.randrange(len(fuzzed) + 1) :]
        elif action == 2:
            at = rnd.randrange(len(fuzzed) + 1)
            fuzzed[at:at] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 6)))
        count = len(recs) + (rnd.choice((-1, 0, 1)) if action == 3 else 0)
        c, py = both(bytes(fuzzed), max(count, 1), compacted, check_ts)
        assert c == py, (fuzzed.hex(), count)


def test_clean_section_gives_the_maximum_timestamp_and_its_index() -> None:
    section = (
        record(0, 5, b"k", b"v", 0) + record(1, 90, b"k", b"v", 1) + record(2, 7, None, b"", 0)
    )
    assert scan_c(section, 0, len(section), 3, NOW, False, True, LOW, HIGH) == (NOW + 90, 1)


@pytest.mark.parametrize(
    ("section", "count", "compacted"),
    [
        (record(0, 0, None, b"v", 0), 1, True),  # a null key on a compacted topic
        (record(0, 7_200_000, b"k", b"v", 0), 1, False),  # a timestamp beyond HIGH
        (record(1, 0, b"k", b"v", 0), 1, False),  # offsetDelta is not the index
        (record(0, 0, b"k", b"v", 0) * 2, 1, False),  # records left over
        (record(0, 0, b"k", b"v", 0)[:-1], 1, False),  # cut short
        (record(0, 0, b"k", b"v", 0, pad=b"\x00"), 1, False),  # a length past its fields
        (b"\xff\xff\xff\xff\xff\x01" + bytes(40), 1, False),  # a varint past 32 bits
    ],
)
def test_each_problem_is_left_to_the_python_walk(
    section: bytes, count: int, compacted: bool
) -> None:
    assert scan_c(section, 0, len(section), count, NOW, compacted, True, LOW, HIGH) is None


def test_a_range_outside_the_buffer_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        scan_c(b"abc", 1, 9, 1, NOW, False, False, LOW, HIGH)
