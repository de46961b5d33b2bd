"""Which ``__transaction_state`` partition (transaction coordinator shard) owns a
transactional id, and which transaction coordinator owns that shard.

Kafka's ``TransactionStateManager.partitionFor``: ``Utils.abs(transactionalId.hashCode())
% transaction.state.log.num.partitions`` (:func:`odradek.shards.partition_for`). The
controller spreads the shards over online transaction coordinators
(``ClusterMetadata.transaction_shards``, an epoch per shard bumped on every move); the
gateway routes client requests with this module, storage leaders find the coordinator
to verify a transactional produce with it (KIP-890), and the coordinator checks what
it owns.
"""

from __future__ import annotations

from functools import lru_cache

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.rpc.v1 import common_pb2
from odradek.shards import online_node, partition_for, shard_owner

TRANSACTION_STATE_TOPIC = "__transaction_state"
DEFAULT_NUM_PARTITIONS = BROKER_CONFIGS.int("transaction.state.log.num.partitions")


@lru_cache(maxsize=65536)
def transaction_shard(transactional_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``."""
    return partition_for(transactional_id, num_partitions)


def num_transaction_shards(metadata: common_pb2.ClusterMetadata) -> int:
    """The controller's shard table size, else ``transaction.state.log.num.partitions``."""
    if metadata.transaction_shards:
        return len(metadata.transaction_shards)
    raw = metadata.cluster_configs.get("transaction.state.log.num.partitions", "")
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_NUM_PARTITIONS
    return value if value > 0 else DEFAULT_NUM_PARTITIONS


def transaction_shard_of(metadata: common_pb2.ClusterMetadata, transactional_id: str) -> int:
    return transaction_shard(transactional_id, num_transaction_shards(metadata))


def transaction_coordinator_of(metadata: common_pb2.ClusterMetadata, shard: int) -> tuple[int, int]:
    """``(transaction coordinator node id, shard epoch)``; -1 when the shard has no owner."""
    return shard_owner(metadata.transaction_shards, shard)


def transaction_coordinator_node(
    metadata: common_pb2.ClusterMetadata, shard: int
) -> common_pb2.Node | None:
    """The online transaction coordinator owning ``shard`` (None: nobody can answer)."""
    owner, _ = transaction_coordinator_of(metadata, shard)
    if owner < 0:
        return None
    return online_node(metadata, owner, common_pb2.TRANSACTION_COORDINATOR)
