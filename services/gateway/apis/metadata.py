"""Metadata (key 3), versions 0-12.

Brokers are the live storage nodes, each at the gateway endpoint that fronts it
(:mod:`odradek.gateway.brokers`, docs/brokers.md), so Kafka's invariants hold and the
ids are usable everywhere (docs/compatibility.md C24): a partition's leader is one of its
replicas and a listed broker; replicas and ISR members are listed brokers unless
offline, and then they are in ``offline_replicas``; ``controller_id`` is a listed
broker (the lowest id, as KRaft answers a broker there), -1 with no broker.
``leader_epoch`` is the storage leader epoch (docs/compatibility.md C13); topic ids are the
controller's stable UUIDs (docs/compatibility.md C12).

Auto-creation: a requested unknown topic is created when ``auto.create.topics.enable``
is on and the request allows it (v4+ flag, always for older versions), with
``num.partitions`` and ``default.replication.factor``; we wait briefly for its leaders
so the client usually sees it ready at once (Kafka answers LEADER_NOT_AVAILABLE first;
both are legal, clients retry either way).

Authorization (KafkaApis.handleTopicMetadataRequest): topics the principal may not
DESCRIBE are left out of an all-topics answer and answer TOPIC_AUTHORIZATION_FAILED
when named; auto-creation needs CREATE on the cluster or the topic (else
TOPIC_AUTHORIZATION_FAILED); authorized-operations bitfields are the authorizer's.

Deviations: admin requests may go to any broker (every gateway forwards them
to the controller), whatever ``controller_id`` says.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from odradek.acl import CLUSTER_NAME
from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.brokers import Broker as AdvertisedBroker
from odradek.gateway.brokers import controller_id
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.shared_answers import share
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import MetadataRequest, MetadataResponse, authorized_operations
from odradek.rpc.v1 import common_pb2, controller_pb2

API_KEY = ApiKey.METADATA

ZERO_UUID = uuid.UUID(int=0)

Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def _unanswered(code: int, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> Topic:
    """A requested topic answered with its error only (by name or, v10+, by id)."""
    return Topic(
        error_code=int(code), name=name, topic_id=topic_id, is_internal=False, partitions=[]
    )


def _requested(request: MetadataRequest, version: int) -> tuple[list[str] | None, list[uuid.UUID]]:
    """Names asked for (None = all topics) and ids asked for by id only (v10+)."""
    topics = request.topics
    if topics is None or (version == 0 and len(topics) == 0):
        return None, []
    names: list[str] = []
    ids: list[uuid.UUID] = []
    for t in topics:
        name = getattr(t, "name", None)
        if name:
            names.append(name)
        else:
            tid = getattr(t, "topic_id", None)
            if tid is not None and tid != ZERO_UUID:
                ids.append(tid)
    return names, ids


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: MetadataRequest
) -> MetadataResponse:
    version = header.api_version
    names, ids = _requested(request, version)
    snap: Snapshot = gw.metadata.current
    topic_results: list[Topic] = []
    include_ops = (
        bool(getattr(request, "include_topic_authorized_operations", False)) and version >= 8
    )
    brokers = gw.brokers(ctx.listener)
    authz = gw.authorizer
    cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))

    def describable(name: str) -> bool:
        return authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    def ops(name: str) -> set[int] | None:
        return authz.operations(ctx, ResourceType.TOPIC, name) if include_ops else None

    if names is not None:
        allow = version < 4 or bool(getattr(request, "allow_auto_topic_creation", True))
        denied = {n for n in names if not describable(n)}
        missing = [n for n in dict.fromkeys(names) if n not in snap.topics and n not in denied]
        created_errors: dict[str, int] = {}
        if missing and allow and gw.cluster_config("auto.create.topics.enable") == "true":
            if not authz.cluster(ctx, AclOperation.CREATE):
                denied |= {
                    n
                    for n in missing
                    if not authz.allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, n)
                }
                missing = [n for n in missing if n not in denied]
            if missing:
                created_errors = await _auto_create(gw, missing)
            snap = gw.metadata.current
        for name in dict.fromkeys(names):
            topic = snap.topics.get(name)
            if name in denied:
                topic_results.append(_unanswered(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name))
            elif topic is None:
                code = created_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                topic_results.append(_unanswered(code, name))
            else:
                topic_results.append(_topic_answer(snap, brokers, topic, ops(name)))
        for tid in ids:
            topic = snap.topics_by_id.get(tid.bytes)
            if topic is not None and not describable(topic.name):
                topic_results.append(_unanswered(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, tid))
            elif topic is None:
                topic_results.append(_unanswered(ErrorCode.UNKNOWN_TOPIC_ID, None, tid))
            else:
                topic_results.append(_topic_answer(snap, brokers, topic, ops(topic.name)))
    else:
        plain = not include_ops and not authz.enabled and not cluster_ops
        if plain and not gw.quotas.any():
            # The same answer for every such request until the snapshot or the broker
            # set changes: one object, its encoding shared (shared_answers.py).
            return share(_all_topics_answer(snap, brokers))
        for topic in sorted(snap.topics.values(), key=lambda t: t.name):
            if describable(topic.name):
                topic_results.append(_topic_answer(snap, brokers, topic, ops(topic.name)))

    return _answer(
        snap,
        brokers,
        topic_results,
        authz.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME) if cluster_ops else None,
    )


def _answer(
    snap: Snapshot,
    brokers: Mapping[int, AdvertisedBroker],
    topics: list[Topic],
    cluster_ops: set[int] | None,
) -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            Broker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in brokers.values()
        ],
        cluster_id=snap.cluster_id or None,
        controller_id=controller_id(brokers),
        topics=topics,
        authorized_operations=authorized_operations(cluster_ops),
    )


# The all-topics answer without authorized operations, per broker set (see _ANSWERS).
_ALL_TOPICS: dict[int, tuple[Snapshot, Mapping[int, AdvertisedBroker], MetadataResponse]] = {}

# The all-topics answers given before, by the request's bytes: (listener, API version,
# request body) -> the answer. A client pipelining the same all-topics request over
# and over (issue 14's never-read clients: ~57 answers per connection, 20 connections
# reconnecting together) had each one decoded and run through the handler to find the
# same shared answer; now the bytes find it. Bounded (bodies of _MAX_REQUEST_BYTES,
# _MAX_REQUESTS of them), and an entry is used only while it is still the all-topics
# answer of the current snapshot and broker set (_all_topics_answer's own test).
_BY_REQUEST: dict[tuple[str, int, bytes], MetadataResponse] = {}
_MAX_REQUEST_BYTES = 64  # an all-topics request is a few bytes (more: tagged fields)
_MAX_REQUESTS = 256


def answered_before(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, body: memoryview
) -> MetadataResponse | None:
    """The shared all-topics answer an identical request got, if it is what
    :func:`handle` would answer now: the same bytes ask the same (the topics, the
    authorized-operations flags), the snapshot and broker set are the ones it was
    built from (``_ALL_TOPICS``), and it still applies to every client (no authorizer,
    no quotas: :func:`handle`'s own conditions; quotas come with the snapshot)."""
    if len(body) > _MAX_REQUEST_BYTES or not _BY_REQUEST:
        return None
    answer = _BY_REQUEST.get((ctx.listener, header.api_version, bytes(body)))
    if answer is None or gw.authorizer.enabled:
        return None
    brokers = gw.brokers(ctx.listener)
    entry = _ALL_TOPICS.get(id(brokers))
    if (
        entry is None
        or entry[2] is not answer
        or entry[0] is not gw.metadata.current
        or entry[1] is not brokers
        or gw.quotas.any()
    ):
        return None
    return answer


def remember(
    ctx: ConnectionContext, header: RequestHeader, body: memoryview, answer: MetadataResponse
) -> None:
    """Note that this request got the shared all-topics ``answer`` (:func:`handle`
    returned it), for :func:`answered_before`."""
    if len(body) > _MAX_REQUEST_BYTES:
        return
    if len(_BY_REQUEST) >= _MAX_REQUESTS:
        _BY_REQUEST.clear()
    _BY_REQUEST[(ctx.listener, header.api_version, bytes(body))] = answer


def _all_topics_answer(snap: Snapshot, brokers: Mapping[int, AdvertisedBroker]) -> MetadataResponse:
    entry = _ALL_TOPICS.get(id(brokers))
    if entry is not None and entry[0] is snap and entry[1] is brokers:
        return entry[2]
    if len(_ALL_TOPICS) >= _MAX_BROKER_SETS:
        _ALL_TOPICS.clear()
    answer = _answer(
        snap,
        brokers,
        [
            _topic_answer(snap, brokers, topic, None)
            for topic in sorted(snap.topics.values(), key=lambda t: t.name)
        ],
        None,
    )
    _ALL_TOPICS[id(brokers)] = (snap, brokers, answer)
    return answer


# Topic answers without authorized operations, built once per metadata snapshot and
# broker set (the gateway hands out the same objects until either changes), by the
# broker set's id. Rebuilding them was most of an all-topics Metadata request's cost
# (3.5 ms of event-loop time on a small cluster), which a client pipelining them
# could make the loop spend over and over.
_ANSWERS: dict[int, tuple[Snapshot, Mapping[int, AdvertisedBroker], dict[str, Topic]]] = {}
_MAX_BROKER_SETS = 64  # listeners of the gateways in this process (tests run several)


def _topic_answer(
    snap: Snapshot,
    brokers: Mapping[int, AdvertisedBroker],
    topic: common_pb2.Topic,
    ops: set[int] | None,
) -> Topic:
    if ops is not None:
        return _topic(brokers, topic, ops)
    entry = _ANSWERS.get(id(brokers))
    if entry is None or entry[0] is not snap or entry[1] is not brokers:
        if len(_ANSWERS) >= _MAX_BROKER_SETS:
            _ANSWERS.clear()
        entry = _ANSWERS[id(brokers)] = (snap, brokers, {})
    answers = entry[2]
    found = answers.get(topic.name)
    if found is None:
        found = answers[topic.name] = _topic(brokers, topic, None)
    return found


def _topic(
    brokers: Mapping[int, AdvertisedBroker], topic: common_pb2.Topic, ops: set[int] | None
) -> Topic:
    partitions = []
    for p in topic.partitions:
        if p.leader in brokers:
            error = ErrorCode.NONE
            leader = p.leader
        else:
            error = ErrorCode.LEADER_NOT_AVAILABLE
            leader = -1
        partitions.append(
            Partition(
                error_code=int(error),
                partition_index=p.partition,
                leader_id=leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=list(p.offline_replicas),
            )
        )
    return Topic(
        error_code=0,
        name=topic.name,
        topic_id=uuid.UUID(bytes=bytes(topic.topic_id)) if len(topic.topic_id) == 16 else ZERO_UUID,
        is_internal=topic.internal,
        partitions=partitions,
        authorized_operations=authorized_operations(ops),
    )


async def _auto_create(gw: GatewayApi, names: list[str]) -> dict[str, int]:
    """Create ``names`` with the cluster defaults; return error codes of failures."""
    request = controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreatableTopic(name=n, num_partitions=-1, replication_factor=-1)
            for n in names
        ]
    )
    errors: dict[str, int] = {}
    try:
        response = await gw.controller.call(
            lambda s: s.CreateTopics, request, timeout=gw.metadata_wait_s + 5
        )
    except Exception:
        return {n: int(ErrorCode.LEADER_NOT_AVAILABLE) for n in names}
    for result in response.results:
        if result.error_code and result.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            errors[result.name] = result.error_code
    wanted = [n for n in names if n not in errors]

    def ready(s: Snapshot) -> bool:
        for n in wanted:
            t = s.topics.get(n)
            if t is None or any(p.leader < 0 for p in t.partitions):
                return False
        return True

    if wanted and not await gw.metadata.wait_for(ready, gw.metadata_wait_s):
        for n in wanted:
            if n not in gw.metadata.current.topics:
                errors[n] = int(ErrorCode.LEADER_NOT_AVAILABLE)
    return errors
