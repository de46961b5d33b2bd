"""The Kafka requests the mirror sends, over :class:`odradek.kafka_client.KafkaClient`.

Each function builds one request the way Kafka's Java clients do, sends it to the
broker that must answer (partition leader, group coordinator, any broker for admin
calls) and returns plain values; per-partition error codes are returned, not raised,
so the caller decides what is retriable. The versions sent are ``min(cap, broker's
max)`` (:data:`odradek.kafka_client.VERSION_CAPS`), so sources that serve older
versions (Tansu, older Kafka) answer the same requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from odradek.kafka_client import KafkaClient, KafkaClientError, check, error_text
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_request import READ_COMMITTED, consumer_fetch
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)

TopicPartition = tuple[str, int]
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
T = TypeVar("T")
V = TypeVar("V")
EARLIEST = -2
LATEST = -1


def by_topic(items: Mapping[TopicPartition, V]) -> dict[str, list[tuple[int, V]]]:
    """(partition, value) pairs grouped by topic, as Kafka requests nest them."""
    out: dict[str, list[tuple[int, V]]] = {}
    for (topic, partition), value in items.items():
        out.setdefault(topic, []).append((partition, value))
    return out


def committed_topics(
    topic_cls: Callable[..., T],
    partition_cls: Callable[..., object],
    offsets: Mapping[TopicPartition, tuple[int, str]],
) -> list[T]:
    """The topics of an OffsetCommit or TxnOffsetCommit: (offset, metadata) per partition."""
    return [
        topic_cls(
            name=topic,
            partitions=[
                partition_cls(
                    partition_index=p,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata=metadata,
                )
                for p, (offset, metadata) in parts
            ],
        )
        for topic, parts in by_topic(offsets).items()
    ]


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error_code: int
    records: bytes
    high_watermark: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer_id, first_offset)


async def fetch(
    client: KafkaClient,
    leader: int,
    positions: Mapping[TopicPartition, int],
    *,
    max_wait_ms: int,
    min_bytes: int = 1,
    max_bytes: int,
    partition_max_bytes: int,
) -> dict[TopicPartition, FetchedPartition]:
    """One full (sessionless) read_committed Fetch from ``leader``."""
    request = consumer_fetch(
        positions,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        partition_max_bytes=partition_max_bytes,
        isolation_level=READ_COMMITTED,
    )
    response = await client.send(ApiKey.FETCH, request, leader)
    check(getattr(response, "error_code", 0))
    out: dict[TopicPartition, FetchedPartition] = {}
    for t in response.responses:
        for p in t.partitions:
            out[(t.topic, p.partition_index)] = FetchedPartition(
                p.error_code,
                bytes(p.records or b""),
                p.high_watermark,
                p.log_start_offset,
                [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])],
            )
    return out


async def produce(
    client: KafkaClient,
    leader: int,
    tp: TopicPartition,
    batch: bytes | bytearray,
    *,
    timeout_ms: int,
    transactional_id: str | None = None,
) -> tuple[int, int, str]:
    """Produce one batch with acks=all: (error code, base offset, error message)."""
    cls = ProduceRequest
    request = cls(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=timeout_ms,
        topic_data=[
            cls.TopicProduceData(
                name=tp[0],
                partition_data=[
                    cls.TopicProduceData.PartitionProduceData(index=tp[1], records=bytes(batch))
                ],
            )
        ],
    )
    response = await client.send(ApiKey.PRODUCE, request, leader)
    result = response.responses[0].partition_responses[0]
    return result.error_code, result.base_offset, getattr(result, "error_message", None) or ""


async def init_producer_id(
    client: KafkaClient,
    transactional_id: str | None = None,
    *,
    transaction_timeout_ms: int = 60_000,
    node_id: int | None = None,
) -> tuple[int, int]:
    """A producer id and epoch (idempotent producer, or the transactional id's)."""
    request = InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=transaction_timeout_ms,
        producer_id=-1,
        producer_epoch=-1,
    )
    response = await client.send(ApiKey.INIT_PRODUCER_ID, request, node_id)
    check(response.error_code)
    return response.producer_id, response.producer_epoch


async def find_coordinator(client: KafkaClient, key: str, key_type: int = 0) -> int:
    """The coordinator broker for a group (key_type 0) or transactional id (1)."""
    cls = FindCoordinatorRequest
    version = await client.version_for(ApiKey.FIND_COORDINATOR)
    if version >= 4:
        response = await client.send(
            ApiKey.FIND_COORDINATOR, cls(key_type=key_type, coordinator_keys=[key])
        )
        found = response.coordinators[0]
        check(found.error_code, found.error_message)
        node, host, port = found.node_id, found.host, found.port
    else:
        response = await client.send(ApiKey.FIND_COORDINATOR, cls(key=key, key_type=key_type))
        check(response.error_code, getattr(response, "error_message", None))
        node, host, port = response.node_id, response.host, response.port
    if node not in client.brokers:
        from odradek.kafka_client import Broker

        client.brokers[node] = Broker(node, host, port)
    return int(node)


async def offset_fetch(
    client: KafkaClient,
    coordinator: int,
    group_id: str,
    partitions: Iterable[TopicPartition] | None = None,
) -> dict[TopicPartition, tuple[int, str]]:
    """The committed offsets of ``group_id`` (all, or of ``partitions``): (offset,
    metadata) by partition."""
    cls = OffsetFetchRequest
    version = await client.version_for(ApiKey.OFFSET_FETCH, coordinator)
    wanted = None if partitions is None else by_topic({tp: None for tp in partitions})
    if version >= 8:
        topic_cls = cls.OffsetFetchRequestGroup.OffsetFetchRequestTopics
        request = cls(
            groups=[
                cls.OffsetFetchRequestGroup(
                    group_id=group_id,
                    topics=None
                    if wanted is None
                    else [
                        topic_cls(name=t, partition_indexes=[p for p, _ in parts])
                        for t, parts in wanted.items()
                    ],
                )
            ],
            require_stable=True,
        )
        response = await client.send(ApiKey.OFFSET_FETCH, request, coordinator)
        group = response.groups[0]
        check(group.error_code)
        topics = group.topics
    else:
        topics = (
            None
            if wanted is None
            else [
                cls.OffsetFetchRequestTopic(name=t, partition_indexes=[p for p, _ in parts])
                for t, parts in wanted.items()
            ]
        )
        response = await client.send(
            ApiKey.OFFSET_FETCH, cls(group_id=group_id, topics=topics), coordinator
        )
        check(getattr(response, "error_code", 0))
        topics = response.topics
    out: dict[TopicPartition, tuple[int, str]] = {}
    for t in topics:
        for p in t.partitions:
            if not p.error_code and p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = (p.committed_offset, p.metadata or "")
    return out


async def offset_commit(
    client: KafkaClient,
    coordinator: int,
    group_id: str,
    offsets: Mapping[TopicPartition, tuple[int, str]],
    *,
    generation: int = -1,
    member_id: str = "",
) -> dict[TopicPartition, int]:
    """Commit (offset, metadata) per partition; returns the per-partition error codes."""
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        retention_time_ms=-1,
        topics=committed_topics(topic_cls, topic_cls.OffsetCommitRequestPartition, offsets),
    )
    response = await client.send(ApiKey.OFFSET_COMMIT, request, coordinator)
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def list_offsets(
    client: KafkaClient, leader: int, specs: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets (EARLIEST, LATEST or a timestamp): (error code, offset) by partition."""
    cls = ListOffsetsRequest
    request = cls(
        replica_id=-1,
        isolation_level=READ_COMMITTED,
        topics=[
            cls.ListOffsetsTopic(
                name=topic,
                partitions=[
                    cls.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1
                    )
                    for p, ts in parts
                ],
            )
            for topic, parts in by_topic(specs).items()
        ],
    )
    response = await client.send(ApiKey.LIST_OFFSETS, request, leader)
    out: dict[TopicPartition, tuple[int, int]] = {}
    for t in response.topics:
        for p in t.partitions:
            offset = getattr(p, "offset", -1)
            if offset is None or (offset < 0 and getattr(p, "old_style_offsets", None)):
                offset = p.old_style_offsets[0]
            out[(t.name, p.partition_index)] = (p.error_code, offset)
    return out


async def describe_topic_configs(
    client: KafkaClient, topics: Iterable[str]
) -> dict[str, dict[str, tuple[str | None, bool]]]:
    """Topic configs: name -> (value, is_topic_override) by topic (errors raised)."""
    names = list(topics)
    if not names:
        return {}
    cls = DescribeConfigsRequest
    request = cls(
        resources=[
            cls.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=t, configuration_keys=None
            )
            for t in names
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    response = await client.send(ApiKey.DESCRIBE_CONFIGS, request)
    out: dict[str, dict[str, tuple[str | None, bool]]] = {}
    for r in response.results:  # (value, set on the topic itself)
        if r.error_code:
            raise KafkaClientError(
                f"DescribeConfigs {r.resource_name}: {error_text(r.error_code, r.error_message)}",
                r.error_code,
            )
        out[r.resource_name] = {
            c.name: (c.value, _is_topic_override(c)) for c in r.configs if not c.is_sensitive
        }
    return out


def _is_topic_override(entry: object) -> bool:
    """Set on the topic (ConfigSource DYNAMIC_TOPIC_CONFIG = 1, KIP-226), not inherited."""
    source = getattr(entry, "config_source", None)
    if source is not None and int(source) >= 0:
        return int(source) == 1
    return not bool(getattr(entry, "is_default", True))  # DescribeConfigs v0


async def create_topics(
    client: KafkaClient,
    topics: Mapping[str, tuple[int, Mapping[str, str]]],
    *,
    timeout_ms: int = 30_000,
) -> dict[str, tuple[int, str]]:
    """CreateTopics: name -> (partitions, configs); (error code, message) by topic."""
    if not topics:
        return {}
    cls = CreateTopicsRequest
    C = cls.CreatableTopic
    request = cls(
        topics=[
            C(
                name=name,
                num_partitions=count,
                replication_factor=-1,
                assignments=[],
                configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
            for name, (count, configs) in topics.items()
        ],
        timeout_ms=timeout_ms,
        validate_only=False,
    )
    response = await client.send(ApiKey.CREATE_TOPICS, request, client.controller_id_or_none())
    client.invalidate()
    return {t.name: (t.error_code, t.error_message or "") for t in response.topics}


async def create_partitions(
    client: KafkaClient, counts: Mapping[str, int], *, timeout_ms: int = 30_000
) -> dict[str, tuple[int, str]]:
    """CreatePartitions: raise each topic's partition count to ``counts[topic]``."""
    if not counts:
        return {}
    cls = CreatePartitionsRequest
    request = cls(
        topics=[
            cls.CreatePartitionsTopic(name=t, count=n, assignments=None) for t, n in counts.items()
        ],
        timeout_ms=timeout_ms,
        validate_only=False,
    )
    response = await client.send(ApiKey.CREATE_PARTITIONS, request, client.controller_id_or_none())
    client.invalidate()
    return {r.name: (r.error_code, r.error_message or "") for r in response.results}


async def alter_topic_configs(
    client: KafkaClient, changes: Mapping[str, Mapping[str, str]]
) -> dict[str, tuple[int, str]]:
    """IncrementalAlterConfigs SET of each topic's ``changes``."""
    if not changes:
        return {}
    cls = IncrementalAlterConfigsRequest
    R = cls.AlterConfigsResource
    request = cls(
        resources=[
            R(
                resource_type=TOPIC_RESOURCE,
                resource_name=topic,
                configs=[
                    R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in cfg.items()
                ],
            )
            for topic, cfg in changes.items()
        ],
        validate_only=False,
    )
    response = await client.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    return {r.resource_name: (r.error_code, r.error_message or "") for r in response.responses}


RETRIABLE = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR,
}


async def list_groups(client: KafkaClient) -> set[str]:
    """Every group id on the cluster (ListGroups asks each broker for its own groups)."""
    from odradek.protocol.messages import ListGroupsRequest

    await client.metadata(None)
    out: set[str] = set()
    for node in list(client.brokers):
        response = await client.send(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=[]), node)
        if not response.error_code:
            out.update(g.group_id for g in response.groups)
    return out


# -- transactions (KIP-98): the calls of one exactly-once copy ---------------------------
# CONCURRENT_TRANSACTIONS: the previous transaction's markers are still being written;
# asked again after these pauses (None: give up), as Kafka's TransactionManager retries.
CONCURRENT_TRANSACTIONS_BACKOFF_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.1, 0.2, 0.5, 1.0, None)


async def add_partitions_to_txn(
    client: KafkaClient, coordinator: int, txn: tuple[str, int, int], tp: TopicPartition
) -> None:
    from odradek.protocol.messages import AddPartitionsToTxnRequest

    cls = AddPartitionsToTxnRequest
    transactional_id, producer_id, epoch = txn
    request = cls(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[cls.AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])],
    )
    for backoff in CONCURRENT_TRANSACTIONS_BACKOFF_S:
        response = await client.send(ApiKey.ADD_PARTITIONS_TO_TXN, request, coordinator)
        codes = [
            p.partition_error_code
            for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition
        ]
        if backoff is None or ErrorCode.CONCURRENT_TRANSACTIONS not in codes:
            break
        await asyncio.sleep(backoff)
    for code in codes:
        check(code)


async def add_offsets_to_txn(
    client: KafkaClient, coordinator: int, txn: tuple[str, int, int], group_id: str
) -> None:
    from odradek.protocol.messages import AddOffsetsToTxnRequest

    transactional_id, producer_id, epoch = txn
    request = AddOffsetsToTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        group_id=group_id,
    )
    for backoff in CONCURRENT_TRANSACTIONS_BACKOFF_S:
        response = await client.send(ApiKey.ADD_OFFSETS_TO_TXN, request, coordinator)
        if backoff is None or response.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            break
        await asyncio.sleep(backoff)
    check(response.error_code)


async def txn_offset_commit(
    client: KafkaClient,
    group_coordinator: int,
    txn: tuple[str, int, int],
    group_id: str,
    offsets: Mapping[TopicPartition, tuple[int, str]],
) -> None:
    from odradek.protocol.messages import TxnOffsetCommitRequest

    topic_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    transactional_id, producer_id, epoch = txn
    request = TxnOffsetCommitRequest(
        transactional_id=transactional_id,
        group_id=group_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=committed_topics(topic_cls, topic_cls.TxnOffsetCommitRequestPartition, offsets),
    )
    response = await client.send(ApiKey.TXN_OFFSET_COMMIT, request, group_coordinator)
    for t in response.topics:
        for p in t.partitions:
            check(p.error_code)


async def end_txn(
    client: KafkaClient, coordinator: int, txn: tuple[str, int, int], *, commit: bool
) -> None:
    from odradek.protocol.messages import EndTxnRequest

    transactional_id, producer_id, epoch = txn
    request = EndTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        committed=commit,
    )
    response = await client.send(ApiKey.END_TXN, request, coordinator)
    check(response.error_code)


# -- classic group membership (Kafka's JoinGroup protocol, KIP-345/KIP-394) --------------
@dataclass(frozen=True, slots=True)
class Joined:
    """A JoinGroup answer: the generation, who leads it, and (for the leader) every
    member's protocol metadata."""

    error_code: int
    generation: int
    member_id: str
    leader: str
    protocol_name: str
    members: dict[str, bytes]


async def join_group(
    client: KafkaClient,
    coordinator: int,
    group_id: str,
    member_id: str,
    *,
    protocol_type: str,
    protocols: Mapping[str, bytes],
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
) -> Joined:
    """One JoinGroup; the broker holds it until the rebalance completes (up to the
    rebalance timeout), so it is sent with that much time to answer."""
    cls = JoinGroupRequest
    request = cls(
        group_id=group_id,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=None,
        protocol_type=protocol_type,
        protocols=[cls.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols.items()],
        reason=None,
    )
    response = await client.send(
        ApiKey.JOIN_GROUP, request, coordinator, timeout=rebalance_timeout_ms / 1000.0 + 5.0
    )
    return Joined(
        response.error_code,
        response.generation_id,
        response.member_id,
        response.leader,
        response.protocol_name or "",
        {m.member_id: bytes(m.metadata or b"") for m in response.members},
    )


async def sync_group(
    client: KafkaClient,
    coordinator: int,
    group_id: str,
    generation: int,
    member_id: str,
    *,
    protocol_type: str,
    protocol_name: str,
    assignments: Mapping[str, bytes],
    timeout_s: float,
) -> tuple[int, bytes]:
    """SyncGroup: the leader hands out ``assignments``; every member gets its own
    (error code, assignment bytes)."""
    cls = SyncGroupRequest
    request = cls(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[
            cls.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in assignments.items()
        ],
    )
    response = await client.send(ApiKey.SYNC_GROUP, request, coordinator, timeout=timeout_s)
    return response.error_code, bytes(response.assignment or b"")


async def heartbeat(
    client: KafkaClient, coordinator: int, group_id: str, generation: int, member_id: str
) -> int:
    """Heartbeat: the error code (REBALANCE_IN_PROGRESS asks the member to rejoin)."""
    request = HeartbeatRequest(
        group_id=group_id, generation_id=generation, member_id=member_id, group_instance_id=None
    )
    response = await client.send(ApiKey.HEARTBEAT, request, coordinator)
    return int(response.error_code)


async def leave_group(client: KafkaClient, coordinator: int, group_id: str, member_id: str) -> None:
    """LeaveGroup (v3+: a list of members): the group rebalances without waiting for
    this member's session to expire."""
    cls = LeaveGroupRequest
    request = cls(
        group_id=group_id,
        member_id=member_id,
        members=[cls.MemberIdentity(member_id=member_id, group_instance_id=None, reason=None)],
    )
    response = await client.send(ApiKey.LEAVE_GROUP, request, coordinator)
    check(response.error_code)
