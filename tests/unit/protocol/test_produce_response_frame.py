"""The hand-framed Produce response (odradek.protocol.produce_response) is exactly the
generic encoder's frame at every served Produce version, and leaves the tagged fields
it does not write to the generic encoder; the cheap builders give responses equal to
constructed ones, byte for byte under both encoders."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import ProduceResponse, encode_response
from odradek.protocol.produce_response import (
    encode_produce_response,
    partition_response,
    produce_response,
    topic_response,
)
from odradek.protocol.versions import SUPPORTED, response_header_version

TopicResp = ProduceResponse.TopicProduceResponse
PartResp = TopicResp.PartitionProduceResponse
RecordError = PartResp.BatchIndexAndErrorMessage

text_st = st.one_of(st.none(), st.text(max_size=20))
partition_st = st.builds(
    lambda index, error, base, append, start, errors, message: PartResp(
        index=index,
        error_code=error,
        base_offset=base,
        log_append_time_ms=append,
        log_start_offset=start,
        record_errors=[RecordError(batch_index=i, batch_index_error_message=m) for i, m in errors],
        error_message=message,
    ),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 120),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**42),
    st.integers(-1, 2**40),
    st.lists(st.tuples(st.integers(0, 2**31 - 1), text_st), max_size=3),
    text_st,
)
response_st = st.builds(
    lambda topics, throttle: ProduceResponse(
        responses=[TopicResp(name=n, partition_responses=ps) for n, ps in topics],
        throttle_time_ms=throttle,
    ),
    st.lists(
        st.tuples(st.text(min_size=1, max_size=30), st.lists(partition_st, max_size=4)), max_size=3
    ),
    st.integers(0, 2**31 - 1),
)
LOW, HIGH = SUPPORTED[ApiKey.PRODUCE]


@settings(max_examples=300, deadline=None)
@given(response=response_st, version=st.integers(LOW, HIGH), cid=st.integers(0, 2**31 - 1))
def test_the_frame_is_the_generic_encoders(
    response: ProduceResponse, version: int, cid: int
) -> None:
    header = RequestHeader(ApiKey.PRODUCE, version, cid, "c")
    framed = encode_produce_response(
        cid, response_header_version(ApiKey.PRODUCE, version), version, response
    )
    assert framed == encode_response(header, response)


def test_tagged_fields_take_the_generic_path() -> None:
    leader = PartResp.LeaderIdAndEpoch(leader_id=2, leader_epoch=7)
    part = PartResp(index=0, error_code=6, base_offset=-1, current_leader=leader)
    response = ProduceResponse(responses=[TopicResp(name="t", partition_responses=[part])])
    assert encode_produce_response(1, 1, 10, response) is None
    # Before v10 there is no such field: the frame is written by hand.
    header = RequestHeader(ApiKey.PRODUCE, 9, 1, "c")
    assert encode_produce_response(1, 1, 9, response) == encode_response(header, response)


def _rebuilt(response: ProduceResponse) -> ProduceResponse:
    """``response`` again, through the cheap builders."""
    return produce_response(
        [
            topic_response(
                t.name,
                [
                    partition_response(
                        p.index,
                        p.error_code,
                        p.base_offset,
                        p.log_append_time_ms,
                        p.log_start_offset,
                        p.record_errors,
                        p.error_message,
                    )
                    for p in t.partition_responses
                ],
            )
            for t in response.responses
        ],
        response.throttle_time_ms,
    )


@settings(max_examples=200, deadline=None)
@given(response=response_st, version=st.integers(LOW, HIGH), cid=st.integers(0, 2**31 - 1))
def test_built_responses_are_constructed_ones(
    response: ProduceResponse, version: int, cid: int
) -> None:
    built = _rebuilt(response)
    assert built == response
    header = RequestHeader(ApiKey.PRODUCE, version, cid, "c")
    assert encode_response(header, built) == encode_response(header, response)
    hv = response_header_version(ApiKey.PRODUCE, version)
    assert encode_produce_response(cid, hv, version, built) == encode_response(header, response)


def test_built_responses_read_unset_fields_as_defaults() -> None:
    built = produce_response([topic_response("t", [partition_response(3, 0, 7)])])
    constructed = ProduceResponse(
        responses=[TopicResp(name="t", partition_responses=[PartResp(index=3, base_offset=7)])],
        throttle_time_ms=0,
    )
    part, made = (
        built.responses[0].partition_responses[0],
        constructed.responses[0].partition_responses[0],
    )
    for name in PartResp._struct.fields:
        assert getattr(part, name) == getattr(made, name), name
    for name in ProduceResponse._struct.fields:
        assert getattr(built, name) == getattr(constructed, name), name
    assert built.responses[0].topic_id == constructed.responses[0].topic_id
