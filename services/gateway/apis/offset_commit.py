"""OffsetCommit (key 8), versions 0-10: checked by the group's coordinator, written by
the offset store with acks=all, answered once durable.

Partitions of topics or partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION
here, as Kafka's broker does, and are not forwarded. The coordinator checks member id,
generation and static instance (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS), and metadata size
(OFFSET_METADATA_TOO_LARGE above ``offset.metadata.max.bytes``). v0 and commits with
generation -1 are for groups not using group management (allowed while the group is
Empty). v1's per-partition commit timestamp is ignored (Kafka ignores it too since
v2); v2-v4's ``retention_time_ms`` is stored as an expire timestamp. The metadata
string and the committed leader epoch (v6+) round-trip to OffsetFetch
(docs/compatibility.md C18). v10 names topics by id (KIP-848): an id the cluster does
not know answers UNKNOWN_TOPIC_ID for its partitions, as Kafka's
``KafkaApis.handleOffsetCommitRequest`` does; offsets are stored by topic name as for
every version.

Ordering: Kafka handles one request per connection at a time, and clients pipeline
asynchronous commits (librdkafka's auto-commit), so commits of one connection are
forwarded strictly one after another (the connection's OffsetCommit lane,
:mod:`odradek.gateway.ordered_lanes`; Produce has a lane of its own); a later commit can never
overtake an earlier one on its way to the log.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.offset_commits import (
    add_partitions,
    commit,
    name_topics_by_id,
    partition_answers,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import OffsetCommitRequest, OffsetCommitResponse
from odradek.rpc.v1 import offsets_pb2

API_KEY = ApiKey.OFFSET_COMMIT

TopicResp = OffsetCommitResponse.OffsetCommitResponseTopic
PartResp = TopicResp.OffsetCommitResponsePartition


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    if header.api_version >= 10:
        name_topics_by_id(request.topics, gw.metadata.current)
    # KafkaApis.handleOffsetCommitRequest: READ on the group, then on each topic.
    if not gw.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        denied = {t.name for t in request.topics if t.name}
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        denied = gw.authorizer.denied(
            ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics if t.name)
        )
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    async with ctx.lanes.lane(API_KEY):
        return await _commit(gw, header, request, denied, code)


async def _commit(
    gw: GatewayApi,
    header: RequestHeader,
    request: OffsetCommitRequest,
    denied: set[str],
    denied_code: int,
) -> OffsetCommitResponse:
    version = header.api_version
    call = offsets_pb2.CommitOffsetsRequest(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch if version >= 1 else -1,
        member_id=request.member_id if version >= 1 else "",
        retention_time_ms=request.retention_time_ms if 2 <= version <= 4 else -1,
    )
    if version >= 7 and request.group_instance_id is not None:
        call.group_instance_id = request.group_instance_id
    errors = add_partitions(
        call,
        request.topics,
        gw.metadata.current,
        version >= 6,
        denied,
        denied_code,
        by_id=version >= 10,
    )
    await commit(gw.groups, call, errors)
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=partition_answers(
            request.topics,
            errors,
            TopicResp,
            PartResp,
            missing=ErrorCode.UNKNOWN_SERVER_ERROR,
            with_topic_ids=version >= 10,
        ),
    )
