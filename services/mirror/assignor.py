"""How the mirror instances of one group split the partitions (sans-io).

The group's leader runs :func:`assign` on every member's subscription (the target
topics it mirrors and the partitions it owns, Kafka's ``ConsumerProtocolSubscription``
v2) and the partition counts of those topics. The rules are Kafka's incremental
cooperative rebalancing (KIP-429, ``CooperativeStickyAssignor``):

* balance: every member ends up with ``floor(P / N)`` or ``ceil(P / N)`` partitions of
  the ``P`` subscribed ones (members owning most get the larger quotas);
* stickiness: a member keeps the partitions it owns, up to its quota;
* no partition changes hands in one step: one an owner must give up is left out of
  every assignment of this generation. The owner sees it missing, stops copying it
  (and commits its position), and rejoins; the next generation hands it out as an
  unowned partition. So no two instances ever copy the same partition at once.

A partition claimed by two members (one missed a generation) stays with the claim of
the higher generation. A member only gets partitions of topics it subscribes to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Member:
    topics: frozenset[str]
    owned: frozenset[TopicPartition] = field(default_factory=frozenset)
    generation: int = -1


def assign(
    members: Mapping[str, Member], partition_counts: Mapping[str, int]
) -> dict[str, set[TopicPartition]]:
    """Each member id's partitions for the next generation (see the module docstring)."""
    subscribed = set().union(*(m.topics for m in members.values())) if members else set()
    every = {(t, p) for t in subscribed for p in range(partition_counts.get(t, 0))}
    # Current owners, the highest generation's claim first.
    owner: dict[TopicPartition, str] = {}
    for member_id in sorted(members, key=lambda m: (-members[m].generation, m)):
        member = members[member_id]
        for tp in sorted(member.owned):
            if tp in every and tp[0] in member.topics and tp not in owner:
                owner[tp] = member_id
    owned_by: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, member_id in owner.items():
        owned_by[member_id].append(tp)
    # Quotas: the members owning most get the ceil(P / N) ones (fewest moves).
    order = sorted(members, key=lambda m: (-len(owned_by[m]), m))
    base, extra = divmod(len(every), max(1, len(members)))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(order)}
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for member_id, tps in owned_by.items():
        out[member_id].update(sorted(tps)[: quota[member_id]])  # the rest: revoked first
    for tp in sorted(every - owner.keys()):
        eligible = [m for m in order if tp[0] in members[m].topics]
        under = [m for m in eligible if len(out[m]) < quota[m]]
        chosen = min(under or eligible, key=lambda m: (len(out[m]), order.index(m)))
        out[chosen].add(tp)
    return out


__all__ = ["Member", "TopicPartition", "assign"]
