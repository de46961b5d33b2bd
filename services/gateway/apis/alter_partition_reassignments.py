"""AlterPartitionReassignments (key 45), versions 0-1.

Forwarded to the controller, which runs Kafka's KIP-455 reassignment: the target
replicas are added as followers, catch up by follower fetch and join the ISR, then
the replicas not in the target are removed (their storage nodes delete the logs) and
leadership moves off them. Null replicas cancel an ongoing reassignment
(NO_REASSIGNMENT_IN_PROGRESS when there is none). Per-partition errors are Kafka's:
UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition, including a topic being
deleted), INVALID_REPLICA_ASSIGNMENT (empty list, a broker twice, an unregistered
broker id), INVALID_REPLICATION_FACTOR (v1 ``AllowReplicationFactorChange=false`` and
the target changes the replica count).

After the controller accepted a change we wait (bounded by ``timeout_ms``) until this
gateway's metadata shows it, so a Metadata or DescribeLogDirs right after sees the new
replicas. A controller that cannot be reached fails the request at the top level
with the failure's error (REQUEST_TIMED_OUT, retriable), as Kafka does for a
request it could not forward.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import (
    AdminDeadline,
    ControllerFailure,
    call_controller,
    wait_visible,
)
from odradek.gateway.gateway_api import GatewayApi
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from odradek.rpc.v1 import controller_pb2

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS

TopicResult = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResult = TopicResult.ReassignablePartitionResponse


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse:
    allow_rf_change = header.api_version < 1 or bool(request.allow_replication_factor_change)
    if not gw.authorizer.cluster(ctx, AclOperation.ALTER):
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            allow_replication_factor_change=allow_rf_change,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            responses=[],
        )
    wanted = [
        controller_pb2.PartitionReassignment(
            topic=t.name,
            partition=p.partition_index,
            replicas=list(p.replicas or []),
            cancel=p.replicas is None,
        )
        for t in request.topics
        for p in t.partitions
    ]
    deadline = AdminDeadline(gw, request.timeout_ms)
    answer = await call_controller(
        gw,
        lambda s: s.AlterPartitionReassignments,
        controller_pb2.AlterPartitionReassignmentsRequest(
            partitions=wanted, allow_replication_factor_change=allow_rf_change
        ),
        deadline,
    )
    if isinstance(answer, ControllerFailure):
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            allow_replication_factor_change=allow_rf_change,
            error_code=answer.error_code,
            error_message=answer.message,
            responses=[
                TopicResult(
                    name=t.name,
                    partitions=[
                        PartitionResult(
                            partition_index=p.partition_index,
                            error_code=answer.error_code,
                            error_message=answer.message,
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )

    it = iter(answer.results)
    responses = []
    accepted: list[controller_pb2.PartitionReassignment] = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            r = next(it)
            partitions.append(
                PartitionResult(
                    partition_index=p.partition_index,
                    error_code=r.error_code,
                    error_message=r.error_message if r.error_code else None,
                )
            )
        responses.append(TopicResult(name=t.name, partitions=partitions))
    for w, r in zip(wanted, answer.results, strict=True):
        if not r.error_code:
            accepted.append(w)

    if accepted:

        def visible(snap: Snapshot) -> bool:
            for w in accepted:
                p = snap.partition(w.topic, w.partition)
                if p is None:
                    continue  # deleted meanwhile: nothing to wait for
                if w.cancel and (p.adding_replicas or p.removing_replicas):
                    return False
                if not w.cancel and not set(w.replicas) <= set(p.replicas):
                    return False
            return True

        await wait_visible(gw, visible, deadline.remaining())
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=0,
        error_message=None,
        responses=responses,
    )
