"""Header versions per (API, version) exactly as Kafka chooses them, and header
parsing/encoding."""

from __future__ import annotations

import importlib.resources
import json
import re
import struct

import pytest

from odradek.protocol import catalog
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.exceptions import InvalidRequestError, UnknownApiKeyError
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)
from odradek.protocol.messages import decode_request
from odradek.protocol.versions import (
    SUPPORTED,
    is_flexible,
    request_header_version,
    response_header_version,
)


def _flexible_from_json(key: ApiKey) -> int | None:
    """First flexible version, read straight from the schema file kafka-python ships,
    or ours for the APIs it lacks (independent of kafka-python's parsing)."""
    name = catalog.REQUESTS[key].__name__
    text = importlib.resources.files("kafka.protocol.schemas.resources").joinpath(f"{name}.json")
    if not text.is_file():  # KIP-848 APIs: odradek.protocol.consumer_group_messages
        flexible = catalog.REQUESTS[key].json["flexibleVersions"]
        return None if flexible == "none" else int(flexible.rstrip("+"))
    raw = re.sub(r"(?m)^\s*//.*$", "", text.read_text())
    flexible = json.loads(raw)["flexibleVersions"]
    return None if flexible == "none" else int(flexible.rstrip("+"))


TABLE = [
    (key, version) for key, (low, high) in SUPPORTED.items() for version in range(low, high + 1)
]


@pytest.mark.parametrize(("key", "version"), TABLE, ids=[f"{k.name}-v{v}" for k, v in TABLE])
def test_header_versions_follow_flexible_versions(key: ApiKey, version: int) -> None:
    first = _flexible_from_json(key)
    flexible = first is not None and version >= first
    assert is_flexible(key, version) is flexible
    assert request_header_version(key, version) == (2 if flexible else 1)
    expected_response = 0 if key == ApiKey.API_VERSIONS else (1 if flexible else 0)
    assert response_header_version(key, version) == expected_response


@pytest.mark.parametrize(
    ("key", "version", "request_hv", "response_hv"),
    [
        (ApiKey.PRODUCE, 8, 1, 0),
        (ApiKey.PRODUCE, 9, 2, 1),
        (ApiKey.FETCH, 11, 1, 0),
        (ApiKey.FETCH, 12, 2, 1),
        (ApiKey.METADATA, 8, 1, 0),
        (ApiKey.METADATA, 9, 2, 1),
        (ApiKey.API_VERSIONS, 2, 1, 0),
        (ApiKey.API_VERSIONS, 3, 2, 0),  # flexible body, v0 response header
        (ApiKey.API_VERSIONS, 4, 2, 0),
        (ApiKey.OFFSET_DELETE, 0, 1, 0),  # never flexible
        (ApiKey.DESCRIBE_CLUSTER, 0, 2, 1),  # flexible from v0
        (ApiKey.JOIN_GROUP, 5, 1, 0),
        (ApiKey.JOIN_GROUP, 6, 2, 1),
    ],
)
def test_known_header_versions(
    key: ApiKey, version: int, request_hv: int, response_hv: int
) -> None:
    assert request_header_version(key, version) == request_hv
    assert response_header_version(key, version) == response_hv


def test_header_version_above_the_schema_max_follows_kafka() -> None:
    # Kafka's requestHeaderVersion only compares with the first flexible version
    assert request_header_version(ApiKey.API_VERSIONS, 127) == 2
    with pytest.raises(UnknownApiKeyError):
        request_header_version(ApiKey.SHARE_GROUP_HEARTBEAT, 0)  # no schema
    with pytest.raises(UnknownApiKeyError):
        request_header_version(999, 0)


def test_parse_v1_header_with_null_client_id() -> None:
    raw = struct.pack(">hhih", 3, 1, 42, -1) + b"BODY"
    header, offset = parse_request_header(raw)
    assert header == RequestHeader(3, 1, 42, None, 1, ())
    assert raw[offset:] == b"BODY"


def test_parse_v2_header_keeps_classic_client_id_and_reads_tags() -> None:
    tags = b"\x02" + b"\x00\x03abc" + b"\x05\x00"  # two tags: 0 -> b"abc", 5 -> b""
    raw = struct.pack(">hhih", 0, 9, 7, 3) + b"cid" + tags + b"BODY"
    header, offset = parse_request_header(raw)
    assert header.header_version == 2
    assert header.client_id == "cid"
    assert header.tagged_fields == ((0, b"abc"), (5, b""))
    assert raw[offset:] == b"BODY"


def test_encode_request_header_round_trips() -> None:
    for key, version in [(ApiKey.PRODUCE, 3), (ApiKey.PRODUCE, 9)]:
        raw = encode_request_header(key, version, -5, "me")
        header, offset = parse_request_header(raw)
        assert (header.api_key, header.api_version, header.correlation_id) == (key, version, -5)
        assert header.client_id == "me" and offset == len(raw)
    assert encode_request_header(0, 9, 1, None).endswith(b"\xff\xff\x00")


def test_unknown_api_key_still_yields_the_correlation_id() -> None:
    raw = struct.pack(">hhih", 1000, 0, 31337, 2) + b"id" + b"\x00\x01"
    header, offset = parse_request_header(raw)
    assert (header.correlation_id, header.client_id, header.header_version) == (31337, "id", 1)
    with pytest.raises(UnknownApiKeyError) as info:
        decode_request(header, memoryview(raw)[offset:])
    assert info.value.correlation_id == 31337


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\x03\x00\x01\x00\x00\x00",  # 7 bytes: no room for the correlation id
        struct.pack(">hhih", 3, 1, 42, 10) + b"short",  # client_id overruns
        struct.pack(">hhi", 3, 1, 42) + b"\x00",  # client_id length cut
        struct.pack(">hhih", 3, 9, 42, 0),  # v2 header without tag section
        struct.pack(">hhih", 3, 9, 42, 0) + b"\x01\x00\x05ab",  # tag overruns
        struct.pack(">hhih", 3, 9, 42, 0) + b"\xff\xff\xff\xff\xff\xff",  # varint too long
    ],
)
def test_malformed_headers(raw: bytes) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_request_header(raw)
    if len(raw) >= 8:
        assert info.value.correlation_id == 42


def test_client_ids_and_header_versions_are_remembered_within_a_bound() -> None:
    # One header per request (issue 18): looked up, never recomputed, and a client
    # inventing ids or keys costs no memory past the bound.
    from odradek.protocol import headers

    for n in range(headers._MAX_CACHED + 10):
        cid = f"client-{n}".encode()
        raw = struct.pack(">hhih", ApiKey.PRODUCE, 9, n, len(cid)) + cid + b"\x00"
        header, offset = parse_request_header(raw)
        assert (header.client_id, header.correlation_id, offset) == (cid.decode(), n, len(raw))
        raw = struct.pack(">hhih", 1000 + n, 0, n, -1)  # an unknown key: header v1
        header, offset = parse_request_header(raw)
        assert (header.api_key, header.header_version, offset) == (1000 + n, 1, len(raw))
    assert len(headers._CLIENT_IDS) <= headers._MAX_CACHED
    assert len(headers._HEADER_VERSIONS) <= headers._MAX_CACHED
    long_id = b"x" * 32_767  # the longest a client may send: decoded, not remembered
    raw = struct.pack(">hhih", ApiKey.PRODUCE, 9, 7, len(long_id)) + long_id + b"\x00"
    assert parse_request_header(raw)[0].client_id == long_id.decode()
    assert long_id not in headers._CLIENT_IDS
    bad = b"\xffid"  # not UTF-8: replaced, the first time and when remembered
    raw = struct.pack(">hhih", 0, 9, 1, len(bad)) + bad + b"\x00"
    for _ in range(2):
        header, _ = parse_request_header(raw)
        assert header.client_id == "\ufffdid"
        assert header.header_version == 2


def test_response_headers() -> None:
    assert encode_response_header(7, 0) == b"\x00\x00\x00\x07"
    assert encode_response_header(7, 1) == b"\x00\x00\x00\x07\x00"
    assert parse_response_header(b"\x00\x00\x00\x07\x00rest", 1) == (7, 5)
    assert parse_response_header(b"\x00\x00\x00\x07rest", 0) == (7, 4)
