"""Partition leader election and the epoch rules of a partition state change.

- A leader comes from the ISR, in replica order (the preferred replica first), and
  must be eligible (an ONLINE storage node).
- With no eligible ISR member the partition goes offline (leader -1) unless unclean
  election is enabled, in which case the first eligible replica leads and becomes
  the whole ISR (data it lacks is lost: that is what "unclean" means).
- Every change of leader bumps ``leader_epoch``; every change of leader or ISR bumps
  ``partition_epoch`` (it fences stale AlterPartition requests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.controller.cluster_state import NO_LEADER, PartitionState


def choose_leader(
    replicas: Sequence[int],
    isr: Sequence[int],
    eligible: Callable[[int], bool],
    *,
    unclean: bool = False,
    exclude: int | None = None,
) -> tuple[int, list[int]]:
    """(leader, isr) after an election; leader is -1 when nobody may lead."""
    for r in replicas:
        if r != exclude and r in isr and eligible(r):
            return r, list(isr)
    if unclean:
        for r in replicas:
            if r != exclude and eligible(r):
                return r, [r]
    return NO_LEADER, list(isr)


@dataclass(frozen=True, slots=True)
class Change:
    """What one state change did, for the controller's counters."""

    leader_changed: bool = False
    elected: bool = False  # a new leader that is not -1
    isr_shrunk: bool = False
    isr_expanded: bool = False

    @property
    def changed(self) -> bool:
        return self.leader_changed or self.isr_shrunk or self.isr_expanded


def apply_change(p: PartitionState, leader: int, isr: Sequence[int]) -> Change:
    """Move ``p`` to (leader, isr) in place, bumping epochs as the rules say."""
    old, new = set(p.isr), set(isr)
    change = Change(
        leader_changed=leader != p.leader,
        elected=leader != p.leader and leader != NO_LEADER,
        isr_shrunk=bool(old - new),
        isr_expanded=bool(new - old),
    )
    if not change.changed:
        return change
    if change.leader_changed:
        p.leader = leader
        p.leader_epoch += 1
    if old != new:
        p.isr = list(isr)
    p.partition_epoch += 1
    return change
