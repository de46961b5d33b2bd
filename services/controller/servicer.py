"""gRPC face of the controller: proto in, model calls, proto out.

Conventions the shared clients rely on: a response with a top-level ``error_code``
carries NOT_CONTROLLER (41) when this process is not the active controller;
responses without one (metadata, topic and config results) fail the call with
gRPC UNAVAILABLE instead, which :class:`odradek.controller_client.ControllerClient`
also treats as "try the next controller".
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar, cast

import grpc

from odradek.acl import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
)
from odradek.acl import ResourceType as AclResourceType
from odradek.client_quota_proto import entity_from_proto, entity_to_proto
from odradek.controller.cluster_state import ListenerEndpoint, NodeInfo, NodeKind
from odradek.controller.controller import (
    ConfigResourceChange,
    Controller,
    PartitionCountChange,
)
from odradek.controller.errors import ControllerError, NotControllerError
from odradek.controller.model import (
    ConfigChange,
    ConfigOp,
    ElectionType,
    ResourceType,
    TopicResult,
    TopicSpec,
)
from odradek.controller.snapshot import acl_proto, partition_proto
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc
from odradek.sasl.scram import ScramCredential, ScramMechanism

log = logging.getLogger(__name__)

_NOT_ACTIVE = "this controller is not active"

T = TypeVar("T")


def _topic_result(result: TopicResult) -> controller_pb2.TopicResult:
    return controller_pb2.TopicResult(
        name=result.name,
        error_code=result.error_code,
        error_message=result.error_message,
        topic_id=result.topic_id,
        num_partitions=result.num_partitions,
        replication_factor=result.replication_factor,
        configs=result.configs,
    )


async def _unavailable(context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAVAILABLE, _NOT_ACTIVE)


async def _on_active(context: grpc.aio.ServicerContext, change: Awaitable[T]) -> T:
    """``await change``; on a standby the call fails UNAVAILABLE, so the caller asks the
    active controller instead."""
    try:
        return await change
    except NotControllerError:
        await _unavailable(context)
        raise  # unreachable: abort raises


class ControllerServicer(controller_pb2_grpc.ControllerServicer):
    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    # ------------------------------------------------------------------ nodes

    async def RegisterNode(
        self, request: controller_pb2.RegisterNodeRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.RegisterNodeResponse:
        n = request.node
        try:
            kind = NodeKind(n.kind)
        except ValueError:
            kind = NodeKind.UNSPECIFIED
        node = NodeInfo(
            node_id=n.node_id,
            kind=kind,
            host=n.host,
            kafka_port=n.kafka_port,
            grpc_port=n.grpc_port,
            metrics_port=n.metrics_port,
            rack=n.rack,
            advertised_host=n.advertised_host,
            broker_ports=dict(n.broker_ports),
            data_port=n.data_port,
            data_socket_path=n.data_socket.path,
            data_socket_host=n.data_socket.host_id,
            data_socket_token=bytes(n.data_socket.token),
            listeners=[
                ListenerEndpoint(lst.name, lst.host, lst.port, dict(lst.broker_ports))
                for lst in n.listeners
            ],
        )
        try:
            registered = await self.controller.register_node(node, session=request.incarnation)
        except ControllerError as exc:
            return controller_pb2.RegisterNodeResponse(
                error_code=exc.code, error_message=exc.message
            )
        model = self.controller.model
        log.info(
            "registered %s node %d incarnation %d", kind.name, node.node_id, registered.incarnation
        )
        return controller_pb2.RegisterNodeResponse(
            incarnation=registered.incarnation,
            heartbeat_interval_ms=self.controller.settings.heartbeat_interval_ms,
            session_timeout_ms=self.controller.settings.session_timeout_ms,
            cluster_id=model.cluster_id if model is not None else "",
        )

    async def Heartbeat(
        self, request: controller_pb2.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.HeartbeatResponse:
        try:
            ready = self.controller.heartbeat(request.node_id, request.incarnation)
        except ControllerError as exc:
            return controller_pb2.HeartbeatResponse(error_code=exc.code)
        return controller_pb2.HeartbeatResponse(shutdown_ready=ready)

    async def ShutdownNode(
        self, request: controller_pb2.ShutdownNodeRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.ShutdownNodeResponse:
        try:
            remaining = await self.controller.shutdown_node(request.node_id, request.incarnation)
        except ControllerError as exc:
            return controller_pb2.ShutdownNodeResponse(error_code=exc.code)
        return controller_pb2.ShutdownNodeResponse(
            remaining_leaderships=[
                common_pb2.TopicPartition(topic=t, partition=p) for t, p in remaining
            ]
        )

    # ------------------------------------------------------------------ metadata

    async def GetMetadata(
        self, request: controller_pb2.GetMetadataRequest, context: grpc.aio.ServicerContext
    ) -> common_pb2.ClusterMetadata:
        try:
            return self.controller.metadata()
        except NotControllerError:
            await _unavailable(context)
            raise  # unreachable: abort raises

    async def WatchMetadata(
        self, request: controller_pb2.WatchMetadataRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[common_pb2.ClusterMetadata]:
        try:
            watch = self.controller.watch(request.known_version)
        except NotControllerError:
            await _unavailable(context)
            return
        try:
            while (snapshot := await watch.next()) is not None:
                yield snapshot
        finally:
            self.controller.unwatch(watch)

    # ------------------------------------------------------------------ topics

    async def CreateTopics(
        self, request: controller_pb2.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.CreateTopicsResponse:
        specs = [
            TopicSpec(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=dict(t.configs),
                assignments={a.partition: list(a.replicas) for a in t.assignments},
            )
            for t in request.topics
        ]
        results = await _on_active(
            context,
            self.controller.create_topics(
                specs, validate_only=request.validate_only, internal=request.internal
            ),
        )
        return controller_pb2.CreateTopicsResponse(results=[_topic_result(r) for r in results])

    async def DeleteTopics(
        self, request: controller_pb2.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.DeleteTopicsResponse:
        results = await _on_active(
            context,
            self.controller.delete_topics(
                list(request.names), [bytes(t) for t in request.topic_ids]
            ),
        )
        return controller_pb2.DeleteTopicsResponse(results=[_topic_result(r) for r in results])

    async def CreatePartitions(
        self, request: controller_pb2.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.CreatePartitionsResponse:
        changes = [
            PartitionCountChange(t.topic, t.count, [list(a.replicas) for a in t.assignments])
            for t in request.topics
        ]
        results = await _on_active(
            context, self.controller.create_partitions(changes, validate_only=request.validate_only)
        )
        return controller_pb2.CreatePartitionsResponse(results=[_topic_result(r) for r in results])

    async def AlterConfigs(
        self, request: controller_pb2.AlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.AlterConfigsResponse:
        resources: list[ConfigResourceChange] = []
        invalid: dict[int, str] = {}
        for i, r in enumerate(request.resources):
            try:
                rtype = ResourceType(r.type)
                changes = [
                    ConfigChange(c.name, ConfigOp(c.op), c.value if c.HasField("value") else None)
                    for c in r.changes
                ]
            except ValueError as exc:
                invalid[i] = str(exc)
                rtype, changes = ResourceType.UNKNOWN, []
            resources.append(ConfigResourceChange(rtype, r.name, changes, r.incremental))
        results = await _on_active(
            context,
            self.controller.alter_configs(
                [res for i, res in enumerate(resources) if i not in invalid],
                validate_only=request.validate_only,
            ),
        )
        out = []
        it = iter(results)
        for i, r in enumerate(request.resources):
            if i in invalid:
                out.append(
                    controller_pb2.ConfigResourceResult(
                        type=r.type,
                        name=r.name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message=invalid[i],
                    )
                )
            else:
                res = next(it)
                out.append(
                    controller_pb2.ConfigResourceResult(
                        type=cast(controller_pb2.ConfigResourceType, int(res.type)),
                        name=res.name,
                        error_code=res.error_code,
                        error_message=res.error_message,
                    )
                )
        return controller_pb2.AlterConfigsResponse(results=out)

    # ------------------------------------------------------------------ producer ids, partitions

    async def AllocateProducerIds(
        self, request: controller_pb2.AllocateProducerIdsRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.AllocateProducerIdsResponse:
        try:
            first, count = await self.controller.allocate_producer_ids(
                request.node_id, request.incarnation
            )
        except ControllerError as exc:
            return controller_pb2.AllocateProducerIdsResponse(error_code=exc.code)
        return controller_pb2.AllocateProducerIdsResponse(first_producer_id=first, count=count)

    async def AlterPartition(
        self, request: controller_pb2.AlterPartitionRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.AlterPartitionResponse:
        try:
            state = await self.controller.alter_partition(
                request.node_id,
                request.incarnation,
                request.topic,
                request.partition,
                request.leader_epoch,
                request.partition_epoch,
                list(request.new_isr),
            )
        except ControllerError as exc:
            response = controller_pb2.AlterPartitionResponse(error_code=exc.code)
            current = (
                None
                if isinstance(exc, NotControllerError)
                else self.controller.partition_state(request.topic, request.partition)
            )
            if current is not None:  # let a stale leader adopt the current state
                response.partition.CopyFrom(partition_proto(current, self.controller.model))
            return response
        return controller_pb2.AlterPartitionResponse(
            partition=partition_proto(state, self.controller.model)
        )

    async def ElectLeaders(
        self, request: controller_pb2.ElectLeadersRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.ElectLeadersResponse:
        partitions = [(tp.topic, tp.partition) for tp in request.partitions] or None
        results = await _on_active(
            context, self.controller.elect_leaders(ElectionType(request.type), partitions)
        )
        return controller_pb2.ElectLeadersResponse(
            results=[
                controller_pb2.ElectionResult(
                    partition=common_pb2.TopicPartition(topic=r.topic, partition=r.partition),
                    error_code=r.error_code,
                    error_message=r.error_message,
                )
                for r in results
            ]
        )

    # ------------------------------------------------------------------ reassignments, log dirs

    async def AlterPartitionReassignments(
        self,
        request: controller_pb2.AlterPartitionReassignmentsRequest,
        context: grpc.aio.ServicerContext,
    ) -> controller_pb2.AlterPartitionReassignmentsResponse:
        wanted = [
            (r.topic, r.partition, None if r.cancel else list(r.replicas))
            for r in request.partitions
        ]
        results = await _on_active(
            context,
            self.controller.alter_partition_reassignments(
                wanted,
                allow_replication_factor_change=request.allow_replication_factor_change,
            ),
        )
        return controller_pb2.AlterPartitionReassignmentsResponse(
            results=[
                controller_pb2.ReassignmentResult(
                    partition=common_pb2.TopicPartition(topic=r.topic, partition=r.partition),
                    error_code=code,
                    error_message=message,
                )
                for r, (code, message) in zip(request.partitions, results, strict=True)
            ]
        )

    async def ListPartitionReassignments(
        self,
        request: controller_pb2.ListPartitionReassignmentsRequest,
        context: grpc.aio.ServicerContext,
    ) -> controller_pb2.ListPartitionReassignmentsResponse:
        partitions = (
            None if request.all else [(tp.topic, tp.partition) for tp in request.partitions]
        )
        try:
            ongoing = self.controller.partition_reassignments(partitions)
        except NotControllerError:
            await _unavailable(context)
            raise
        return controller_pb2.ListPartitionReassignmentsResponse(
            reassignments=[
                controller_pb2.OngoingReassignment(
                    partition=common_pb2.TopicPartition(topic=topic, partition=p.partition),
                    replicas=p.replicas,
                    adding_replicas=p.adding_replicas,
                    removing_replicas=p.removing_replicas,
                )
                for topic, p in ongoing
            ]
        )

    async def ReportOfflineReplicas(
        self,
        request: controller_pb2.ReportOfflineReplicasRequest,
        context: grpc.aio.ServicerContext,
    ) -> controller_pb2.ReportOfflineReplicasResponse:
        try:
            count = await self.controller.report_offline_replicas(
                request.node_id,
                request.incarnation,
                [(tp.topic, tp.partition) for tp in request.partitions],
            )
        except ControllerError as exc:
            return controller_pb2.ReportOfflineReplicasResponse(error_code=exc.code)
        log.warning(
            "storage node %d: log dir(s) %s failed; %d replica(s) offline",
            request.node_id,
            ", ".join(request.offline_log_dirs) or "?",
            count,
        )
        return controller_pb2.ReportOfflineReplicasResponse()

    async def AlterScramCredentials(
        self,
        request: controller_pb2.AlterScramCredentialsRequest,
        context: grpc.aio.ServicerContext,
    ) -> controller_pb2.AlterScramCredentialsResponse:
        upsertions: list[tuple[str, ScramCredential]] = []
        bad: list[str] = []
        for c in request.upsertions:
            if c.mechanism not in (1, 2):
                bad.append(c.user)
                continue
            upsertions.append(
                (
                    c.user,
                    ScramCredential(
                        ScramMechanism(c.mechanism),
                        c.salt,
                        c.stored_key,
                        c.server_key,
                        c.iterations,
                    ),
                )
            )
        deletions = [(d.user, d.mechanism) for d in request.deletions]
        results = await _on_active(context, self.controller.alter_scram(upsertions, deletions))
        out = [
            controller_pb2.AlterScramCredentialsResult(
                user=r.user, error_code=r.error_code, error_message=r.error_message
            )
            for r in results
        ]
        out += [
            controller_pb2.AlterScramCredentialsResult(
                user=u,
                error_code=int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                error_message="Unknown SCRAM mechanism",
            )
            for u in bad
        ]
        return controller_pb2.AlterScramCredentialsResponse(results=out)

    async def AlterAcls(
        self, request: controller_pb2.AlterAclsRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.AlterAclsResponse:
        try:
            creations = [_acl(a) for a in request.creations]
            filters = [_acl_filter(f) for f in request.deletions]
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise
        created, deleted = await _on_active(context, self.controller.alter_acls(creations, filters))
        return controller_pb2.AlterAclsResponse(
            creation_errors=[code for code, _ in created],
            deletions=[
                controller_pb2.AclDeletionResult(
                    error_code=d.error_code,
                    error_message=d.error_message,
                    deleted=[acl_proto(a) for a in d.deleted],
                )
                for d in deleted
            ],
        )

    async def AlterClientQuotas(
        self, request: controller_pb2.AlterClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.AlterClientQuotasResponse:
        alterations = [
            (
                entity_from_proto(a.entity),
                [(op.key, None if op.remove else op.value) for op in a.ops],
            )
            for a in request.entries
        ]
        results = await _on_active(
            context, self.controller.alter_client_quotas(alterations, request.validate_only)
        )
        return controller_pb2.AlterClientQuotasResponse(
            results=[
                controller_pb2.ClientQuotaResult(
                    entity=entity_to_proto(e),
                    error_code=error.code if error else 0,
                    error_message=error.message if error else "",
                )
                for e, error in results
            ]
        )


def _acl(a: common_pb2.AclBinding) -> AclBinding:
    return AclBinding(
        AclResourceType(a.resource_type),
        a.resource_name,
        PatternType(a.pattern_type),
        a.principal,
        a.host,
        AclOperation(a.operation),
        AclPermissionType(a.permission_type),
    )


def _acl_filter(f: controller_pb2.AclFilter) -> AclFilter:
    return AclFilter(
        AclResourceType(f.resource_type),
        f.resource_name if f.HasField("resource_name") else None,
        PatternType(f.pattern_type),
        f.principal if f.HasField("principal") else None,
        f.host if f.HasField("host") else None,
        AclOperation(f.operation),
        AclPermissionType(f.permission_type),
    )
