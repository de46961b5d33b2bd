"""odradek.protocol.fetch_response ``encode_fetch_answer``: the gateway's Fetch answer from plain tuples is byte for byte the frame of the same
answer built as a response and encoded by ``encode_fetch_response`` (itself checked
against the generic encoder in test_fetch_response_parts.py), at every version 4-16
(issue 18: no response objects per consumer long poll)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.fetch_response import (
    INLINE_RECORDS_BELOW,
    Aborted,
    PartAnswer,
    TopicAnswers,
    encode_fetch_answer,
    encode_fetch_response,
    fetch_response,
    partition_data,
    topic_response,
)

records_st = st.one_of(
    st.binary(max_size=64),
    st.integers(INLINE_RECORDS_BELOW, INLINE_RECORDS_BELOW + 5000).map(
        lambda n: memoryview((bytes(range(251)) * (n // 251 + 1))[:n])
    ),
)
part_st = st.tuples(
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.one_of(
        st.none(), st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=3)
    ),
    records_st,
)
topics_st = st.lists(
    st.tuples(st.text(min_size=1, max_size=20), st.uuids(), st.lists(part_st, max_size=4)),
    max_size=3,
)


def _as_response(version: int, topics: list[tuple[str, uuid.UUID, list[PartAnswer]]]) -> object:
    return fetch_response(
        [
            topic_response(
                name if version < 13 else None,
                topic_id if version >= 13 else None,
                [
                    partition_data(
                        i,
                        e,
                        hw,
                        lso,
                        ls,
                        None
                        if ab is None
                        else [Aborted(producer_id=p, first_offset=o) for p, o in ab],
                        -1,
                        r,
                    )
                    for i, e, hw, lso, ls, ab, r in parts
                ],
            )
            for name, topic_id, parts in topics
        ]
    )


def _joined(parts: list[object]) -> bytes:
    return b"".join(bytes(p) for p in parts)  # type: ignore[call-overload]


@settings(max_examples=300, deadline=None)
@given(st.integers(4, 16), st.integers(0, 2**31 - 1), topics_st)
def test_the_same_bytes_as_the_response_encoder(
    version: int, correlation_id: int, topics: list[tuple[str, uuid.UUID, list[PartAnswer]]]
) -> None:
    answers: TopicAnswers = [
        (name if version < 13 else topic_id, parts) for name, topic_id, parts in topics
    ]
    expected = encode_fetch_response(correlation_id, version, _as_response(version, topics))  # type: ignore[arg-type]
    assert expected is not None
    got = encode_fetch_answer(correlation_id, version, answers)
    assert _joined(got) == _joined(expected)  # type: ignore[arg-type]


def test_large_records_go_as_the_buffers_given() -> None:
    big = memoryview(bytes(INLINE_RECORDS_BELOW + 10))
    frame = encode_fetch_answer(7, 12, [("t", [(0, 0, 5, 5, 0, None, big)])])
    assert any(part is big for part in frame)
