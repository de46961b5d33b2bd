"""Every (API, version) we advertise: requests encoded by kafka-python's client-side
classes decode with ours, and responses we encode decode with kafka-python."""

from __future__ import annotations

import pytest
from protocol_samples import request_sample, response_sample, supported_versions

from odradek.protocol import catalog
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import RequestHeader, parse_request_header
from odradek.protocol.messages import (
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
    schema_outline,
)
from odradek.protocol.versions import SUPPORTED, request_header_version

CASES = supported_versions()
IDS = [f"{key.name}-v{version}" for key, version in CASES]


def test_every_advertised_version_is_within_the_codec() -> None:
    for key, (low, high) in SUPPORTED.items():
        # from 0, or from Kafka 4's minimum where no old struct vouches for older versions
        assert low in (0, catalog.schema_versions(key)[0])
        assert high <= catalog.REQUESTS[key].max_version
        assert high <= catalog.RESPONSES[key].max_version


@pytest.mark.parametrize(("key", "version"), CASES, ids=IDS)
def test_request_from_kafka_python_client_decodes(key: ApiKey, version: int) -> None:
    request = request_sample(key, version)
    request.with_header(correlation_id=1234567, client_id="client-é")
    wire = bytes(request.encode(version=version, header=True, framed=True))

    frames = FrameDecoder().feed(wire)
    assert len(frames) == 1
    header, offset = parse_request_header(frames[0])
    assert (header.api_key, header.api_version) == (key, version)
    assert header.correlation_id == 1234567
    assert header.client_id == "client-é"
    assert header.header_version == request_header_version(key, version)

    decoded = decode_request(header, memoryview(frames[0])[offset:])
    assert decoded == request
    # and it is what kafka-python's own decoder makes of the same bytes
    theirs = catalog.REQUESTS[key].decode(bytes(frames[0][offset:]), version=version)
    assert decoded == theirs
    # re-encoding the decoded object reproduces the client's bytes exactly
    assert bytes(encode_body(decoded, version)) == bytes(frames[0][offset:])


@pytest.mark.parametrize(("key", "version"), CASES, ids=IDS)
def test_our_request_frame_matches_kafka_python_client(key: ApiKey, version: int) -> None:
    request = request_sample(key, version, seed=11)
    ours = encode_request(key, version, 99, "tool", request)
    request.with_header(correlation_id=99, client_id="tool")
    assert bytes(ours) == bytes(request.encode(version=version, header=True, framed=True))


@pytest.mark.parametrize(("key", "version"), CASES, ids=IDS)
def test_response_decodes_with_kafka_python(key: ApiKey, version: int) -> None:
    response = response_sample(key, version)
    if key == ApiKey.API_VERSIONS:
        response.error_code = 0  # an error response is always sent as v0
    header = RequestHeader(api_key=key, api_version=version, correlation_id=-77)
    wire = bytes(encode_response(header, response))

    theirs = catalog.RESPONSES[key].decode(wire, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == -77
    assert theirs == response

    frames = FrameDecoder().feed(wire)
    header_len = 4 if key == ApiKey.API_VERSIONS or not theirs.flexible_version_q(version) else 5
    ours = decode_response(key, version, memoryview(frames[0])[header_len:])
    assert ours == response


def test_encode_response_rejects_the_wrong_message_class() -> None:
    header = RequestHeader(api_key=ApiKey.FETCH, api_version=4, correlation_id=1)
    with pytest.raises(TypeError):
        encode_response(header, response_sample(ApiKey.PRODUCE, 4))


def test_schema_outline_names_the_fields_builders_use() -> None:
    outline = schema_outline(catalog.RESPONSES[ApiKey.PRODUCE], 10).splitlines()
    assert outline[0] == "ProduceResponse v10"
    assert "    partition_responses: []PartitionProduceResponse" in outline
    assert "      current_leader: LeaderIdAndEpoch (tagged)" in outline
    assert "      error_message: string (nullable)" in outline
    assert not any(
        "current_leader" in line
        for line in schema_outline(catalog.RESPONSES[ApiKey.PRODUCE], 9).splitlines()
    )
