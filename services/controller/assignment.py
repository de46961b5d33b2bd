"""Replica placement for new partitions, and checks of explicit assignments.

Automatic placement is Kafka's rack-unaware rule (:mod:`odradek.replica_placement`,
shared with the reassignment tools); ``start`` and the initial shift are random for a
new topic (no broker is always first) and continue from partition 0's placement when
partitions are added. The replication factor is checked here first, so its errors
carry Kafka's codes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from odradek.controller.errors import ControllerError
from odradek.protocol.errors import ErrorCode
from odradek.replica_placement import assign_replicas, check_broker_count

__all__ = [
    "assign_replicas",
    "check_manual_assignment",
    "check_replica_list",
    "check_replication_factor",
]


def check_replication_factor(replication_factor: int, brokers: int) -> None:
    problem = check_broker_count(replication_factor, brokers)
    if problem is not None:
        raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR, problem)


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
