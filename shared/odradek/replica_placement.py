"""Kafka's rack-unaware replica placement, shared by the controller (new topics and
partitions) and the reassignment tools (``odradek reassign --generate``, as
kafka-reassign-partitions.sh proposes with ``AdminUtils.assignReplicasToBrokers``).

The first replica of partition ``p`` is broker ``(p + start) % n`` of the sorted
broker list, and the followers sit at a shift from it that grows by one every ``n``
partitions, so leaders spread evenly and the follower sets of one broker's partitions
differ. ``start`` and the initial shift are random unless given. Pure.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def check_broker_count(replication_factor: int, brokers: int) -> str | None:
    """Kafka's complaint about a replication factor for ``brokers`` brokers, or None."""
    if replication_factor <= 0:
        return "Replication factor must be larger than 0."
    if replication_factor > brokers:
        return f"Replication factor: {replication_factor} larger than available brokers: {brokers}."
    return None


def assign_replicas(
    brokers: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start_index: int | None = None,
    replica_shift: int | None = None,
    rng: random.Random | None = None,
) -> list[list[int]]:
    """Replica lists (preferred leader first) for partitions ``first_partition`` onwards."""
    ordered = sorted(brokers)
    n = len(ordered)
    problem = check_broker_count(replication_factor, n)
    if problem is not None:
        raise ValueError(problem)
    rand = rng or random.Random()
    start = rand.randrange(n) if start_index is None else start_index % n
    shift = rand.randrange(n) if replica_shift is None else replica_shift
    out: list[list[int]] = []
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(replicas)
    return out
