"""ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848): our own definitions encode
the bytes Kafka's specification describes, round-trip at every version, and decode
strictly (truncated bodies are INVALID_REQUEST errors, not crashes)."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol import catalog
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from odradek.protocol.exceptions import InvalidRequestError
from odradek.protocol.messages import decode_request_body, decode_response, encode_body

TOPIC = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _heartbeat(version: int) -> ConsumerGroupHeartbeatRequest:
    TP = ConsumerGroupHeartbeatRequest.TopicPartitions
    fields = dict(
        group_id="g",
        member_id="m",
        member_epoch=3,
        instance_id="i",
        rack_id=None,
        rebalance_timeout_ms=300000,
        subscribed_topic_names=["t"],
        server_assignor="uniform",
        topic_partitions=[TP(topic_id=TOPIC, partitions=[0, 2])],
    )
    if version >= 1:
        fields["subscribed_topic_regex"] = "^t.*"
    return ConsumerGroupHeartbeatRequest(**fields)


def test_catalog_indexes_both_apis() -> None:
    assert catalog.REQUESTS[ApiKey.CONSUMER_GROUP_HEARTBEAT] is ConsumerGroupHeartbeatRequest
    assert catalog.RESPONSES[ApiKey.CONSUMER_GROUP_DESCRIBE] is ConsumerGroupDescribeResponse
    assert catalog.flexible_min(ApiKey.CONSUMER_GROUP_HEARTBEAT) == 0
    assert ConsumerGroupHeartbeatRequest.max_version == 1
    assert ConsumerGroupDescribeRequest.max_version == 1


def test_heartbeat_request_v0_bytes_follow_the_spec() -> None:
    body = encode_body(
        ConsumerGroupHeartbeatRequest(
            group_id="g",
            member_id="",
            member_epoch=0,
            rebalance_timeout_ms=1000,
            subscribed_topic_names=["t"],
        ),
        0,
    )
    expected = (
        b"\x02g"  # GroupId, compact string
        + b"\x01"  # MemberId ""
        + b"\x00\x00\x00\x00"  # MemberEpoch 0
        + b"\x00\x00"  # InstanceId, RackId null
        + b"\x00\x00\x03\xe8"  # RebalanceTimeoutMs
        + b"\x02\x02t"  # SubscribedTopicNames ["t"]
        + b"\x00"  # ServerAssignor null (no SubscribedTopicRegex in v0)
        + b"\x00"  # TopicPartitions null
        + b"\x00"  # tagged fields
    )
    assert body == expected


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_roundtrip(version: int) -> None:
    request = _heartbeat(version)
    decoded = decode_request_body(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, version, encode_body(request, version)
    )
    assert decoded.member_epoch == 3
    assert decoded.instance_id == "i"
    assert decoded.rack_id is None
    assert decoded.subscribed_topic_names == ["t"]
    assert decoded.topic_partitions[0].topic_id == TOPIC
    assert decoded.topic_partitions[0].partitions == [0, 2]
    assert decoded.subscribed_topic_regex == ("^t.*" if version >= 1 else None)


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_truncated_is_invalid(version: int) -> None:
    body = encode_body(_heartbeat(version), version)
    for cut in (1, 5, len(body) // 2, len(body) - 1):
        with pytest.raises(InvalidRequestError):
            decode_request_body(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, body[:cut])


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_roundtrip(version: int) -> None:
    A = ConsumerGroupHeartbeatResponse.Assignment
    response = ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=0,
        member_id="m",
        member_epoch=7,
        heartbeat_interval_ms=5000,
        assignment=A(topic_partitions=[A.TopicPartitions(topic_id=TOPIC, partitions=[1])]),
    )
    decoded = decode_response(68, version, encode_body(response, version))
    assert decoded.member_epoch == 7
    assert decoded.heartbeat_interval_ms == 5000
    assert decoded.assignment.topic_partitions[0].partitions == [1]
    empty = ConsumerGroupHeartbeatResponse(error_code=110, member_epoch=-1, heartbeat_interval_ms=0)
    decoded = decode_response(68, version, encode_body(empty, version))
    assert decoded.assignment is None and decoded.member_id is None and decoded.error_code == 110


@pytest.mark.parametrize("version", [0, 1])
def test_describe_roundtrip(version: int) -> None:
    request = ConsumerGroupDescribeRequest(group_ids=["a", "b"], include_authorized_operations=True)
    decoded = decode_request_body(
        ApiKey.CONSUMER_GROUP_DESCRIBE, version, encode_body(request, version)
    )
    assert decoded.group_ids == ["a", "b"] and decoded.include_authorized_operations
    G = ConsumerGroupDescribeResponse.DescribedGroup
    M = G.Member
    assignment = M.Assignment(
        topic_partitions=[
            M.Assignment.TopicPartitions(topic_id=TOPIC, topic_name="t", partitions=[0])
        ]
    )
    member = M(
        member_id="m",
        member_epoch=4,
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=["t"],
        assignment=assignment,
        target_assignment=assignment,
        member_type=1,
    )
    response = ConsumerGroupDescribeResponse(
        groups=[
            G(
                error_code=0,
                group_id="a",
                group_state="Stable",
                group_epoch=4,
                assignment_epoch=4,
                assignor_name="uniform",
                members=[member],
            )
        ]
    )
    out = decode_response(69, version, encode_body(response, version))
    got = out.groups[0].members[0]
    assert got.member_epoch == 4 and got.assignment.topic_partitions[0].topic_name == "t"
    assert got.target_assignment.topic_partitions[0].partitions == [0]
    assert got.member_type == (1 if version >= 1 else -1)
    assert out.groups[0].authorized_operations == -2147483648
