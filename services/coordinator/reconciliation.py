"""Moving one member towards its target assignment (Kafka's ``CurrentAssignmentBuilder``).

Pure: a member's current state, its target and what other members still own in, the
member's next state out. The rule that keeps a partition from being consumed twice:
a member first gives up (revokes) what its target no longer holds, keeping its old
member epoch until it reports the revocation done; only then does it reach the
assignment epoch, and it receives a partition only once no other member owns it
(assigned or pending revocation). Until then it waits in UNRELEASED_PARTITIONS and
gets the partitions on a later heartbeat, as soon as they are released.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.coordinator.consumer_group import (
    Assignment,
    MemberState,
    intersect,
    minus,
    union,
)


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(
    current: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    owned_by_others: set[tuple[uuid.UUID, int]],
    reported: Assignment | None,
) -> MemberAssignment:
    """The member's next state. ``reported`` is what the member says it owns (the
    heartbeat's TopicPartitions; None when it did not say)."""
    state = current.state
    assigned = current.assigned
    pending = current.pending_revocation
    if state is MemberState.UNREVOKED_PARTITIONS:
        if reported is None or intersect(reported, pending):
            # Still revoking; give up more if the target moved on meanwhile.
            more = minus(assigned, target)
            if not more:
                return current
            return MemberAssignment(
                current.member_epoch,
                current.previous_member_epoch,
                state,
                intersect(assigned, target),
                union(pending, more),
            )
        pending = {}
    elif state is MemberState.STABLE and current.member_epoch == target_epoch:
        return current
    keep = intersect(assigned, target)
    revoke = minus(assigned, target)
    if revoke:
        return MemberAssignment(
            current.member_epoch,
            current.previous_member_epoch,
            MemberState.UNREVOKED_PARTITIONS,
            keep,
            union(pending, revoke),
        )
    wanted = minus(target, keep)
    free = {
        t: frozenset(p for p in ps if (t, p) not in owned_by_others) for t, ps in wanted.items()
    }
    free = {t: ps for t, ps in free.items() if ps}
    unreleased = minus(wanted, free)
    previous = (
        current.previous_member_epoch
        if current.member_epoch == target_epoch
        else current.member_epoch
    )
    return MemberAssignment(
        target_epoch,
        previous,
        MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        union(keep, free),
        {},
    )
