"""The ``GroupCoordinator`` gRPC servicer: route each group to its shard's runtime and
translate between protobuf and :mod:`odradek.coordinator.shard`.

A group of a shard this node does not own gets NOT_COORDINATOR; of a shard still
loading, COORDINATOR_LOAD_IN_PROGRESS. Offset commits are checked here (member,
generation, metadata size) and then written by the offset store.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import grpc

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
            for group_id, protocol_type, state in listed:
                out.groups.add(group_id=group_id, protocol_type=protocol_type, state=state)
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
