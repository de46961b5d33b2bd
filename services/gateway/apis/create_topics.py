"""CreateTopics (key 19), versions 0-7.

Forwarded to the controller, which validates names, partition counts, replication
factors, assignments and configs and answers Kafka's error codes and messages
(e.g. TOPIC_ALREADY_EXISTS "Topic 'x' already exists."). ``num_partitions`` and
``replication_factor`` of -1 take the cluster's ``num.partitions`` and
``default.replication.factor``. Error messages are sent from v1; v5+ answer the
partition count, replication factor and every config of the new topic with its
source (as DescribeConfigs reports it); v7 the topic id. ``validate_only`` (v1+)
checks everything and creates nothing.

``timeout_ms``: after the controller accepted the topics we wait, bounded by it,
until this gateway's metadata shows them with a leader for every partition, so a
client that creates a topic and produces at once does not race the metadata
stream. Running out of time is not an error: the topic exists (as in KRaft mode,
where the answer follows the controller's commit).

``controller_mutation_rate`` (KIP-599, odradek.gateway.throttling): from v6 a topic
over the quota gets THROTTLING_QUOTA_EXCEEDED; older versions are throttled after.

Deviations: names starting with ``__`` are reserved for internal topics and
refused with INVALID_TOPIC_EXCEPTION (Kafka only warns). A topic named twice in
one request gets INVALID_REQUEST "Duplicate topic name." once, as KRaft answers.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field

from odradek.config_catalog.definition import InvalidConfigError
from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.config_entries import settings_of, topic_config_entries
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import (
    AdminDeadline,
    ControllerFailure,
    call_controller,
    leaders_ready,
    message_or_none,
    wait_visible,
)
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.throttling import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from odradek.rpc.v1 import controller_pb2

log = logging.getLogger(__name__)

API_KEY = ApiKey.CREATE_TOPICS

Result = CreateTopicsResponse.CreatableTopicResult
ResultConfig = Result.CreatableTopicConfigs
ZERO_UUID = uuid.UUID(int=0)


@dataclass
class _Outcome:
    error_code: int = 0
    message: str | None = None
    topic_id: bytes = b""
    num_partitions: int = -1
    replication_factor: int = -1
    overrides: dict[str, str] = field(default_factory=dict)


def _spec(topic: CreateTopicsRequest.CreatableTopic) -> controller_pb2.CreatableTopic | _Outcome:
    configs: dict[str, str] = {}
    for c in topic.configs or []:
        if c.value is None:
            return _Outcome(
                int(ErrorCode.INVALID_CONFIG),
                f"Null value not supported for topic configs: {c.name}",
            )
        configs[c.name] = c.value
    return controller_pb2.CreatableTopic(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        configs=configs,
        assignments=[
            controller_pb2.ReplicaAssignment(
                partition=a.partition_index, replicas=list(a.broker_ids)
            )
            for a in topic.assignments or []
        ],
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    version = header.api_version
    deadline = AdminDeadline(gw, request.timeout_ms)
    validate_only = bool(getattr(request, "validate_only", False)) if version >= 1 else False
    counts = Counter(t.name for t in request.topics)
    outcomes: dict[str, _Outcome] = {}
    specs: list[controller_pb2.CreatableTopic] = []
    may_create = gw.authorizer.cluster(ctx, AclOperation.CREATE)
    quota = MutationQuota(gw.quotas, ctx, header, strict_since=6)
    taken: dict[str, int] = {}  # partitions taken from controller_mutation_rate
    for topic in request.topics:
        if topic.name in outcomes:
            continue
        if counts[topic.name] > 1:
            outcomes[topic.name] = _Outcome(int(ErrorCode.INVALID_REQUEST), "Duplicate topic name.")
            continue
        # KafkaApis.handleCreateTopicsRequest: CREATE on the cluster or on the topic.
        if not may_create and not gw.authorizer.allowed(
            ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name
        ):
            outcomes[topic.name] = _Outcome(
                int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "Authorization failed."
            )
            continue
        spec = _spec(topic)
        if isinstance(spec, _Outcome):
            outcomes[topic.name] = spec
            continue
        partitions = _partitions(gw, spec)
        if not validate_only and not quota.admit(partitions):
            outcomes[topic.name] = _Outcome(
                int(ErrorCode.THROTTLING_QUOTA_EXCEEDED), THROTTLING_QUOTA_EXCEEDED_MESSAGE
            )
            continue
        if not validate_only:
            taken[topic.name] = partitions
        outcomes[topic.name] = _Outcome()
        specs.append(spec)

    if specs:
        answer = await call_controller(
            gw,
            lambda s: s.CreateTopics,
            controller_pb2.CreateTopicsRequest(topics=specs, validate_only=validate_only),
            deadline,
        )
        if isinstance(answer, ControllerFailure):
            for spec in specs:
                outcomes[spec.name] = _Outcome(answer.error_code, answer.message)
        else:
            requested = {spec.name: dict(spec.configs) for spec in specs}
            for r in answer.results:
                if r.name not in outcomes:
                    continue
                outcomes[r.name] = (
                    _Outcome(r.error_code, r.error_message or None)
                    if r.error_code
                    else _Outcome(
                        topic_id=bytes(r.topic_id),
                        num_partitions=r.num_partitions,
                        replication_factor=r.replication_factor,
                        overrides=requested.get(r.name, {}),
                    )
                )
        for name, partitions in taken.items():
            if outcomes[name].error_code:
                quota.give_back(partitions)
        created = [spec.name for spec in specs if not outcomes[spec.name].error_code]
        if created and not validate_only:

            def visible(snap: Snapshot) -> bool:
                return all(leaders_ready(snap.topics.get(name)) for name in created)

            if not await wait_visible(gw, visible, deadline.remaining()):
                log.info("created topics %s are not all visible with leaders yet", created)

    snap: Snapshot = gw.metadata.current
    results = [_result(snap, version, name, o) for name, o in outcomes.items()]
    response = CreateTopicsResponse(throttle_time_ms=0, topics=results)
    quota.finish(response)
    return response


def _partitions(gw: GatewayApi, spec: controller_pb2.CreatableTopic) -> int:
    """The partitions a new topic will have (what controller_mutation_rate counts)."""
    if spec.assignments:
        return len(spec.assignments)
    if spec.num_partitions > 0:
        return spec.num_partitions
    try:
        return int(gw.cluster_config("num.partitions"))
    except ValueError:
        return 1


def _result(snap: Snapshot, version: int, name: str, o: _Outcome) -> Result:
    if o.error_code:
        return Result(
            name=name,
            topic_id=ZERO_UUID,
            error_code=o.error_code,
            error_message=message_or_none(o.message, version),
            num_partitions=-1,
            replication_factor=-1,
            configs=[],
        )
    return Result(
        name=name,
        topic_id=uuid.UUID(bytes=o.topic_id) if len(o.topic_id) == 16 else ZERO_UUID,
        error_code=0,
        error_message=None,
        num_partitions=o.num_partitions,
        replication_factor=o.replication_factor,
        configs=_configs(snap, o.overrides) if version >= 5 else [],
    )


def _configs(snap: Snapshot, overrides: dict[str, str]) -> list[ResultConfig]:
    try:
        entries = topic_config_entries(overrides, settings_of(snap.raw), include_synonyms=False)
    except InvalidConfigError as exc:  # the controller accepted them; do not fail the create
        log.warning("cannot describe the configs of a created topic: %s", exc)
        return []
    return [
        ResultConfig(
            name=e.name,
            value=e.value,
            read_only=e.read_only,
            config_source=int(e.source),
            is_sensitive=e.is_sensitive,
        )
        for e in entries
    ]
