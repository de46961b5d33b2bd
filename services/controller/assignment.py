"""Replica placement for new partitions, and checks of explicit assignments.

Automatic placement follows Kafka's rack-unaware rule: the first replica of
partition ``p`` is broker ``(p + start) % n`` of the sorted broker list, and the
followers sit at a shift from it that grows by one every ``n`` partitions, so
leaders spread evenly and the follower sets of one broker's partitions differ.
``start`` and the initial shift are random for a new topic (no broker is always
first) and continue from partition 0's placement when partitions are added.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

from odradek.controller.errors import ControllerError
from odradek.protocol.errors import ErrorCode


def check_replication_factor(replication_factor: int, brokers: int) -> None:
    if replication_factor <= 0:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > brokers:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {brokers}.",
        )


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
    check_replication_factor(replication_factor, n)
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


def _bad(message: str) -> ControllerError:
    return ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def check_replica_list(replicas: Sequence[int], registered: Collection[int]) -> None:
    if not replicas:
        raise _bad("The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for broker in replicas:
        if broker in seen:
            raise _bad(
                f"The manual partition assignment includes the broker {broker} more than once."
            )
        seen.add(broker)
        if broker not in registered:
            raise _bad(
                f"The manual partition assignment includes broker {broker}, "
                "but no such broker is registered."
            )


def check_manual_assignment(
    assignment: Mapping[int, Sequence[int]], registered: Collection[int]
) -> list[list[int]]:
    """Validate a CreateTopics assignment (partition -> replicas); return it as a list."""
    if sorted(assignment) != list(range(len(assignment))):
        raise _bad("Partitions should be a consecutive 0-based integer sequence.")
    out = [list(assignment[p]) for p in range(len(assignment))]
    for replicas in out:
        check_replica_list(replicas, registered)
    if len({len(r) for r in out}) > 1:
        raise _bad("All partitions should have the same number of replicas.")
    return out
