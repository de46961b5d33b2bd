"""Planning replica moves: even out storage nodes, or drain one (pure).

:func:`plan` starts from the current replica lists and the bytes each partition holds,
and returns new replica lists for the partitions that must change, moving as few
replicas as this greedy finds:

1. **drain** — every replica on a broker that is not a target (a node being
   decommissioned, or one that left) moves, biggest partitions first, to the target
   with the least load (replicas and bytes, each relative to the mean) that does not
   hold the partition yet;
2. **replica counts** — while the fullest broker holds two or more replicas more than
   the emptiest, one moves between them: the one whose size best halves their byte
   difference;
3. **bytes** — while the heaviest and lightest brokers differ by more than
   ``byte_tolerance`` of the mean, they swap a bigger replica for a smaller one (counts
   stay even), the pair whose size difference is closest to half their gap;
4. **preferred leaders** — first replicas are spread by reordering replica lists, which
   moves no data (a reassignment that only reorders completes at once).

A moved replica takes the place of the one it replaces in the list, so the preferred
leader changes only when the leader's own replica moves. Deterministic: ties break on
broker id and partition name. ``max_moves`` bounds steps 2 and 3 (a swap is two moves).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]

BYTE_TOLERANCE = 0.10


@dataclass(frozen=True)
class PartitionLoad:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    size: int  # bytes, the largest of its replicas

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


class _State:
    """The assignment being built, with per-broker replica sets, counts and bytes."""

    def __init__(self, partitions: Sequence[PartitionLoad], brokers: Sequence[int]) -> None:
        self.brokers = sorted(brokers)
        self.assignment = {p.tp: list(p.replicas) for p in partitions}
        self.size = {p.tp: p.size for p in partitions}
        self.on: dict[int, set[TopicPartition]] = {b: set() for b in self.brokers}
        self.bytes = {b: 0 for b in self.brokers}
        for tp, replicas in self.assignment.items():
            for r in replicas:
                if r in self.on:
                    self.on[r].add(tp)
                    self.bytes[r] += self.size[tp]

    def count(self, b: int) -> int:
        return len(self.on[b])

    def move(self, tp: TopicPartition, src: int, dst: int) -> None:
        replicas = self.assignment[tp]
        replicas[replicas.index(src)] = dst
        if src in self.on:
            self.on[src].discard(tp)
            self.bytes[src] -= self.size[tp]
        self.on[dst].add(tp)
        self.bytes[dst] += self.size[tp]


def plan(
    partitions: Sequence[PartitionLoad],
    brokers: Sequence[int],
    *,
    max_moves: int | None = None,
    byte_tolerance: float = BYTE_TOLERANCE,
    leaders: str = "all",
) -> dict[TopicPartition, list[int]]:
    """New replica lists (only the partitions that change) over target ``brokers``.

    ``leaders``: reorder replica lists to spread preferred leaders over ``"all"``
    partitions, only the ``"moved"`` ones, or ``"none"``. A drain is
    ``plan(..., max_moves=0, leaders="moved")``: only the drained partitions change.
    """
    targets = sorted(set(brokers))
    if not targets:
        raise ValueError("no target brokers")
    for p in partitions:
        if len(set(p.replicas)) > len(targets):
            raise ValueError(
                f"{p.topic}-{p.partition} has {len(p.replicas)} replicas but only "
                f"{len(targets)} target broker(s)"
            )
    state = _State(partitions, targets)
    _drain(state)
    budget = max_moves if max_moves is not None else 10 * max(1, len(partitions))
    budget -= _even_counts(state, budget)
    _even_bytes(state, budget, byte_tolerance)
    original = {p.tp: list(p.replicas) for p in partitions}
    if leaders != "none":
        moved = {tp for tp, r in state.assignment.items() if r != original[tp]}
        _balance_leaders(state.assignment, targets, None if leaders == "all" else moved)
    return {tp: r for tp, r in sorted(state.assignment.items()) if r != original[tp]}


def _drain(state: _State) -> None:
    n = len(state.brokers)
    mean_count = max(1.0, sum(len(r) for r in state.assignment.values()) / n)
    mean_bytes = max(1.0, sum(state.size[tp] * len(r) for tp, r in state.assignment.items()) / n)
    # biggest partitions first, so the small ones even out what they leave
    for tp in sorted(state.assignment, key=lambda t: (-state.size[t], t)):
        for r in list(state.assignment[tp]):
            if r in state.on:
                continue
            replicas = state.assignment[tp]
            dst = min(
                (b for b in state.brokers if b not in replicas),
                key=lambda b: (state.count(b) / mean_count + state.bytes[b] / mean_bytes, b),
            )
            state.move(tp, r, dst)


def _even_counts(state: _State, budget: int) -> int:
    moves = 0
    while moves < budget:
        src = max(state.brokers, key=lambda b: (state.count(b), state.bytes[b], -b))
        dst = min(state.brokers, key=lambda b: (state.count(b), state.bytes[b], b))
        if state.count(src) - state.count(dst) < 2:
            break
        want = (state.bytes[src] - state.bytes[dst]) / 2
        candidates = [tp for tp in state.on[src] if tp not in state.on[dst]]
        if not candidates:
            break
        tp = min(candidates, key=lambda t: (abs(state.size[t] - want), t))
        state.move(tp, src, dst)
        moves += 1
    return moves


def _even_bytes(state: _State, budget: int, tolerance: float) -> None:
    total = sum(state.bytes.values())
    mean = total / len(state.brokers)
    moves = 0
    while moves + 2 <= budget and mean > 0:
        heavy = max(state.brokers, key=lambda b: (state.bytes[b], -b))
        light = min(state.brokers, key=lambda b: (state.bytes[b], b))
        gap = state.bytes[heavy] - state.bytes[light]
        if gap <= tolerance * mean:
            break
        swap = _best_swap(state, heavy, light, gap)
        if swap is None:
            break
        big, small = swap
        state.move(big, heavy, light)
        state.move(small, light, heavy)
        moves += 2


def _best_swap(
    state: _State, heavy: int, light: int, gap: int
) -> tuple[TopicPartition, TopicPartition] | None:
    """A replica on ``heavy`` and a smaller one on ``light`` whose size difference is
    closest to half the gap (any difference in (0, gap) narrows it)."""
    smalls = sorted((state.size[tp], tp) for tp in state.on[light] if tp not in state.on[heavy])
    if not smalls:
        return None
    sizes = [s for s, _tp in smalls]
    best: tuple[float, TopicPartition, TopicPartition] | None = None
    for tp in sorted(state.on[heavy]):
        if tp in state.on[light]:
            continue
        wanted = state.size[tp] - gap / 2
        i = bisect.bisect_left(sizes, wanted)
        for j in (i - 1, i):
            if 0 <= j < len(smalls):
                delta = state.size[tp] - smalls[j][0]
                if 0 < delta < gap:
                    miss = abs(delta - gap / 2)
                    if best is None or miss < best[0]:
                        best = (miss, tp, smalls[j][1])
    return None if best is None else (best[1], best[2])


def _balance_leaders(
    assignment: dict[TopicPartition, list[int]],
    brokers: Sequence[int],
    only: set[TopicPartition] | None,
) -> None:
    led = {b: 0 for b in brokers}
    for replicas in assignment.values():
        if replicas and replicas[0] in led:
            led[replicas[0]] += 1
    ceiling = math.ceil(len(assignment) / max(1, len(brokers)))
    for tp in sorted(assignment):
        if only is not None and tp not in only:
            continue
        replicas = assignment[tp]
        if len(replicas) < 2 or led.get(replicas[0], 0) <= ceiling:
            continue
        candidate = min(replicas[1:], key=lambda b: (led.get(b, ceiling), b))
        if led.get(candidate, ceiling) + 1 < led[replicas[0]]:
            led[replicas[0]] -= 1
            led[candidate] = led.get(candidate, 0) + 1
            replicas.remove(candidate)
            replicas.insert(0, candidate)


def spread(
    partitions: Sequence[PartitionLoad], assignment: Mapping[TopicPartition, Sequence[int]]
) -> dict[int, tuple[int, int, int]]:
    """Per broker: (replicas, bytes, preferred leaderships) under ``assignment``
    (partitions missing from it keep their current replicas)."""
    out: dict[int, list[int]] = {}
    for p in partitions:
        replicas = list(assignment.get(p.tp, p.replicas))
        for i, b in enumerate(replicas):
            row = out.setdefault(b, [0, 0, 0])
            row[0] += 1
            row[1] += p.size
            row[2] += int(i == 0)
    return {b: (r[0], r[1], r[2]) for b, r in sorted(out.items())}
