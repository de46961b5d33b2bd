"""KIP-848 server-side assignors, ``uniform`` and ``range`` (``group.consumer.assignors``).

Pure functions: members' subscriptions and the subscribed topics' partition counts
in, a target assignment (member -> topic id -> partitions) out. Both are deterministic
(members and topics are taken in sorted order), so a coordinator that rebuilds a
group computes what its predecessor would have.

- ``uniform`` (Kafka's ``UniformAssignor``): sticky and balanced. Partitions keep
  their previous owner while that member still subscribes to the topic; the rest go
  to the least-loaded subscribed member; then partitions move from members that have
  two or more than some other eligible member until no such move exists. With
  identical subscriptions every member ends with ``P // N`` or ``P // N + 1``.
- ``range`` (Kafka's ``RangeAssignor``): per topic, its subscribers sorted by member
  id get contiguous ranges, the first ``P % N`` one partition more; members that
  subscribe to the same topics get the same partition numbers of each topic
  (co-partitioning).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[uuid.UUID, int]
TargetAssignment = dict[str, dict[uuid.UUID, frozenset[int]]]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """What an assignor sees: each member's subscribed topic ids, each topic's
    partition count, and the current target (for stickiness)."""

    subscriptions: Mapping[str, frozenset[uuid.UUID]]
    partitions: Mapping[uuid.UUID, int]
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]


def _freeze(owned: dict[str, set[TopicPartition]], members: list[str]) -> TargetAssignment:
    out: TargetAssignment = {}
    for member in members:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic, partition in owned[member]:
            by_topic.setdefault(topic, set()).add(partition)
        out[member] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform(spec: AssignmentSpec) -> TargetAssignment:
    members = sorted(spec.subscriptions)
    topics = sorted(t for t in spec.partitions if any(t in s for s in spec.subscriptions.values()))
    all_partitions = [(t, p) for t in topics for p in range(spec.partitions[t])]
    eligible: dict[uuid.UUID, list[str]] = {
        t: [m for m in members if t in spec.subscriptions[m]] for t in topics
    }
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner: dict[TopicPartition, str] = {}
    # Stickiness: keep what each member already had, if it may still have it.
    for member in members:
        for topic, partitions in spec.current.get(member, {}).items():
            if topic not in spec.subscriptions[member] or topic not in spec.partitions:
                continue
            for p in partitions:
                tp = (topic, p)
                if p < spec.partitions[topic] and tp not in owner:
                    owned[member].add(tp)
                    owner[tp] = member
    # Unowned partitions go to the least-loaded eligible member.
    for tp in all_partitions:
        if tp in owner:
            continue
        candidates = eligible[tp[0]]
        best = min(candidates, key=lambda m: (len(owned[m]), m))
        owned[best].add(tp)
        owner[tp] = best
    # Balance: move a partition from a member to an eligible one with two fewer.
    moved = True
    while moved:
        moved = False
        for member in sorted(members, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[member], key=lambda x: (x[0].bytes, x[1]), reverse=True):
                target = min(eligible[tp[0]], key=lambda m: (len(owned[m]), m))
                if len(owned[target]) + 1 < len(owned[member]):
                    owned[member].discard(tp)
                    owned[target].add(tp)
                    owner[tp] = target
                    moved = True
            if moved:
                break
    return _freeze(owned, members)


def range_(spec: AssignmentSpec) -> TargetAssignment:
    members = sorted(spec.subscriptions)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    for topic in sorted(spec.partitions, key=lambda t: t.bytes):
        subscribers = [m for m in members if topic in spec.subscriptions[m]]
        if not subscribers:
            continue
        count = spec.partitions[topic]
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            owned[member].update((topic, p) for p in range(start, start + size))
            start += size
    return _freeze(owned, members)


ASSIGNORS: dict[str, Callable[[AssignmentSpec], TargetAssignment]] = {
    "uniform": uniform,
    "range": range_,
}
