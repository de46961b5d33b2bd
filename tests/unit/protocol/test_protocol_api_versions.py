"""ApiVersions: the exact bytes old librdkafka parses, the UNSUPPORTED_VERSION answer,
and the answer-or-close policy."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KafkaPythonResponse

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import api_versions_response, build_api_versions_response
from odradek.protocol.exceptions import (
    FrameTooLargeError,
    InvalidFrameError,
    InvalidRequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import ApiVersionsRequest, decode_request, encode_request
from odradek.protocol.policy import Action, classify, error_response
from odradek.protocol.versions import SUPPORTED

EXPECTED = sorted((int(k), lo, hi) for k, (lo, hi) in SUPPORTED.items())


class _Reader:
    """A reader as strict as librdkafka 2.0.2: fixed layout, no unknown tags."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7


def test_v3_response_has_v0_header_and_no_default_tagged_fields() -> None:
    wire = bytes(build_api_versions_response(3, correlation_id=0x01020304))
    r = _Reader(wire)
    assert r.take(">i") == len(wire) - 4
    assert r.take(">i") == 0x01020304
    # header v0: the error code follows the correlation id directly (no 0x00 tag byte)
    assert r.take(">h") == 0
    count = r.uvarint() - 1
    entries = []
    for _ in range(count):
        entries.append((r.take(">h"), r.take(">h"), r.take(">h")))
        assert r.uvarint() == 0  # per-entry tagged fields: none
    assert entries == EXPECTED
    assert r.take(">i") == 0  # throttle_time_ms
    # top level: an empty tagged-field section and nothing after it
    assert wire[r.pos :] == b"\x00"


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_version_decodes_with_kafka_python(version: int) -> None:
    wire = bytes(build_api_versions_response(version, correlation_id=11))
    decoded = KafkaPythonResponse.decode(wire, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 11
    assert decoded.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == EXPECTED
    n = len(EXPECTED)
    if version == 0:  # error, INT32-counted array
        body = 2 + 4 + 6 * n
    elif version < 3:  # + throttle_time_ms
        body = 2 + 4 + 6 * n + 4
    else:  # compact array, a tag byte per entry, throttle, top-level tag byte
        body = 2 + 1 + 7 * n + 4 + 1
    assert len(wire) == 4 + 4 + body  # size + v0 header (correlation id only)


@pytest.mark.parametrize("version", [5, 127, -1])
def test_unknown_version_gets_unsupported_version_as_v0(version: int) -> None:
    wire = bytes(build_api_versions_response(version, correlation_id=77))
    r = _Reader(wire)
    assert r.take(">i") == len(wire) - 4
    assert r.take(">i") == 77
    assert r.take(">h") == 35  # UNSUPPORTED_VERSION
    count = r.take(">i")
    entries = [(r.take(">h"), r.take(">h"), r.take(">h")) for _ in range(count)]
    assert entries == EXPECTED
    assert r.pos == len(wire)  # v0: no throttle_time_ms, no tags


def test_unsupported_api_versions_request_is_answered_through_the_policy() -> None:
    # a future client: ApiVersions v127 with a v2 header and a body we cannot parse
    raw = struct.pack(">hhih", 18, 127, 4242, 6) + b"future" + b"\x00" + b"\x99\x98\x97"
    (frame,) = FrameDecoder().feed(struct.pack(">i", len(raw)) + raw)
    header, offset = parse_request_header(frame)
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(header, memoryview(frame)[offset:])
    assert classify(info.value) is Action.RESPOND_ERROR
    answer = error_response(info.value)
    assert answer == build_api_versions_response(127, correlation_id=4242)


def test_api_versions_v3_request_tolerates_any_client_software_name() -> None:
    request = ApiVersionsRequest(
        client_software_name="some client/1 ✓ (weird)", client_software_version=""
    )
    wire = bytes(encode_request(ApiKey.API_VERSIONS, 3, 1, "c", request))
    (frame,) = FrameDecoder().feed(wire)
    header, offset = parse_request_header(frame)
    decoded = decode_request(header, memoryview(frame)[offset:])
    assert decoded.client_software_name == "some client/1 ✓ (weird)"
    assert decoded.client_software_version == ""


def test_response_object_can_be_narrowed() -> None:
    response = api_versions_response(supported={ApiKey.API_VERSIONS: (0, 3)})
    assert [(k.api_key, k.max_version) for k in response.api_keys] == [(18, 3)]
    assert (
        bytes(build_api_versions_response(4, 1, supported={ApiKey.API_VERSIONS: (0, 3)}))[8:10]
        == b"\x00\x23"
    )


@pytest.mark.parametrize(
    ("exc", "action"),
    [
        (FrameTooLargeError(2**31 - 1, 100), Action.CLOSE),
        (InvalidFrameError("negative"), Action.CLOSE),
        (UnknownApiKeyError(1000, correlation_id=1), Action.CLOSE),
        (InvalidRequestError("short", correlation_id=1), Action.CLOSE),
        (UnsupportedVersionError(ApiKey.PRODUCE, 99, correlation_id=1), Action.CLOSE),
        (UnsupportedVersionError(ApiKey.API_VERSIONS, 99, correlation_id=1), Action.RESPOND_ERROR),
        (UnsupportedVersionError(ApiKey.API_VERSIONS, 99), Action.CLOSE),  # nothing to correlate
        (RuntimeError("a bug"), Action.CLOSE),
    ],
)
def test_policy(exc: BaseException, action: Action) -> None:
    assert classify(exc) is action
    assert (error_response(exc) is not None) is (action is Action.RESPOND_ERROR)


def test_unsupported_produce_version_closes() -> None:
    raw = struct.pack(">hhih", 0, 12, 5, -1) + b"\x00" + b"\x00" * 12
    header, offset = parse_request_header(raw)
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(header, memoryview(raw)[offset:])
    assert info.value.supported == SUPPORTED[ApiKey.PRODUCE]
    assert classify(info.value) is Action.CLOSE
