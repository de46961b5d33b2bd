"""ElectLeaders (key 43), versions 0-2.

Forwarded to the controller, which runs the election as KRaft does: PREFERRED moves
leadership to the first replica when it is in sync and eligible
(PREFERRED_LEADER_NOT_AVAILABLE otherwise, ELECTION_NOT_NEEDED when it already
leads); UNCLEAN elects a leader for a partition that has none, from the ISR or else
any live replica (ELECTION_NOT_NEEDED while it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE
when no replica is live). v0 has no election type and means PREFERRED. A null
partition list means every partition, and then partitions needing no election are
left out of the answer (every topic still gets its entry), as KRaft answers.

An unknown election type is INVALID_REQUEST for every partition and at the top level
(v1+). After the controller answered, we wait (bounded by ``timeout_ms``) until this
gateway's metadata shows the new leader epochs, so the client's next Metadata
already names the new leaders. A controller that cannot be reached answers each
partition with the failure's error (REQUEST_TIMED_OUT, retriable).
"""

from __future__ import annotations

from collections import defaultdict

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
from odradek.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from odradek.rpc.v1 import common_pb2, controller_pb2

API_KEY = ApiKey.ELECT_LEADERS

TopicResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = TopicResult.PartitionResult

ELECTION_TYPES = {0: controller_pb2.PREFERRED, 1: controller_pb2.UNCLEAN}


def _response(
    version: int, error: int, results: dict[str, list[tuple[int, int, str | None]]]
) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=error,
        replica_election_results=[
            TopicResult(
                topic=topic,
                partition_result=[
                    PartitionResult(partition_id=p, error_code=code, error_message=message)
                    for p, code, message in parts
                ],
            )
            for topic, parts in results.items()
        ],
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    version = header.api_version
    requested = (
        None
        if request.topic_partitions is None
        else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    election = ELECTION_TYPES.get(request.election_type if version >= 1 else 0)
    results: dict[str, list[tuple[int, int, str | None]]] = defaultdict(list)
    if not gw.authorizer.cluster(ctx, AclOperation.ALTER):
        for topic, partition in requested or []:
            results[topic].append((partition, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), None))
        return _response(version, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), results)
    if election is None:
        message = f"Unknown election type {request.election_type}"
        for topic, partition in requested or []:
            results[topic].append((partition, int(ErrorCode.INVALID_REQUEST), message))
        return _response(version, int(ErrorCode.INVALID_REQUEST), results)
    if requested == []:  # an empty list asks for nothing (null asks for everything)
        return _response(version, 0, results)

    deadline = AdminDeadline(gw, request.timeout_ms)
    before = gw.metadata.current
    answer = await call_controller(
        gw,
        lambda s: s.ElectLeaders,
        controller_pb2.ElectLeadersRequest(
            type=election,
            partitions=[
                common_pb2.TopicPartition(topic=t, partition=p) for t, p in requested or []
            ],
        ),
        deadline,
    )
    if isinstance(answer, ControllerFailure):
        for topic, partition in requested or []:
            results[topic].append((partition, answer.error_code, answer.message))
        return _response(version, 0, results)

    if requested is None:  # every topic has an entry, as KRaft answers "all partitions"
        for name in sorted(before.topics):
            results[name] = []
    elected: list[tuple[str, int]] = []
    for r in answer.results:
        code = r.error_code
        results[r.partition.topic].append(
            (r.partition.partition, code, r.error_message if code else None)
        )
        if not code:
            elected.append((r.partition.topic, r.partition.partition))

    if elected:

        def visible(snap: Snapshot) -> bool:
            for topic, partition in elected:
                old, new = before.partition(topic, partition), snap.partition(topic, partition)
                if new is None or (old is not None and new.leader_epoch <= old.leader_epoch):
                    return False
            return True

        await wait_visible(gw, visible, deadline.remaining())
    return _response(version, 0, results)
