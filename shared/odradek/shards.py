"""Shards of Kafka's internal topics: which shard a key falls in, and who owns a shard.

Kafka's coordinators map a key to a partition of their internal topic with
``Utils.abs(key.hashCode()) % partitions`` (``GroupMetadataManager.partitionFor``,
``TransactionStateManager.partitionFor``). ``String.hashCode`` is Java's: ``s[0]*31^(n-1)
+ ... + s[n-1]`` over the string's UTF-16 code units (so a character outside the Basic
Multilingual Plane counts as its two surrogates), in wrapping 32-bit signed arithmetic.
``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (``Math.abs`` would leave it negative), so
a key whose hash is ``-2**31`` lands in shard 0.

Ownership: the controller publishes one table per sharded service
(``ClusterMetadata.coordinator_shards`` for ``__consumer_offsets``,
``ClusterMetadata.transaction_shards`` for ``__transaction_state``): an entry per shard
with the owning node and an epoch bumped on every move (a previous owner is fenced).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from odradek.rpc.v1 import common_pb2

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


def partition_for(key: str, num_partitions: int) -> int:
    """``Utils.abs(key.hashCode()) % num_partitions``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hash(key)) % num_partitions


def shard_owner(table: Sequence[common_pb2.CoordinatorShard], shard: int) -> tuple[int, int]:
    """``(owning node id, shard epoch)`` from a controller shard table; node id -1 when
    the shard has no owner (or the table does not list it)."""
    entry = table[shard] if 0 <= shard < len(table) else None
    if entry is None or entry.shard != shard:
        entry = next((s for s in table if s.shard == shard), None)
    if entry is None:
        return -1, 0
    return entry.coordinator_id, entry.epoch


def online_node(
    metadata: common_pb2.ClusterMetadata, node_id: int, kind: int
) -> common_pb2.Node | None:
    """The node ``node_id`` if it is an ONLINE node of ``kind`` with a gRPC port."""
    for node in metadata.nodes:
        if node.node_id == node_id:
            if node.kind == kind and node.state == common_pb2.ONLINE and node.grpc_port > 0:
                return node
            return None
    return None
