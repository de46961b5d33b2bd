"""Bad input against a real gateway over raw sockets; a normal client works afterwards.

Kafka's reactions: oversized or negative size prefixes, unknown API keys, unsupported
versions (other than ApiVersions) and malformed bodies close the connection; an
ApiVersions request at an unknown version is answered with UNSUPPORTED_VERSION in v0.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from helpers.batches import producer_batch
from helpers.wire import connect, recv_frame

from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    ProduceRequest,
    decode_response,
    encode_request,
)
from odradek.tools.launcher import Cluster


def _closed(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _api_versions(s: socket.socket, correlation_id: int, version: int = 3) -> object:
    s.sendall(
        encode_request(
            18,
            version,
            correlation_id,
            "robust",
            ApiVersionsRequest(client_software_name="robust", client_software_version="1"),
        )
    )
    frame = recv_frame(s)
    cid, offset = parse_response_header(frame, 0)
    assert cid == correlation_id
    return decode_response(18, version, memoryview(frame)[offset:])


def _client_still_works(cluster: Cluster) -> None:
    with connect(cluster) as s:
        response = _api_versions(s, 4242)
        assert response.error_code == 0  # type: ignore[attr-defined]
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    md = admin.list_topics(timeout=10)
    assert md.brokers


def test_garbage_closes_only_that_connection(cluster: Cluster) -> None:
    with connect(cluster) as s:
        s.sendall(b"\x00\x00\x00\x10" + b"\xff" * 16)
        assert _closed(s)
    _client_still_works(cluster)


def test_two_gigabyte_length_prefix_is_refused_at_once(cluster: Cluster) -> None:
    with connect(cluster) as s:
        start = time.monotonic()
        s.sendall(struct.pack(">i", 2_000_000_000))
        assert _closed(s)
        assert time.monotonic() - start < 5
    with connect(cluster) as s:
        s.sendall(struct.pack(">i", -5) + b"abcd")
        assert _closed(s)
    _client_still_works(cluster)


def test_unknown_api_key_closes(cluster: Cluster) -> None:
    with connect(cluster) as s:
        body = struct.pack(">hhih", 9999, 0, 7, 3) + b"abc"
        s.sendall(struct.pack(">i", len(body)) + body)
        assert _closed(s)
    _client_still_works(cluster)


def test_unsupported_metadata_version_closes(cluster: Cluster) -> None:
    with connect(cluster) as s:
        body = struct.pack(">hhih", 3, 99, 7, 3) + b"abc"
        s.sendall(struct.pack(">i", len(body)) + body)
        assert _closed(s)


def test_api_versions_unknown_version_gets_v0_error_with_ranges(cluster: Cluster) -> None:
    with connect(cluster) as s:
        body = struct.pack(">hhih", 18, 127, 99, 3) + b"abc" + b"\x00" * 8
        s.sendall(struct.pack(">i", len(body)) + body)
        frame = recv_frame(s)
        cid, offset = parse_response_header(frame, 0)
        assert cid == 99
        response = decode_response(18, 0, memoryview(frame)[offset:])
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert keys[18] == (0, 4)
        assert 0 in keys and 1 in keys and 3 in keys
        # ...and the connection stays usable for a retry at a known version.
        assert _api_versions(s, 100).error_code == 0  # type: ignore[attr-defined]


def test_truncated_request_then_disconnect(cluster: Cluster) -> None:
    for _ in range(20):
        with connect(cluster) as s:
            s.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x03" + b"\x00" * 20)
    _client_still_works(cluster)


def test_malformed_body_closes(cluster: Cluster) -> None:
    with connect(cluster) as s:
        # Metadata v1 with an array count that promises 1000 topics but carries none.
        body = struct.pack(">hhih", 3, 1, 5, 3) + b"abc" + struct.pack(">i", 1000)
        s.sendall(struct.pack(">i", len(body)) + body)
        assert _closed(s)
    _client_still_works(cluster)


def test_pipelined_requests_answer_in_order(cluster: Cluster) -> None:
    with connect(cluster) as s:
        frames = b""
        for cid in range(1, 61):
            if cid % 3 == 0:
                frames += encode_request(
                    3, 9, cid, "pipe", MetadataRequest(topics=[], allow_auto_topic_creation=False)
                )
            else:
                frames += encode_request(
                    18,
                    3,
                    cid,
                    "pipe",
                    ApiVersionsRequest(client_software_name="p", client_software_version="1"),
                )
        s.sendall(frames)
        for cid in range(1, 61):
            frame = recv_frame(s)
            got, _ = parse_response_header(frame, 0)
            assert got == cid


def test_acks_zero_produce_gets_no_response(cluster: Cluster, unique_topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(unique_topic, 1, 1)])[unique_topic].result(30)
    records = bytes(producer_batch([(int(time.time() * 1000), b"k", b"v")]))
    P = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=0,
        timeout_ms=5000,
        topic_data=[
            P(name=unique_topic, partition_data=[P.PartitionProduceData(index=0, records=records)])
        ],
    )
    with connect(cluster) as s:
        s.sendall(encode_request(0, 9, 1, "acks0", request))
        s.sendall(
            encode_request(
                18,
                3,
                2,
                "acks0",
                ApiVersionsRequest(client_software_name="p", client_software_version="1"),
            )
        )
        frame = recv_frame(s)
        cid, _ = parse_response_header(frame, 0)
        assert cid == 2  # the acks=0 produce was silent


@pytest.mark.timeout(120)
def test_hundreds_of_idle_connections(cluster: Cluster) -> None:
    socks = [connect(cluster) for _ in range(300)]
    try:
        _client_still_works(cluster)
    finally:
        for s in socks:
            s.close()
    _client_still_works(cluster)
