"""Partition reassignment as Kafka's controller does it (KIP-455), as pure rules.

A partition under reassignment keeps ``replicas = target + removing`` (target first, so
the target's first replica is the preferred leader), with ``adding`` (in the target, not
in the replicas before) and ``removing`` (in the replicas before, not in the target).
Adding replicas start as followers and catch up by follower fetch; the leader asks
for them to join the ISR as for any follower (AlterPartition). Once the ISR without
the removing replicas holds every target replica, the reassignment completes:
``replicas = target``, ``isr = isr - removing``, adding/removing empty. Kafka's
``PartitionReassignmentReplicas`` and ``PartitionReassignmentRevert`` (package
``org.apache.kafka.controller``) are the model.

A new reassignment of a partition already moving starts from its full replica list,
as KRaft does: a replica the earlier one was adding and the new one drops becomes a
removing replica. Cancelling reverts to ``replicas - adding`` with ``isr - adding``;
if that ISR would be empty, the first remaining replica becomes the ISR, which is an
unclean election and needs ``unclean.leader.election.enable``.

Leader and epochs (Kafka's ``PartitionChangeBuilder``): the current leader stays while
it is in the ISR and eligible; otherwise the first eligible ISR member in replica
order leads. A change that removes any replica bumps the leader epoch even when the
leader stays, so a removed replica's fetches are fenced.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from odradek.controller.assignment import check_replica_list
from odradek.controller.cluster_state import NO_LEADER, PartitionState
from odradek.controller.election import Change
from odradek.controller.errors import ControllerError
from odradek.protocol.errors import ErrorCode


@dataclass(frozen=True)
class ReplicaSets:
    """A partition's replica list and the reassignment it is in (if any)."""

    replicas: list[int]
    adding: list[int]
    removing: list[int]

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]


def in_progress(p: PartitionState) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


def check_target(target: Sequence[int], registered: Collection[int]) -> None:
    """Kafka's ``validateManualPartitionAssignment``: non-empty, registered, no duplicates.

    Kafka checks the sorted list, so the first error reported is the lowest broker id's.
    """
    check_replica_list(sorted(target), registered)


def check_replication_factor_kept(p: PartitionState, target: Sequence[int]) -> None:
    """KIP-860 (AlterPartitionReassignments v1 with AllowReplicationFactorChange=false)."""
    current = len([r for r in p.replicas if r not in p.removing_replicas])
    if current != len(target):
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The replication factor is changed from {current} to {len(target)}",
        )


def start(current_replicas: Sequence[int], target: Sequence[int]) -> ReplicaSets:
    """The replica sets after asking for ``target`` (Kafka: PartitionReassignmentReplicas)."""
    removing = sorted(set(current_replicas) - set(target))
    adding = sorted(set(target) - set(current_replicas))
    return ReplicaSets([*target, *removing], adding, removing)


def revert(p: PartitionState) -> tuple[ReplicaSets, list[int], bool]:
    """(replica sets, ISR, unclean) after cancelling ``p``'s reassignment."""
    replicas = [r for r in p.replicas if r not in p.adding_replicas]
    isr = [r for r in p.isr if r not in p.adding_replicas]
    if not replicas:
        raise ControllerError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Invalid replica assignment: addingReplicas contains all replicas.",
        )
    unclean = not isr
    if unclean:
        isr = [replicas[0]]
    return ReplicaSets(replicas, [], []), isr, unclean


def complete(sets: ReplicaSets, isr: Sequence[int]) -> tuple[ReplicaSets, list[int]]:
    """Finish the reassignment when the ISR allows it; otherwise return the inputs."""
    if not sets.in_progress:
        return sets, list(isr)
    target_isr = [r for r in isr if r not in sets.removing]
    target = sets.target
    if not target_isr or not target or not set(target) <= set(target_isr):
        return sets, list(isr)
    return ReplicaSets(target, [], []), target_isr


def elect(
    p: PartitionState,
    replicas: Sequence[int],
    isr: Sequence[int],
    eligible: Callable[[int], bool],
    *,
    unclean: bool = False,
) -> tuple[int, list[int]]:
    """(leader, ISR) for the new replica list: Kafka's "online" election."""
    if p.leader in isr and eligible(p.leader):
        return p.leader, list(isr)
    for r in replicas:
        if r in isr and eligible(r):
            return r, list(isr)
    if unclean:
        for r in replicas:
            if eligible(r):
                return r, [r]
    return NO_LEADER, list(isr)


def apply(
    p: PartitionState, sets: ReplicaSets, leader: int, isr: Sequence[int]
) -> tuple[Change, bool]:
    """Move ``p`` to the new replica sets, leader and ISR, bumping epochs as Kafka does.

    Returns what changed for the counters, and whether anything changed at all.
    """
    old_isr, new_isr = set(p.isr), set(isr)
    replicas_changed = (
        list(sets.replicas) != p.replicas
        or sets.adding != p.adding_replicas
        or sets.removing != p.removing_replicas
    )
    dropped = bool(set(p.replicas) - set(sets.replicas))
    change = Change(
        leader_changed=leader != p.leader,
        elected=leader != p.leader and leader != NO_LEADER,
        isr_shrunk=bool(old_isr - new_isr),
        isr_expanded=bool(new_isr - old_isr),
    )
    if not (change.changed or replicas_changed):
        return change, False
    if change.leader_changed or dropped:
        p.leader_epoch += 1
    p.leader = leader
    p.replicas = list(sets.replicas)
    p.adding_replicas = list(sets.adding)
    p.removing_replicas = list(sets.removing)
    p.isr = list(isr)
    p.partition_epoch += 1
    return change, True
