"""Topics as the console shows and changes them, all through the Kafka admin APIs.

Listing is one Metadata request, or none: when the console follows the controller's
metadata stream and acts as itself (no SASL), the list is built from that pushed
snapshot, the very data the gateway's Metadata answers from, so a list of 10,000
partitions costs neither the gateway nor the console an encode and a decode. With
SASL it is the user's own Metadata, which leaves out what they may not DESCRIBE. A
topic's page adds one ListOffsets per leader for
each of log start and log end, and one DescribeConfigs. Create, delete and config
changes are CreateTopics, DeleteTopics and IncrementalAlterConfigs; the broker
validates, and its error message (Kafka's wording) is what the user sees.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import cached_property

from odradek.console.offsets import EARLIEST, LATEST, list_offsets
from odradek.kafka_client import KafkaClient, KafkaClientError, Message, check
from odradek.metadata_cache import NodeKind, Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
# DescribeConfigs ConfigSource values (org.apache.kafka.common.requests.DescribeConfigsResponse)
CONFIG_SOURCES = {
    0: "unknown",
    1: "topic",
    2: "dynamic broker",
    3: "dynamic default broker",
    4: "static broker",
    5: "default",
    6: "dynamic broker logger",
    7: "client metrics",
    8: "group",
}
OP_SET, OP_DELETE = 0, 1  # IncrementalAlterConfigs operations (AlterConfigOp.OpType)


@dataclass
class PartitionRow:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error: str = ""
    log_start: int | None = None
    log_end: int | None = None
    size: int | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def messages(self) -> int | None:
        if self.log_start is None or self.log_end is None or self.log_end < 0:
            return None
        return max(0, self.log_end - self.log_start)


@dataclass
class TopicRow:
    name: str
    topic_id: str
    internal: bool
    partitions: list[PartitionRow] = field(default_factory=list)
    error: str = ""

    # Computed once, on first use after the row is built (a list of 1,000 topics reads
    # each of them on every render).
    @cached_property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @cached_property
    def under_replicated(self) -> int:
        return sum(1 for p in self.partitions if p.under_replicated)

    @cached_property
    def offline(self) -> int:
        return sum(1 for p in self.partitions if p.leader < 0)


@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool
    documentation: str = ""

    @property
    def is_override(self) -> bool:
        return self.source == "topic"


def topic_rows(metadata: Message) -> list[TopicRow]:
    rows = []
    for t in metadata.topics:
        row = TopicRow(t.name, str(t.topic_id), bool(t.is_internal))
        if t.error_code:
            row.error = ErrorCode(t.error_code).name
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            row.partitions.append(
                PartitionRow(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas),
                    ErrorCode(p.error_code).name if p.error_code else "",
                )
            )
        rows.append(row)
    rows.sort(key=lambda r: r.name)
    return rows


async def list_topics(client: KafkaClient) -> list[TopicRow]:
    return topic_rows(await client.metadata())


def snapshot_rows(snapshot: Snapshot) -> list[TopicRow]:
    """Every topic as Metadata would show it (a leader not online as a storage node is
    no leader, LEADER_NOT_AVAILABLE, as the gateway answers)."""
    online = {n.node_id for n in snapshot.nodes_of(NodeKind.STORAGE)}
    rows = []
    for t in snapshot.raw.topics:
        raw_id = bytes(t.topic_id)
        row = TopicRow(
            t.name, str(uuid.UUID(bytes=raw_id)) if len(raw_id) == 16 else "", t.internal
        )
        for p in sorted(t.partitions, key=lambda p: p.partition):
            led = p.leader in online
            row.partitions.append(
                PartitionRow(
                    p.partition,
                    p.leader if led else -1,
                    p.leader_epoch,
                    list(p.replicas),
                    list(p.isr),
                    list(p.offline_replicas),
                    "" if led else "LEADER_NOT_AVAILABLE",
                )
            )
        rows.append(row)
    rows.sort(key=lambda r: r.name)
    return rows


async def describe_topic(client: KafkaClient, name: str) -> TopicRow:
    """The topic with each partition's log start and end offsets."""
    metadata = await client.metadata([name])
    topic = next((t for t in metadata.topics if t.name == name), None)
    if topic is None:
        raise KafkaClientError(f"Topic {name} not found", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    check(
        topic.error_code,
        f"Topic '{name}': {ErrorCode(topic.error_code).name}" if topic.error_code else None,
    )
    row = topic_rows(metadata)[0]
    tps = [(name, p.partition) for p in row.partitions]
    starts = await list_offsets(client, dict.fromkeys(tps, EARLIEST), metadata)
    ends = await list_offsets(client, dict.fromkeys(tps, LATEST), metadata)
    for p in row.partitions:
        start, end = starts.get((name, p.partition)), ends.get((name, p.partition))
        p.log_start = start.offset if start and not start.error else None
        p.log_end = end.offset if end and not end.error else None
    return row


async def describe_configs(client: KafkaClient, name: str) -> list[ConfigRow]:
    cls = DescribeConfigsRequest
    request = cls(
        resources=[
            cls.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=True,
    )
    response = await client.send(ApiKey.DESCRIBE_CONFIGS, request)
    result = response.results[0]
    check(result.error_code, result.error_message)
    return sorted(
        (
            ConfigRow(
                c.name,
                c.value,
                CONFIG_SOURCES.get(c.config_source, str(c.config_source)),
                bool(c.read_only),
                bool(c.is_sensitive),
                c.documentation or "",
            )
            for c in result.configs
        ),
        key=lambda c: c.name,
    )


async def create_topic(
    client: KafkaClient,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str],
    *,
    validate_only: bool = False,
) -> None:
    cls = CreateTopicsRequest
    request = cls(
        topics=[
            cls.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                assignments=[],
                configs=[
                    cls.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                    for k, v in configs.items()
                ],
            )
        ],
        timeout_ms=int(client.timeout * 1000),
        validate_only=validate_only,
    )
    response = await client.send(ApiKey.CREATE_TOPICS, request, client.controller_id_or_none())
    client.invalidate()
    for t in response.topics:
        check(t.error_code, t.error_message)


async def delete_topic(client: KafkaClient, name: str) -> None:
    cls = DeleteTopicsRequest
    request = cls(topic_names=[name], timeout_ms=int(client.timeout * 1000))
    response = await client.send(ApiKey.DELETE_TOPICS, request, client.controller_id_or_none())
    client.invalidate()
    for t in response.responses:
        check(t.error_code, t.error_message)


async def alter_configs(
    client: KafkaClient, name: str, set_values: dict[str, str], delete: list[str]
) -> None:
    """Set and remove topic overrides in one IncrementalAlterConfigs: all or nothing."""
    cls = IncrementalAlterConfigsRequest
    entry = cls.AlterConfigsResource.AlterableConfig
    configs = [entry(name=k, config_operation=OP_SET, value=v) for k, v in set_values.items()]
    configs += [entry(name=k, config_operation=OP_DELETE, value=None) for k in delete]
    request = cls(
        resources=[
            cls.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=name, configs=configs
            )
        ],
        validate_only=False,
    )
    response = await client.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    for r in response.responses:
        check(r.error_code, r.error_message)
