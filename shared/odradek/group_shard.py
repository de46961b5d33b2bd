"""Which ``__consumer_offsets`` partition (coordinator shard) owns a group.

Kafka's ``GroupMetadataManager.partitionFor``: ``Utils.abs(groupId.hashCode()) %
offsets.topic.num.partitions``. ``String.hashCode`` is Java's: ``s[0]*31^(n-1) + ... +
s[n-1]`` over the string's UTF-16 code units (so a character outside the Basic
Multilingual Plane counts as its two surrogates), in wrapping 32-bit signed arithmetic.
``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (``Math.abs`` would leave it negative),
so a group whose hash is ``-2**31`` lands in shard 0. The seed article writes
``Math.abs(hash % n)``, which agrees everywhere except that one hash value; we follow
Kafka's code, since clients and tools compute the shard the way Kafka does.

Every service computes shards with this module: the gateway to route, the coordinator
and offset store to check ownership, tools to name the partition.
"""

from __future__ import annotations

from array import array
from functools import lru_cache

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.rpc.v1 import common_pb2

DEFAULT_NUM_PARTITIONS = BROKER_CONFIGS.int("offsets.topic.num.partitions")
OFFSETS_TOPIC = "__consumer_offsets"

_INT_MIN = -(2**31)
_MASK = 0xFFFFFFFF


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode`` as a signed 32-bit int."""
    units = array("H", value.encode("utf-16-le"))  # one element per UTF-16 code unit
    if array("H", b"\x01\x00")[0] != 1:  # pragma: no cover - big-endian hosts
        units.byteswap()
    h = 0
    for unit in units:
        h = (h * 31 + unit) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs`` except that ``Integer.MIN_VALUE`` gives 0."""
    return 0 if n == _INT_MIN else abs(n)


@lru_cache(maxsize=65536)
def group_shard(group_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of ``group_id``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hash(group_id)) % num_partitions


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
    shards = metadata.coordinator_shards
    entry = shards[shard] if 0 <= shard < len(shards) else None
    if entry is None or entry.shard != shard:
        entry = next((s for s in shards if s.shard == shard), None)
    if entry is None:
        return -1, 0
    return entry.coordinator_id, entry.epoch


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
