"""The zero-copy Fetch response encoder (odradek.protocol.fetch_response) writes exactly
the bytes of the generic encoder at every Fetch version, and hands large record
payloads to the socket as the very buffers it was given; the cheap builders give
responses equal to constructed ones, byte for byte under both encoders."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.fetch_response import (
    INLINE_RECORDS_BELOW,
    encode_fetch_response,
    fetch_response,
    partition_data,
    topic_response,
)
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import FetchResponse, encode_response

TopicResp = FetchResponse.FetchableTopicResponse
PartResp = TopicResp.PartitionData
Aborted = PartResp.AbortedTransaction

records_st = st.one_of(
    st.binary(max_size=64),
    st.integers(INLINE_RECORDS_BELOW, INLINE_RECORDS_BELOW + 5000).map(
        lambda n: memoryview((bytes(range(251)) * (n // 251 + 1))[:n])
    ),
)

partition_st = st.builds(
    lambda index, error, hw, lso, lstart, aborted, records: PartResp(
        partition_index=index,
        error_code=error,
        high_watermark=hw,
        last_stable_offset=lso,
        log_start_offset=lstart,
        aborted_transactions=None
        if aborted is None
        else [Aborted(producer_id=p, first_offset=o) for p, o in aborted],
        preferred_read_replica=-1,
        records=records,
    ),
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

# A Fetch version, a correlation id and topics of partitions (name, partitions).
fetch_cases = given(
    version=st.integers(0, 16),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=st.lists(
        st.tuples(st.text(max_size=20), st.lists(partition_st, max_size=3)), max_size=3
    ),
)


def no_aborted_before_v4(version: int, topics: list[tuple[str, list[PartResp]]]) -> None:
    """No aborted transactions before Fetch v4: the generic encoder omits them."""
    if version < 4:
        for _, parts in topics:
            for p in parts:
                p.aborted_transactions = []


@settings(max_examples=100, deadline=None)
@fetch_cases
def test_same_bytes_as_the_generic_encoder(
    version: int, correlation_id: int, topics: list[tuple[str, list[PartResp]]]
) -> None:
    responses = [
        TopicResp(topic=name, partitions=parts)
        if version < 13
        else TopicResp(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name), partitions=parts)
        for name, parts in topics
    ]
    no_aborted_before_v4(version, topics)
    response = FetchResponse(throttle_time_ms=7, error_code=0, session_id=0, responses=responses)
    header = RequestHeader(ApiKey.FETCH, version, correlation_id)
    parts = encode_fetch_response(correlation_id, version, response)
    assert parts is not None
    assert b"".join(bytes(p) for p in parts) == encode_response(header, response)
    big = [
        p.records
        for _, ps in topics
        for p in ps
        if isinstance(p.records, memoryview) and len(p.records) >= INLINE_RECORDS_BELOW
    ]
    passed = [p for p in parts if isinstance(p, memoryview)]
    assert len(passed) == len(big) and all(a is b for a, b in zip(passed, big, strict=True))


def test_tagged_fields_take_the_generic_path() -> None:
    part = PartResp(partition_index=0, records=b"")
    part.diverging_epoch = PartResp.EpochEndOffset(epoch=1, end_offset=5)
    response = FetchResponse(responses=[TopicResp(topic="t", partitions=[part])])
    assert encode_fetch_response(1, 12, response) is None


@settings(max_examples=100, deadline=None)
@fetch_cases
def test_built_responses_are_constructed_ones(
    version: int, correlation_id: int, topics: list[tuple[str, list[PartResp]]]
) -> None:
    no_aborted_before_v4(version, topics)
    by_id = version >= 13
    constructed = FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            TopicResp(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name), partitions=parts)
            if by_id
            else TopicResp(topic=name, partitions=parts)
            for name, parts in topics
        ],
    )
    built = fetch_response(
        [
            topic_response(
                None if by_id else name,
                uuid.uuid5(uuid.NAMESPACE_DNS, name) if by_id else None,
                [
                    partition_data(
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                        p.aborted_transactions,
                        p.preferred_read_replica,
                        p.records,
                    )
                    for p in parts
                ],
            )
            for name, parts in topics
        ]
    )
    assert built == constructed
    header = RequestHeader(ApiKey.FETCH, version, correlation_id)
    generic = encode_response(header, constructed)
    assert encode_response(header, built) == generic
    parts = encode_fetch_response(correlation_id, version, built)
    assert parts is not None
    assert b"".join(bytes(p) for p in parts) == generic


def test_lengths_around_the_looked_up_varints_and_a_remembered_name() -> None:
    # Small varints and topic names are looked up (issue 18); lengths past the table
    # (0x4000) are encoded as they come, and a name is the same the second time.
    for version in (11, 12):
        for size in (0x3FFF, 0x4000, 0x4001, 300_000):
            records = memoryview(bytes(range(251)) * (size // 251 + 1))[:size]
            parts = [PartResp(partition_index=0, records=records, preferred_read_replica=-1)]
            response = FetchResponse(
                responses=[TopicResp(topic="t" * 200, partitions=parts)],
                throttle_time_ms=0,
                error_code=0,
                session_id=0,
            )
            header = RequestHeader(ApiKey.FETCH, version, 5)
            for _ in range(2):
                encoded = encode_fetch_response(5, version, response)
                assert encoded is not None
                assert b"".join(bytes(p) for p in encoded) == encode_response(header, response)
