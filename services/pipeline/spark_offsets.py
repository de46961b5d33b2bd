"""Partition offsets as Spark's Kafka source writes them, and offset-range planning.

The stream offset is Spark's JSON layout, ``{"topic": {"0": 23, "1": 45}}``, built
with topics and partitions in sorted order: Spark compares offsets by their JSON
text, so the same offsets must always serialise the same way. In user-given JSON
(``startingOffsets``/``endingOffsets``) ``-2`` means earliest and ``-1`` latest.

Pure code: no Kafka client, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset JSON object, sorted so equal offsets give equal text."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_json(doc: Mapping[str, Any] | None) -> PartitionOffsets:
    """Parse Spark's offset JSON (already decoded) into ``{(topic, partition): offset}``."""
    if not doc:
        return {}
    out: PartitionOffsets = {}
    for topic, parts in doc.items():
        if not isinstance(parts, Mapping):
            raise ValueError(f"expected {{partition: offset}} for topic {topic!r}, got {parts!r}")
        for partition, offset in parts.items():
            try:
                out[(str(topic), int(partition))] = int(offset)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"bad offset {offset!r} for partition {partition!r} of topic {topic!r}"
                ) from exc
    return out


def describe(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition: end exclusive, like Spark's."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """One range per partition with data in ``[start, end)``, split so that there are at
    least ``min_partitions`` ranges and none holds more than ``max_records_per_partition``
    offsets (Spark's ``minPartitions`` and ``maxRecordsPerPartition``).

    Partitions missing from ``start`` or with ``end <= start`` are left out; the caller
    decides what a backwards range means (data loss) before planning.
    """
    ranges = [
        OffsetRange(tp[0], tp[1], start[tp], end[tp])
        for tp in sorted(end)
        if tp in start and end[tp] > start[tp]
    ]
    if max_records_per_partition is not None and max_records_per_partition > 0:
        ranges = [
            piece for r in ranges for piece in _split(r, -(-r.size // max_records_per_partition))
        ]
    if min_partitions is not None and len(ranges) < min_partitions and ranges:
        # A range's share of min_partitions follows its share of the data, as in Spark;
        # largest remainders (not Spark's rounding) make the total at least min_partitions.
        total = sum(r.size for r in ranges)
        shares = [min_partitions * r.size // total for r in ranges]
        left = min_partitions - sum(shares)
        order = sorted(
            range(len(ranges)), key=lambda i: (-(min_partitions * ranges[i].size % total), i)
        )
        for i in order[:left]:
            shares[i] += 1
        ranges = [piece for r, n in zip(ranges, shares, strict=True) for piece in _split(r, n)]
    return ranges


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    if parts == 1:
        return [r]
    step, extra = divmod(r.size, parts)
    out = []
    pos = r.start
    for i in range(parts):
        nxt = pos + step + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, pos, nxt))
        pos = nxt
    return out


def rate_limit(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_records: int,
) -> PartitionOffsets:
    """End offsets that admit at most ``max_records`` records past ``start``, shared
    among partitions in proportion to their lag (Spark's ``maxOffsetsPerTrigger``).
    Every partition of ``latest`` must be in ``start``.

    Unlike Spark, which rounds each share up and can overshoot, the shares here sum
    to exactly ``min(max_records, total lag)``: floors first, then the remainder one
    record at a time to the largest leftover lags (ties by partition order), so the
    result is deterministic and never exceeds ``latest``.
    """
    lag = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(lag.values())
    end = {tp: start[tp] for tp in latest}
    if total == 0:
        return end
    budget = min(max(0, max_records), total)
    shares = {tp: budget * n // total for tp, n in lag.items()}
    left = budget - sum(shares.values())
    order = sorted(
        (tp for tp in lag if lag[tp] > shares[tp]),
        key=lambda tp: (-(budget * lag[tp] % total), tp),
    )
    for tp in order[:left]:
        shares[tp] += 1
    for tp, n in shares.items():
        end[tp] += n
    return end


def bounded_by(
    offsets: Mapping[TopicPartition, int], bound: Mapping[TopicPartition, int]
) -> PartitionOffsets:
    """``offsets`` capped by ``bound`` where ``bound`` names the partition."""
    return {tp: min(o, bound[tp]) if tp in bound else o for tp, o in offsets.items()}


def partitions_of(offsets: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(set(offsets))
