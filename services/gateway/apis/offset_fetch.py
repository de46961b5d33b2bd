"""OffsetFetch (key 9), versions 0-10: served by the offset store from its cache.

v0-7 ask about one group, v8+ about several, each with its own error (docs/compatibility.md
C18). ``topics`` null (v2+) means every partition the group committed. A partition
without a committed offset answers offset -1 and no error; the metadata string and
committed leader epoch (v5+) come back as committed. COORDINATOR_LOAD_IN_PROGRESS while
the shard loads, NOT_COORDINATOR when the shard is moving. ``require_stable`` (v7+,
KIP-447): a partition for which an open transaction holds a TxnOffsetCommit answers
UNSTABLE_OFFSET_COMMIT (the consumer retries until the transaction ends); without it
the last stable commit is returned. v9's member id and epoch are for KIP-848 groups:
when a request names a member, its coordinator checks it is current
(UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH as the group error); classic groups ignore
them, as Kafka does. v10 names topics by id (KIP-848): an id the cluster does not know
answers UNKNOWN_TOPIC_ID on its partitions; asked for every topic, committed offsets of
topics that no longer exist are left out (they have no id to name them by).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TypedDict

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.group_routing import rpc_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from odradek.rpc.v1 import common_pb2, coordinator_pb2, offsets_pb2

API_KEY = ApiKey.OFFSET_FETCH

OldTopic = OffsetFetchResponse.OffsetFetchResponseTopic
OldPartition = OldTopic.OffsetFetchResponsePartition
Group = OffsetFetchResponse.OffsetFetchResponseGroup
NewTopic = Group.OffsetFetchResponseTopics
NewPartition = NewTopic.OffsetFetchResponsePartitions

# The topics asked about: v0-7 at the top level, v8+ per group; None means all.
Wanted = (
    list[OffsetFetchRequest.OffsetFetchRequestTopic]
    | list[OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics]
    | None
)


class _Committed(TypedDict):
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    error_code: int


async def _validate_member(gw: GatewayApi, group_id: str, member_id: str, epoch: int) -> int:
    groups = gw.groups
    stub = groups.coordinator_stub(group_id)
    if stub is None:
        return ErrorCode.NOT_COORDINATOR
    try:
        r = await stub.ValidateOffsetFetch(
            coordinator_pb2.ValidateOffsetFetchRequest(
                group_id=group_id, member_id=member_id, member_epoch=epoch
            ),
            timeout=groups.group_timeout_s(),
        )
    except grpc.aio.AioRpcError as exc:
        return rpc_error(exc)
    return int(r.error_code)


async def _fetch(
    gw: GatewayApi,
    ctx: ConnectionContext,
    group_id: str,
    topics: Wanted,
    require_stable: bool,
    member: tuple[str, int] | None = None,
) -> offsets_pb2.FetchOffsetsGroupResult:
    # KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group; offsets of topics the
    # principal may not DESCRIBE are left out (Kafka answers TOPIC_AUTHORIZATION_FAILED
    # for named ones; here they read as "no committed offset").
    if not gw.authorizer.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return offsets_pb2.FetchOffsetsGroupResult(
            group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    result = await _fetch_allowed(gw, group_id, topics, require_stable, member)
    if gw.authorizer.enabled:
        denied = gw.authorizer.denied(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {o.topic for o in result.offsets}
        )
        if denied:
            kept = [o for o in result.offsets if o.topic not in denied]
            del result.offsets[:]
            result.offsets.extend(kept)
    return result


async def _fetch_allowed(
    gw: GatewayApi,
    group_id: str,
    topics: Wanted,
    require_stable: bool,
    member: tuple[str, int] | None = None,
) -> offsets_pb2.FetchOffsetsGroupResult:
    groups = gw.groups
    if member is not None and (member[0] or member[1] >= 0):
        error = await _validate_member(gw, group_id, *member)
        if error:
            return offsets_pb2.FetchOffsetsGroupResult(group_id=group_id, error_code=error)
    wanted = offsets_pb2.FetchOffsetsGroup(group_id=group_id, all_topics=topics is None)
    if topics is not None:
        for t in topics:
            for index in t.partition_indexes:
                wanted.partitions.append(common_pb2.TopicPartition(topic=t.name, partition=index))
    response = await groups.offsets.fetch(
        groups.shard(group_id),
        offsets_pb2.FetchOffsetsRequest(groups=[wanted], require_stable=require_stable),
    )
    if not response.groups:
        return offsets_pb2.FetchOffsetsGroupResult(
            group_id=group_id, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
    return response.groups[0]


def _by_topic(
    result: offsets_pb2.FetchOffsetsGroupResult, topics: Wanted
) -> list[tuple[str, list[tuple[int, offsets_pb2.CommittedOffset | None]]]]:
    """The answer in request order (or the store's order for "all topics")."""
    if topics is None:
        order: dict[str, list[tuple[int, offsets_pb2.CommittedOffset | None]]] = {}
        for o in result.offsets:
            order.setdefault(o.topic, []).append((o.partition, o))
        return list(order.items())
    found = {(o.topic, o.partition): o for o in result.offsets}
    return [(t.name, [(i, found.get((t.name, i))) for i in t.partition_indexes]) for t in topics]


def _fields(o: offsets_pb2.CommittedOffset | None, error: int) -> _Committed:
    if o is None or error:
        return {
            "committed_offset": -1,
            "committed_leader_epoch": -1,
            "metadata": "",
            "error_code": error,
        }
    return {
        "committed_offset": o.offset,
        "committed_leader_epoch": o.leader_epoch,
        "metadata": o.metadata if o.HasField("metadata") else "",
        "error_code": o.error_code,
    }


def _name_topics_by_id(gw: GatewayApi, topics: Wanted) -> None:
    """v10 asks by topic id: each topic takes its name from the cluster's metadata (an
    id nobody knows keeps an empty name, answered UNKNOWN_TOPIC_ID)."""
    snapshot = gw.metadata.current
    for t in topics or []:
        topic_id = getattr(t, "topic_id", None)
        known = (
            snapshot.topics_by_id.get(topic_id.bytes) if isinstance(topic_id, uuid.UUID) else None
        )
        t.name = known.name if known is not None else ""


def _with_topic_ids(gw: GatewayApi, rows: list[NewTopic], asked: Wanted) -> list[NewTopic]:
    """v10 answers by topic id: the ids asked for, in request order, or (every topic
    asked for) the ids of the committed topics that still exist."""
    snapshot = gw.metadata.current
    if asked is not None:
        for row, t in zip(rows, asked, strict=True):
            row.topic_id = t.topic_id
            if not t.name:
                for part in row.partitions:
                    part.error_code = ErrorCode.UNKNOWN_TOPIC_ID
        return rows
    kept = []
    for row in rows:
        known = snapshot.topics.get(row.name)
        if known is not None:
            row.topic_id = uuid.UUID(bytes=bytes(known.topic_id))
            kept.append(row)
    return kept


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    version = header.api_version
    stable = bool(request.require_stable) if version >= 7 else False
    if version >= 10:
        for g in request.groups:
            _name_topics_by_id(gw, g.topics)
    if version >= 8:
        results = await asyncio.gather(
            *(
                _fetch(
                    gw,
                    ctx,
                    g.group_id,
                    g.topics,
                    stable,
                    (g.member_id or "", g.member_epoch) if version >= 9 else None,
                )
                for g in request.groups
            )
        )
        out = []
        for g, result in zip(request.groups, results, strict=True):
            error = result.error_code
            topics = [] if error and g.topics is None else _by_topic(result, g.topics)
            rows = [
                NewTopic(
                    name=name,
                    partitions=[
                        NewPartition(partition_index=i, **_fields(o, ErrorCode.NONE))
                        for i, o in parts
                    ],
                )
                for name, parts in topics
            ]
            if version >= 10:
                rows = _with_topic_ids(gw, rows, g.topics)
            out.append(Group(group_id=g.group_id, error_code=error, topics=rows))
        return OffsetFetchResponse(throttle_time_ms=0, groups=out)
    topics_req = request.topics if version >= 2 else (request.topics or [])
    result = await _fetch(gw, ctx, request.group_id, topics_req, stable)
    error = result.error_code
    # v0/v1 have no group-level error: it goes on every partition.
    per_partition_error = error if version < 2 else ErrorCode.NONE
    topics = [] if error and topics_req is None else _by_topic(result, topics_req)
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=error,
        topics=[
            OldTopic(
                name=name,
                partitions=[
                    OldPartition(partition_index=i, **_fields(o, per_partition_error))
                    for i, o in parts
                ],
            )
            for name, parts in topics
        ],
    )
