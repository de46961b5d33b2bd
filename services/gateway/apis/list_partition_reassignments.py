"""ListPartitionReassignments (key 46), version 0.

Answered by the controller (so it reflects every change it accepted, whichever
gateway forwarded it): for each ongoing reassignment the full replica list (target
first, then the replicas being removed), the adding and the removing replicas.
Null topics lists every ongoing reassignment; named topics and partitions that do not
exist or are not moving are left out, as KRaft answers. A controller that cannot be
reached fails the request at the top level (REQUEST_TIMED_OUT, retriable).
"""

from __future__ import annotations

from collections import defaultdict

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import AdminDeadline, ControllerFailure, call_controller
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from odradek.rpc.v1 import common_pb2, controller_pb2

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS

TopicResult = ListPartitionReassignmentsResponse.OngoingTopicReassignment
PartitionResult = TopicResult.OngoingPartitionReassignment


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse:
    if not gw.authorizer.cluster(ctx, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            topics=[],
        )
    if request.topics is None:
        query = controller_pb2.ListPartitionReassignmentsRequest(all=True)
    else:
        query = controller_pb2.ListPartitionReassignmentsRequest(
            partitions=[
                common_pb2.TopicPartition(topic=t.name, partition=p)
                for t in request.topics
                for p in t.partition_indexes
            ]
        )
    answer = await call_controller(
        gw,
        lambda s: s.ListPartitionReassignments,
        query,
        AdminDeadline(gw, request.timeout_ms),
    )
    if isinstance(answer, ControllerFailure):
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=answer.error_code,
            error_message=answer.message,
            topics=[],
        )
    by_topic: dict[str, list[PartitionResult]] = defaultdict(list)
    for r in answer.reassignments:
        by_topic[r.partition.topic].append(
            PartitionResult(
                partition_index=r.partition.partition,
                replicas=list(r.replicas),
                adding_replicas=list(r.adding_replicas),
                removing_replicas=list(r.removing_replicas),
            )
        )
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        topics=[TopicResult(name=name, partitions=parts) for name, parts in by_topic.items()],
    )
