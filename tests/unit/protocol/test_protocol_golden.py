"""Old versions byte for byte.

Kafka 4's JSON schemas dropped Produce v0-2, Fetch v0-3, ListOffsets v0, ... from
``validVersions`` (kafka-python lowers every minimum back to 0), so these versions are
checked against two independent references: kafka-python's old hand-written struct
definitions (``kafka/protocol/old``) and byte strings written out here from the
protocol guide.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import struct
import uuid
from typing import Any

import kafka.protocol.old as old_protocol
import pytest
from kafka.protocol.old import types as T
from kafka.protocol.old.api import Request, Response

from odradek.protocol import catalog
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import RequestHeader, parse_request_header
from odradek.protocol.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    decode_request,
    decode_request_body,
    decode_response,
    encode_body,
    encode_response,
)
from odradek.protocol.versions import SUPPORTED, is_flexible


def _has_tagged_fields(t: Any) -> bool:
    if t is T.TaggedFields:
        return True
    if isinstance(t, T.Schema):
        return any(_has_tagged_fields(f) for f in t.fields)
    if isinstance(t, T.Array):
        return _has_tagged_fields(t.array_of)
    return False


def _unmodelled_flexible(key: ApiKey, version: int, old: Any) -> bool:
    """An old struct that reuses a non-flexible schema for a flexible version (e.g.
    kafka-python's DescribeAcls v2 "Enable flexible version" with the v1 schema): it
    is no reference for the compact encoding, the JSON schema is."""
    return is_flexible(key, version) and not _has_tagged_fields(old.SCHEMA)


def _old_classes() -> list[Any]:
    found: list[Any] = []
    for info in pkgutil.iter_modules(old_protocol.__path__):
        module = importlib.import_module(f"{old_protocol.__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, (Request, Response))
                and obj.__module__ == module.__name__
                and isinstance(getattr(obj, "API_VERSION", None), int)
                and not inspect.isabstract(obj)
            ):
                key = ApiKey(getattr(obj, "API_KEY"))  # noqa: B009 (untyped library class)
                low, high = SUPPORTED.get(key, (0, -1))
                version = getattr(obj, "API_VERSION")  # noqa: B009
                if low <= version <= high and not _unmodelled_flexible(key, version, obj):
                    found.append(obj)
    return sorted(found, key=lambda c: (c.API_KEY, c.is_request(), c.API_VERSION))


class _OldValues:
    """Distinct values for an old ``Schema``, so any misplaced field shows."""

    def __init__(self) -> None:
        self.k = 0

    def __call__(self, t: Any) -> Any:
        self.k += 1
        k = self.k
        if isinstance(t, T.Schema):
            return tuple(self(f) for f in t.fields)
        if isinstance(t, T.Array):
            return [self(t.array_of) for _ in range(2)]
        fixed = {T.Int8: k % 100, T.Int16: k, T.Int32: k * 1000, T.Int64: k * 10**9}
        if t in fixed:
            return fixed[t]
        if t is T.Boolean:
            return True
        if isinstance(t, T.String):
            return f"s{k}"
        if t in (T.Bytes, T.CompactBytes):
            return b"b%d" % k
        if t is T.TaggedFields:
            return {}
        if t is T.UUID:
            return uuid.UUID(int=k)
        if t is T.Float64:
            return k + 0.25
        if t is T.BitField:
            return {1, 3}
        raise TypeError(t)


OLD = _old_classes()


def test_old_definitions_cover_the_versions_kafka_4_dropped() -> None:
    covered = {(c.API_KEY, c.is_request(), c.API_VERSION) for c in OLD}
    for key, (low, _high) in SUPPORTED.items():
        json_min = catalog.schema_versions(key)[0]
        for version in range(low, json_min):
            assert (key, True, version) in covered, (key.name, version)
            assert (key, False, version) in covered, (key.name, version)


@pytest.mark.parametrize("old", OLD, ids=[c.__name__ for c in OLD])
def test_old_struct_bytes_round_trip(old: Any) -> None:
    values = _OldValues()(old.SCHEMA)
    key, version = ApiKey(old.API_KEY), old.API_VERSION
    if key == ApiKey.API_VERSIONS and not old.is_request():
        values = (0, *values[1:])  # with an error the body is always v0
    wire = old(*values).encode()
    if old.is_request():
        ours = decode_request_body(key, version, wire)
    else:
        ours = decode_response(key, version, wire)
    assert bytes(encode_body(ours, version)) == wire
    again = old.decode(bytes(encode_body(ours, version)))
    assert again.encode() == wire


# --- hand-written frames from the protocol guide -----------------------------------


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _request(api_key: int, version: int, body: bytes, cid: int = 5) -> bytes:
    payload = struct.pack(">hhi", api_key, version, cid) + _str("kcat") + body
    return struct.pack(">i", len(payload)) + payload


def _decode(wire: bytes) -> tuple[RequestHeader, Any]:
    (frame,) = FrameDecoder().feed(wire)
    header, offset = parse_request_header(frame)
    return header, decode_request(header, memoryview(frame)[offset:])


RECORDS = bytes(range(40))


def test_produce_v0_request_and_response() -> None:
    # acks INT16, timeout INT32, [topic STRING, [partition INT32, message_set BYTES]]
    body = (
        struct.pack(">hi", -1, 1500)
        + struct.pack(">i", 1)
        + _str("t")
        + struct.pack(">i", 1)
        + struct.pack(">ii", 3, len(RECORDS))
        + RECORDS
    )
    header, req = _decode(_request(0, 0, body))
    assert isinstance(req, ProduceRequest)
    assert (req.acks, req.timeout_ms) == (-1, 1500)
    (topic,) = req.topic_data
    (part,) = topic.partition_data
    assert (topic.name, part.index, bytes(part.records)) == ("t", 3, RECORDS)

    P = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    resp = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="t", partition_responses=[P(index=3, error_code=0, base_offset=77)]
            )
        ]
    )
    # [topic STRING, [partition INT32, error_code INT16, base_offset INT64]]
    expected = (
        struct.pack(">i", 5)
        + struct.pack(">i", 1)
        + _str("t")
        + struct.pack(">i", 1)
        + struct.pack(">ihq", 3, 0, 77)
    )
    assert bytes(encode_response(header, resp)) == struct.pack(">i", len(expected)) + expected


def test_produce_v2_response_has_log_append_time_and_throttle() -> None:
    header = RequestHeader(api_key=ApiKey.PRODUCE, api_version=2, correlation_id=9)
    P = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    resp = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="t",
                partition_responses=[
                    P(index=0, error_code=6, base_offset=-1, log_append_time_ms=123)
                ],
            )
        ],
        throttle_time_ms=50,
    )
    expected = (
        struct.pack(">i", 9)
        + struct.pack(">i", 1)
        + _str("t")
        + struct.pack(">i", 1)
        + struct.pack(">ihqq", 0, 6, -1, 123)
        + struct.pack(">i", 50)
    )
    assert bytes(encode_response(header, resp))[4:] == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_to_v3_request_and_response(version: int) -> None:
    # replica_id INT32, max_wait_ms INT32, min_bytes INT32, v3+: max_bytes INT32,
    # [topic STRING, [partition INT32, fetch_offset INT64, partition_max_bytes INT32]]
    body = struct.pack(">iii", -1, 500, 1)
    if version >= 3:
        body += struct.pack(">i", 52428800)
    body += struct.pack(">i", 1) + _str("t") + struct.pack(">i", 1)
    body += struct.pack(">iqi", 2, 1000, 1048576)
    header, req = _decode(_request(1, version, body))
    assert isinstance(req, FetchRequest)
    assert (req.replica_id, req.max_wait_ms, req.min_bytes) == (-1, 500, 1)
    if version >= 3:
        assert req.max_bytes == 52428800
    part = req.topics[0].partitions[0]
    assert (req.topics[0].topic, part.partition, part.fetch_offset) == ("t", 2, 1000)
    assert part.partition_max_bytes == 1048576

    R = FetchResponse.FetchableTopicResponse
    resp = FetchResponse(
        throttle_time_ms=7,
        responses=[
            R(
                topic="t",
                partitions=[
                    R.PartitionData(
                        partition_index=2, error_code=0, high_watermark=1040, records=RECORDS
                    )
                ],
            )
        ],
    )
    # v1+: throttle INT32; [topic, [partition INT32, error INT16, hw INT64, records BYTES]]
    expected = struct.pack(">i", 5)
    if version >= 1:
        expected += struct.pack(">i", 7)
    expected += struct.pack(">i", 1) + _str("t") + struct.pack(">i", 1)
    expected += struct.pack(">ihqi", 2, 0, 1040, len(RECORDS)) + RECORDS
    assert bytes(encode_response(header, resp))[4:] == expected


def test_metadata_v0_request_and_response() -> None:
    header, req = _decode(_request(3, 0, struct.pack(">i", 2) + _str("a") + _str("b")))
    assert isinstance(req, MetadataRequest)
    assert [t.name for t in req.topics] == ["a", "b"]

    B = MetadataResponse.MetadataResponseBroker
    T_ = MetadataResponse.MetadataResponseTopic
    resp = MetadataResponse(
        brokers=[B(node_id=1, host="h", port=9092)],
        topics=[
            T_(
                error_code=0,
                name="a",
                partitions=[
                    T_.MetadataResponsePartition(
                        error_code=0,
                        partition_index=0,
                        leader_id=1,
                        replica_nodes=[1],
                        isr_nodes=[1],
                    )
                ],
            )
        ],
    )
    # [node_id INT32, host STRING, port INT32],
    # [error INT16, name STRING, [error INT16, partition INT32, leader INT32,
    #  replicas [INT32], isr [INT32]]]
    expected = (
        struct.pack(">i", 5)
        + struct.pack(">ii", 1, 1)
        + _str("h")
        + struct.pack(">i", 9092)
        + struct.pack(">i", 1)
        + struct.pack(">h", 0)
        + _str("a")
        + struct.pack(">i", 1)
        + struct.pack(">hii", 0, 0, 1)
        + struct.pack(">ii", 1, 1)
        + struct.pack(">ii", 1, 1)
    )
    assert bytes(encode_response(header, resp))[4:] == expected


def test_list_offsets_v0_request_and_response() -> None:
    # replica_id INT32, [topic STRING, [partition INT32, timestamp INT64, max_num_offsets INT32]]
    body = struct.pack(">ii", -1, 1) + _str("t") + struct.pack(">i", 1)
    body += struct.pack(">iqi", 0, -1, 1)
    header, req = _decode(_request(2, 0, body))
    assert isinstance(req, ListOffsetsRequest)
    part = req.topics[0].partitions[0]
    assert (part.partition_index, part.timestamp, part.max_num_offsets) == (0, -1, 1)

    R = ListOffsetsResponse.ListOffsetsTopicResponse
    resp = ListOffsetsResponse(
        topics=[
            R(
                name="t",
                partitions=[
                    R.ListOffsetsPartitionResponse(
                        partition_index=0, error_code=0, old_style_offsets=[42]
                    )
                ],
            )
        ]
    )
    # [topic STRING, [partition INT32, error INT16, offsets [INT64]]]
    expected = struct.pack(">i", 5) + struct.pack(">i", 1) + _str("t") + struct.pack(">i", 1)
    expected += struct.pack(">ih", 0, 0) + struct.pack(">iq", 1, 42)
    assert bytes(encode_response(header, resp))[4:] == expected
