"""CreatePartitions (key 37), versions 0-3.

Forwarded to the controller, which checks the new count (INVALID_PARTITIONS when
it does not grow the topic), the manual assignments (INVALID_REPLICA_ASSIGNMENT)
and the replication factor against live storage nodes, with Kafka's messages.
Every requested topic gets a result entry (docs/compatibility.md C19); a topic named
twice gets INVALID_REQUEST "Duplicate topic name." once, as KRaft answers.
``validate_only`` checks and changes nothing. ``controller_mutation_rate`` (KIP-599,
odradek.gateway.throttling) counts the added partitions; from v3 a topic over the
quota gets THROTTLING_QUOTA_EXCEEDED.

``timeout_ms``: after the controller added the partitions we wait, bounded by it,
until this gateway's metadata shows them with leaders, so producing to a new
partition right away works. Running out of time is not an error.
"""

from __future__ import annotations

from collections import Counter

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import (
    AdminDeadline,
    ControllerFailure,
    call_controller,
    leaders_ready,
    wait_visible,
)
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.throttling import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from odradek.rpc.v1 import controller_pb2

API_KEY = ApiKey.CREATE_PARTITIONS

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    deadline = AdminDeadline(gw, request.timeout_ms)
    counts = Counter(t.name for t in request.topics)
    outcomes: dict[str, tuple[int, str | None]] = {}
    changes: list[controller_pb2.PartitionCountChange] = []
    quota = MutationQuota(gw.quotas, ctx, header, strict_since=3)
    taken: dict[str, int] = {}  # partitions taken from controller_mutation_rate
    snap = gw.metadata.current
    for topic in request.topics:
        if topic.name in outcomes:
            continue
        if counts[topic.name] > 1:
            outcomes[topic.name] = (int(ErrorCode.INVALID_REQUEST), "Duplicate topic name.")
            continue
        if not gw.authorizer.allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            outcomes[topic.name] = (
                int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                "The topic authorization is failed.",
            )
            continue
        current = snap.topics.get(topic.name)
        added = topic.count - len(current.partitions) if current is not None else 0
        if not request.validate_only:
            if not quota.admit(added):
                outcomes[topic.name] = (
                    int(ErrorCode.THROTTLING_QUOTA_EXCEEDED),
                    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
                )
                continue
            taken[topic.name] = added
        outcomes[topic.name] = (0, None)
        changes.append(
            controller_pb2.PartitionCountChange(
                topic=topic.name,
                count=topic.count,
                assignments=[
                    controller_pb2.ReplicaAssignment(replicas=list(a.broker_ids))
                    for a in topic.assignments or []
                ],
            )
        )
    if changes:
        answer = await call_controller(
            gw,
            lambda s: s.CreatePartitions,
            controller_pb2.CreatePartitionsRequest(
                topics=changes, validate_only=bool(request.validate_only)
            ),
            deadline,
        )
        if isinstance(answer, ControllerFailure):
            for change in changes:
                outcomes[change.topic] = (answer.error_code, answer.message)
        else:
            for r in answer.results:
                if r.name in outcomes:
                    outcomes[r.name] = (r.error_code, r.error_message or None)
        for name, added in taken.items():
            if outcomes[name][0]:
                quota.give_back(added)
        grown = {
            c.topic: c.count
            for c in changes
            if not outcomes[c.topic][0] and not request.validate_only
        }
        if grown:

            def visible(snap: Snapshot) -> bool:
                return all(leaders_ready(snap.topics.get(n), count) for n, count in grown.items())

            await wait_visible(gw, visible, deadline.remaining())
    response = CreatePartitionsResponse(
        throttle_time_ms=0,
        results=[
            Result(name=name, error_code=code, error_message=message if code else None)
            for name, (code, message) in outcomes.items()
        ],
    )
    quota.finish(response)
    return response
