"""ConsumerGroupDescribe (key 69), versions 0-1: KIP-848 groups as their coordinators
see them (group and assignment epochs, the assignor, each member's epoch, current and
target assignment with topic ids and names). v1 adds ``MemberType`` (KIP-1099): 0 for
a member using the classic protocol inside a consumer group (online migration), 1 for
a consumer-protocol member.

Groups are looked up on their coordinators in parallel. A group that is not a
consumer group, or does not exist, answers GROUP_ID_NOT_FOUND; an empty id
INVALID_GROUP_ID; an unreachable coordinator NOT_COORDINATOR. Authorized operations
are not computed (no ACLs yet): the field keeps Kafka's "not requested" value.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.group_routing import rpc_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE

Group: Any = ConsumerGroupDescribeResponse.DescribedGroup
Member: Any = Group.Member
# KIP-1099 MemberType values.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


def _assignment(topics: list[coordinator_pb2.TopicPartitions]) -> Any:
    return Member.Assignment(
        topic_partitions=[
            Member.Assignment.TopicPartitions(
                topic_id=uuid.UUID(bytes=bytes(t.topic_id)),
                topic_name=t.topic_name,
                partitions=list(t.partitions),
            )
            for t in topics
        ]
    )


def _group(g: coordinator_pb2.DescribedConsumerGroup) -> Any:
    return Group(
        error_code=g.error_code,
        error_message=g.error_message if g.HasField("error_message") else None,
        group_id=g.group_id,
        group_state=g.state,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=g.assignor_name,
        members=[
            Member(
                member_id=m.member_id,
                instance_id=m.instance_id if m.HasField("instance_id") else None,
                rack_id=m.rack_id if m.HasField("rack_id") else None,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex
                if m.HasField("subscribed_topic_regex")
                else None,
                assignment=_assignment(list(m.assignment)),
                target_assignment=_assignment(list(m.target_assignment)),
                member_type=MEMBER_TYPE_CLASSIC if m.classic else MEMBER_TYPE_CONSUMER,
            )
            for m in g.members
        ],
    )


def _error(group_id: str, code: int) -> Any:
    return Group(error_code=code, group_id=group_id, group_state="", assignor_name="", members=[])


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse:
    groups = gw.groups

    async def one(group_id: str) -> Any:
        if not group_id:
            return _error(group_id, ErrorCode.INVALID_GROUP_ID)
        stub = groups.coordinator_stub(group_id)
        if stub is None:
            return _error(group_id, ErrorCode.NOT_COORDINATOR)
        try:
            r = await stub.ConsumerGroupDescribe(
                coordinator_pb2.ConsumerGroupDescribeRequest(group_ids=[group_id]),
                timeout=groups.group_timeout_s(),
            )
        except grpc.aio.AioRpcError as exc:
            return _error(group_id, rpc_error(exc))
        return _group(r.groups[0])

    described = await asyncio.gather(*(one(g) for g in request.group_ids))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=list(described))
