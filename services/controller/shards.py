"""Sticky assignment of coordinator shards to coordinator nodes: ``__consumer_offsets``
shards to group coordinators, ``__transaction_state`` shards to transaction
coordinators (the same rules for both).

Goal: shard counts per online coordinator differ by at most one, and as few shards
as possible change owner. Shards whose owner is still online stay put unless that
owner holds more than its quota; the larger quotas go to the owners already holding
the most, so only the surplus and the orphans of departed owners move, each to the
least loaded coordinator. Every ownership change bumps the shard's ``epoch`` so a
coordinator that lost a shard is fenced by the new owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from odradek.controller.cluster_state import NO_LEADER, ShardState


def balance_shards(shards: Sequence[ShardState], coordinators: Iterable[int]) -> list[ShardState]:
    """The new assignment (new objects; unchanged shards keep their epoch)."""
    owners = sorted(set(coordinators))
    if not owners:
        return [
            ShardState(s.shard, NO_LEADER, s.epoch + (1 if s.coordinator_id != NO_LEADER else 0))
            for s in shards
        ]
    held: dict[int, list[int]] = {o: [] for o in owners}
    orphans: list[int] = []
    for s in sorted(shards, key=lambda s: s.shard):
        if s.coordinator_id in held:
            held[s.coordinator_id].append(s.shard)
        else:
            orphans.append(s.shard)
    base, extra = divmod(len(shards), len(owners))
    by_holdings = sorted(owners, key=lambda o: (-len(held[o]), o))
    quota = {o: base + (1 if i < extra else 0) for i, o in enumerate(by_holdings)}
    for o in owners:
        while len(held[o]) > quota[o]:
            orphans.append(held[o].pop())
    new_owner: dict[int, int] = {shard: o for o, mine in held.items() for shard in mine}
    for shard in sorted(orphans):
        target = min(
            (o for o in owners if len(held[o]) < quota[o]), key=lambda o: (len(held[o]), o)
        )
        held[target].append(shard)
        new_owner[shard] = target
    out = []
    for s in shards:
        owner = new_owner[s.shard]
        out.append(ShardState(s.shard, owner, s.epoch + (1 if owner != s.coordinator_id else 0)))
    return out
