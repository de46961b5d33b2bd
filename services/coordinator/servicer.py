"""The ``GroupCoordinator`` gRPC servicer: route each group to its shard's runtime and
translate between protobuf and :mod:`odradek.coordinator.shard`.

A group of a shard this node does not own gets NOT_COORDINATOR; of a shard still
loading, COORDINATOR_LOAD_IN_PROGRESS. Offset commits are checked here (member,
generation, metadata size) and then written by the offset store.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import grpc

from odradek.coordinator.consumer_group import Assignment
from odradek.coordinator.consumer_groups import (
    ConsumerGroupDescription,
    ConsumerHeartbeat,
    HeartbeatResult,
)
from odradek.coordinator.group import GroupState, JoinResult, SyncResult
from odradek.coordinator.runtime import ShardRuntime
from odradek.coordinator.shard import GroupShard, JoinRequest, SyncRequest
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc, offsets_pb2

if TYPE_CHECKING:
    from odradek.coordinator.service import CoordinatorService

log = logging.getLogger(__name__)


def _opt(msg: object, name: str) -> str | None:
    return getattr(msg, name) if msg.HasField(name) else None  # type: ignore[attr-defined]


def _join_response(r: JoinResult) -> coordinator_pb2.JoinGroupResponse:
    out = coordinator_pb2.JoinGroupResponse(
        error_code=int(r.error),
        generation_id=r.generation_id,
        leader=r.leader_id,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
    )
    if r.protocol_type is not None:
        out.protocol_type = r.protocol_type
    if r.protocol_name is not None:
        out.protocol_name = r.protocol_name
    for member_id, instance_id, metadata in r.members:
        m = out.members.add(member_id=member_id, metadata=metadata)
        if instance_id is not None:
            m.group_instance_id = instance_id
    return out


def _sync_response(r: SyncResult) -> coordinator_pb2.SyncGroupResponse:
    out = coordinator_pb2.SyncGroupResponse(error_code=int(r.error), assignment=r.assignment)
    if r.protocol_type is not None:
        out.protocol_type = r.protocol_type
    if r.protocol_name is not None:
        out.protocol_name = r.protocol_name
    return out


def _assignment_from_proto(
    topics: Iterable[coordinator_pb2.TopicPartitions],
) -> Assignment:
    out: Assignment = {}
    for t in topics:
        topic_id = uuid.UUID(bytes=bytes(t.topic_id))
        out[topic_id] = out.get(topic_id, frozenset()) | frozenset(t.partitions)
    return out


def _assignment_to_proto(
    assignment: Assignment, names: Callable[[uuid.UUID], str]
) -> list[coordinator_pb2.TopicPartitions]:
    return [
        coordinator_pb2.TopicPartitions(
            topic_id=topic_id.bytes, topic_name=names(topic_id), partitions=sorted(partitions)
        )
        for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes)
    ]


def _heartbeat_response(r: HeartbeatResult) -> coordinator_pb2.ConsumerGroupHeartbeatResponse:
    out = coordinator_pb2.ConsumerGroupHeartbeatResponse(
        error_code=int(r.error),
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
    )
    if r.message is not None:
        out.error_message = r.message
    if r.member_id is not None:
        out.member_id = r.member_id
    if r.assignment is not None:
        out.has_assignment = True
        out.assignment.extend(_assignment_to_proto(r.assignment, lambda _t: ""))
    return out


class CoordinatorServicer(coordinator_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, service: CoordinatorService) -> None:
        self.service = service

    def _runtime(self, group_id: str) -> tuple[ShardRuntime | None, int]:
        """The runtime of ``group_id``'s shard, or the error to answer."""
        runtime = self.service.runtime_for(group_id)
        if runtime is None:
            return None, ErrorCode.NOT_COORDINATOR
        return runtime, ErrorCode.NONE

    # -- membership -------------------------------------------------------------------------
    async def JoinGroup(
        self, request: coordinator_pb2.JoinGroupRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.JoinGroupResponse:
        if not request.group_id:
            return coordinator_pb2.JoinGroupResponse(
                error_code=ErrorCode.INVALID_GROUP_ID, member_id=request.member_id
            )
        runtime, error = self._runtime(request.group_id)
        if runtime is None:
            return coordinator_pb2.JoinGroupResponse(error_code=error, member_id=request.member_id)
        req = JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms or request.session_timeout_ms,
            group_instance_id=_opt(request, "group_instance_id"),
            client_id=request.client_id,
            client_host=request.client_host,
            require_known_member_id=request.require_known_member_id,
            supports_skip_assignment=request.supports_skip_assignment,
            reason=request.reason,
        )
        result: JoinResult = await runtime.long_poll(
            lambda shard, respond: shard.join_group(req, respond),
            lambda e: JoinResult(e, member_id=request.member_id),
        )
        return _join_response(result)

    async def SyncGroup(
        self, request: coordinator_pb2.SyncGroupRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.SyncGroupResponse:
        runtime, error = self._runtime(request.group_id)
        if runtime is None:
            return coordinator_pb2.SyncGroupResponse(error_code=error)
        req = SyncRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
            group_instance_id=_opt(request, "group_instance_id"),
            protocol_type=_opt(request, "protocol_type"),
            protocol_name=_opt(request, "protocol_name"),
        )
        result: SyncResult = await runtime.long_poll(
            lambda shard, respond: shard.sync_group(req, respond), lambda e: SyncResult(e)
        )
        return _sync_response(result)

    async def Heartbeat(
        self, request: coordinator_pb2.GroupHeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.GroupHeartbeatResponse:
        runtime, error = self._runtime(request.group_id)
        if runtime is not None:
            instance = _opt(request, "group_instance_id")
            error = await runtime.call(
                lambda s: s.heartbeat(
                    request.group_id, request.generation_id, request.member_id, instance
                ),
                lambda e: e,
            )
        return coordinator_pb2.GroupHeartbeatResponse(error_code=int(error))

    async def LeaveGroup(
        self, request: coordinator_pb2.LeaveGroupRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.LeaveGroupResponse:
        leaving = [(m.member_id, _opt(m, "group_instance_id")) for m in request.members]
        runtime, error = self._runtime(request.group_id)
        errors: list[int] = []
        if runtime is not None:
            error, errors = await runtime.call(
                lambda s: s.leave_group(request.group_id, leaving), lambda e: (e, [])
            )
        out = coordinator_pb2.LeaveGroupResponse(error_code=int(error))
        if not error:
            for (member_id, instance_id), member_error in zip(leaving, errors, strict=True):
                m = out.members.add(member_id=member_id, error_code=int(member_error))
                if instance_id is not None:
                    m.group_instance_id = instance_id
        return out

    # -- admin ------------------------------------------------------------------------------
    async def DescribeGroups(
        self, request: coordinator_pb2.DescribeGroupsRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.DescribeGroupsResponse:
        async def one(group_id: str) -> coordinator_pb2.DescribedGroup:
            runtime, error = self._runtime(group_id)
            if runtime is not None:
                d: Any = await runtime.call(lambda s: s.describe(group_id), lambda e: e)
                if not isinstance(d, int):
                    out = coordinator_pb2.DescribedGroup(
                        error_code=int(d.error),
                        group_id=group_id,
                        state=d.state,
                        protocol_type=d.protocol_type,
                        protocol_data=d.protocol_data,
                        error_message=d.message,
                    )
                    for m in d.members:
                        dm = out.members.add(
                            member_id=m.member_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            metadata=m.metadata,
                            assignment=m.assignment,
                        )
                        if m.group_instance_id is not None:
                            dm.group_instance_id = m.group_instance_id
                    return out
                error = d
            return coordinator_pb2.DescribedGroup(error_code=int(error), group_id=group_id)

        groups = await asyncio.gather(*(one(g) for g in request.group_ids))
        return coordinator_pb2.DescribeGroupsResponse(groups=groups)

    async def ListGroups(
        self, request: coordinator_pb2.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.ListGroupsResponse:
        states = list(request.states_filter)
        out = coordinator_pb2.ListGroupsResponse()
        for runtime in list(self.service.runtimes.values()):
            listed: Any = await runtime.call(lambda s: s.list_groups(states), lambda e: e)
            if isinstance(listed, int):
                if listed == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    out.error_code = listed
                continue
            for group_id, protocol_type, state, group_type in listed:
                out.groups.add(
                    group_id=group_id,
                    protocol_type=protocol_type,
                    state=state,
                    group_type=group_type,
                )
        return out

    async def DeleteGroups(
        self, request: coordinator_pb2.DeleteGroupsRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.DeleteGroupsResponse:
        by_runtime: dict[int, tuple[ShardRuntime, list[str]]] = {}
        results: dict[str, int] = {}
        for group_id in request.group_ids:
            runtime, error = self._runtime(group_id)
            if runtime is None:
                results[group_id] = error
            else:
                by_runtime.setdefault(runtime.shard_id, (runtime, []))[1].append(group_id)

        async def delete(runtime: ShardRuntime, ids: list[str]) -> None:
            answer: dict[str, int] | int = await runtime.long_poll(
                lambda s, respond: s.delete_groups(ids, respond), lambda e: e
            )
            if isinstance(answer, int):
                results.update(dict.fromkeys(ids, answer))
            else:
                results.update(answer)

        await asyncio.gather(*(delete(r, ids) for r, ids in by_runtime.values()))
        return coordinator_pb2.DeleteGroupsResponse(
            results=[
                coordinator_pb2.GroupResult(group_id=g, error_code=int(results[g]))
                for g in request.group_ids
            ]
        )

    # -- offsets ----------------------------------------------------------------------------
    async def CommitOffsets(
        self, request: offsets_pb2.CommitOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> offsets_pb2.CommitOffsetsResponse:
        runtime, error = self._runtime(request.group_id)
        if runtime is not None:
            instance = _opt(request, "group_instance_id")
            error = await runtime.call(
                lambda s: s.validate_offset_commit(
                    request.group_id,
                    request.member_id,
                    instance,
                    request.generation_id,
                    transactional=request.transactional,
                ),
                lambda e: e,
            )
        if error or runtime is None:
            return offsets_pb2.CommitOffsetsResponse(error_code=int(error))
        limit = runtime.shard.config.offset_metadata_max_bytes
        response = offsets_pb2.CommitOffsetsResponse()
        forward = offsets_pb2.CommitOffsetsRequest()
        forward.CopyFrom(request)
        del forward.partitions[:]
        for p in request.partitions:
            if p.HasField("metadata") and len(p.metadata.encode()) > limit:
                response.partitions.add(
                    topic=p.topic,
                    partition=p.partition,
                    error_code=ErrorCode.OFFSET_METADATA_TOO_LARGE,
                )
            else:
                forward.partitions.append(p)
        if forward.partitions:
            forward.coordinator_id = self.service.node_id
            forward.coordinator_epoch = runtime.epoch
            stored = await self.service.offsets.commit(runtime.shard_id, forward)
            if stored.error_code:
                for p in forward.partitions:
                    response.partitions.add(
                        topic=p.topic, partition=p.partition, error_code=stored.error_code
                    )
            else:
                response.partitions.extend(stored.partitions)
        return response

    async def DeleteOffsets(
        self, request: offsets_pb2.DeleteOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> offsets_pb2.DeleteOffsetsResponse:
        runtime, error = self._runtime(request.group_id)
        if runtime is None:
            return offsets_pb2.DeleteOffsetsResponse(error_code=int(error))
        topics = {p.topic for p in request.partitions}

        def check(shard: GroupShard) -> tuple[int, set[str]]:
            if request.group_id in shard.consumer.groups:
                subscribed = shard.consumer.subscribed_topics(request.group_id)
                return ErrorCode.NONE, {t for t in topics if t in subscribed}
            group_error, group = shard.validate_offset_delete(request.group_id)
            if group_error or group is None:
                return group_error, set()
            if group.is_(GroupState.EMPTY):
                return ErrorCode.NONE, set()
            return ErrorCode.NONE, {t for t in topics if group.is_subscribed_to(t)}

        group_error, subscribed = await runtime.call(check, lambda e: (e, set()))
        if group_error:
            return offsets_pb2.DeleteOffsetsResponse(error_code=int(group_error))
        response = offsets_pb2.DeleteOffsetsResponse()
        forward = offsets_pb2.DeleteOffsetsRequest(
            group_id=request.group_id,
            coordinator_id=self.service.node_id,
            coordinator_epoch=runtime.epoch,
        )
        for p in request.partitions:
            if p.topic in subscribed:
                response.partitions.add(
                    topic=p.topic,
                    partition=p.partition,
                    error_code=ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
                )
            else:
                forward.partitions.append(p)
        if forward.partitions:
            deleted = await self.service.offsets.delete(runtime.shard_id, forward)
            if deleted.error_code:
                return offsets_pb2.DeleteOffsetsResponse(error_code=deleted.error_code)
            response.partitions.extend(deleted.partitions)
        return response

    # -- KIP-848 ----------------------------------------------------------------------------
    async def ConsumerGroupHeartbeat(
        self,
        request: coordinator_pb2.ConsumerGroupHeartbeatRequest,
        context: grpc.aio.ServicerContext,
    ) -> coordinator_pb2.ConsumerGroupHeartbeatResponse:
        if not request.group_id:
            return coordinator_pb2.ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId can't be empty."
            )
        runtime, error = self._runtime(request.group_id)
        if runtime is None:
            return coordinator_pb2.ConsumerGroupHeartbeatResponse(error_code=error)
        req = ConsumerHeartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=_opt(request, "instance_id"),
            rack_id=_opt(request, "rack_id"),
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=list(request.subscribed_topic_names)
            if request.has_subscribed_topic_names
            else None,
            subscribed_topic_regex=_opt(request, "subscribed_topic_regex"),
            server_assignor=_opt(request, "server_assignor"),
            topic_partitions=_assignment_from_proto(request.topic_partitions)
            if request.has_topic_partitions
            else None,
            client_id=request.client_id,
            client_host=request.client_host,
        )
        result: HeartbeatResult = await runtime.long_poll(
            lambda shard, respond: shard.consumer_group_heartbeat(req, respond),
            lambda e: HeartbeatResult(e),
        )
        return _heartbeat_response(result)

    async def ConsumerGroupDescribe(
        self,
        request: coordinator_pb2.ConsumerGroupDescribeRequest,
        context: grpc.aio.ServicerContext,
    ) -> coordinator_pb2.ConsumerGroupDescribeResponse:
        topics = self.service.metadata.current.topics_by_id

        def name(topic_id: uuid.UUID) -> str:
            topic = topics.get(topic_id.bytes)
            return topic.name if topic is not None else ""

        async def one(group_id: str) -> coordinator_pb2.DescribedConsumerGroup:
            if not group_id:
                return coordinator_pb2.DescribedConsumerGroup(
                    error_code=ErrorCode.INVALID_GROUP_ID, group_id=group_id
                )
            runtime, error = self._runtime(group_id)
            if runtime is not None:
                d: ConsumerGroupDescription | int = await runtime.call(
                    lambda s: s.consumer.describe(group_id), lambda e: e
                )
                if not isinstance(d, int):
                    out = coordinator_pb2.DescribedConsumerGroup(
                        error_code=int(d.error),
                        group_id=group_id,
                        state=d.state,
                        group_epoch=d.group_epoch,
                        assignment_epoch=d.assignment_epoch,
                        assignor_name=d.assignor_name,
                    )
                    if d.message is not None:
                        out.error_message = d.message
                    for m in d.members:
                        dm = out.members.add(
                            member_id=m.member_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=m.subscribed_topic_names,
                            assignment=_assignment_to_proto(m.assignment, name),
                            target_assignment=_assignment_to_proto(m.target_assignment, name),
                            classic=m.classic,
                        )
                        if m.instance_id is not None:
                            dm.instance_id = m.instance_id
                        if m.rack_id is not None:
                            dm.rack_id = m.rack_id
                        if m.subscribed_topic_regex is not None:
                            dm.subscribed_topic_regex = m.subscribed_topic_regex
                    return out
                error = d
            return coordinator_pb2.DescribedConsumerGroup(error_code=int(error), group_id=group_id)

        groups = await asyncio.gather(*(one(g) for g in request.group_ids))
        return coordinator_pb2.ConsumerGroupDescribeResponse(groups=groups)

    async def ValidateOffsetFetch(
        self,
        request: coordinator_pb2.ValidateOffsetFetchRequest,
        context: grpc.aio.ServicerContext,
    ) -> coordinator_pb2.ValidateOffsetFetchResponse:
        runtime, error = self._runtime(request.group_id)
        if runtime is not None:
            error = await runtime.call(
                lambda s: s.consumer.validate_offset_fetch(
                    request.group_id, request.member_id, request.member_epoch
                ),
                lambda e: e,
            )
        return coordinator_pb2.ValidateOffsetFetchResponse(error_code=int(error))
