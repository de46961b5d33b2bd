"""Which ``__consumer_offsets`` partition (coordinator shard) owns a group.

Kafka's ``GroupMetadataManager.partitionFor``: ``Utils.abs(groupId.hashCode()) %
offsets.topic.num.partitions`` (the hash and ``abs`` are Java's and Kafka's, see
:mod:`odradek.shards`). The seed article writes ``Math.abs(hash % n)``, which agrees
everywhere except the hash ``-2**31``; we follow Kafka's code, since clients and tools
compute the shard the way Kafka does.

Every service computes shards with this module: the gateway to route, the coordinator
and offset store to check ownership, tools to name the partition.
"""

from __future__ import annotations

from functools import lru_cache

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.rpc.v1 import common_pb2
from odradek.shards import java_string_hash, kafka_abs, partition_for, shard_owner

__all__ = [
    "DEFAULT_NUM_PARTITIONS",
    "OFFSETS_TOPIC",
    "coordinator_of",
    "group_shard",
    "java_string_hash",
    "kafka_abs",
    "num_shards",
    "offset_store_of",
    "offset_stores",
    "shard_of",
]

DEFAULT_NUM_PARTITIONS = BROKER_CONFIGS.int("offsets.topic.num.partitions")
OFFSETS_TOPIC = "__consumer_offsets"


@lru_cache(maxsize=65536)
def group_shard(group_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of ``group_id``."""
    return partition_for(group_id, num_partitions)


# -- who owns a shard ------------------------------------------------------------------------
# Kept here so the gateway, the coordinator and the offset store apply the same rules to
# the same metadata snapshot.


def num_shards(metadata: common_pb2.ClusterMetadata) -> int:
    """The shard count: the controller's shard table, else ``offsets.topic.num.partitions``."""
    if metadata.coordinator_shards:
        return len(metadata.coordinator_shards)
    raw = metadata.cluster_configs.get("offsets.topic.num.partitions", "")
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_NUM_PARTITIONS
    return value if value > 0 else DEFAULT_NUM_PARTITIONS


def shard_of(metadata: common_pb2.ClusterMetadata, group_id: str) -> int:
    return group_shard(group_id, num_shards(metadata))


def coordinator_of(metadata: common_pb2.ClusterMetadata, shard: int) -> tuple[int, int]:
    """``(coordinator node id, shard epoch)``; node id -1 when the shard has no owner."""
    return shard_owner(metadata.coordinator_shards, shard)


def offset_stores(metadata: common_pb2.ClusterMetadata) -> list[common_pb2.Node]:
    return sorted(
        (
            n
            for n in metadata.nodes
            if n.kind == common_pb2.OFFSET_STORE and n.state == common_pb2.ONLINE
        ),
        key=lambda n: n.node_id,
    )


def offset_store_of(metadata: common_pb2.ClusterMetadata, shard: int) -> common_pb2.Node | None:
    """The offset store owning ``shard``: the ``shard % n``-th online store by node id."""
    stores = offset_stores(metadata)
    if not stores:
        return None
    return stores[shard % len(stores)]
