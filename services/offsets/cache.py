"""The in-memory state of one ``__consumer_offsets`` partition: what compaction would
keep, i.e. the latest committed offset per (group, topic, partition) and the latest
metadata per group. Pure code: it is filled by replaying the partition's records
(:meth:`ShardCache.apply_record`) and then kept current by the offset store after each
durable write, so reads never touch the log.

Expiry follows Kafka (KIP-211, ``offsets.retention.minutes``): offsets of an Empty
group expire ``retention`` after the group became empty; offsets of a group that
never used group management (no metadata) expire ``retention`` after their commit;
offsets of a consumer group's topics that no member subscribes to any more expire
``retention`` after their commit; an explicit expire timestamp (OffsetCommit v2-v4
``retention_time_ms``) wins. An Empty group left without offsets is deleted too.
A KIP-848 consumer group (its records are kept raw, latest per key) keeps its offsets
while it has members; once empty they expire ``retention`` after their commit.

Transactional offset commits (TxnOffsetCommit, KIP-98/447) are kept apart, per
producer id, as **pending** until that producer's transaction marker arrives (Kafka's
``OffsetMetadataManager.pendingTransactionalOffsets``): invisible to reads, which may
ask whether a partition has one (OffsetFetch ``require_stable``: UNSTABLE_OFFSET_COMMIT).
A COMMIT marker makes them committed, except where a commit written later in the log
already stands (the most recent write wins, as in Kafka: every entry carries the
position at which it was applied, and the cache is applied in log order); an ABORT
marker drops them. Pending offsets never expire.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from odradek.consumer_offsets import consumer_group_records
from odradek.consumer_offsets.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    OtherKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from odradek.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription

TopicPartitionKey = tuple[str, int]


@dataclass(slots=True)
class Expired:
    offsets: list[OffsetKey]
    groups: list[str]  # group metadata to tombstone


class ShardCache:
    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartitionKey, OffsetValue]] = {}
        self.groups: dict[str, GroupValue] = {}
        # KIP-848 consumer groups: group -> raw key -> raw value, latest per key; the
        # coordinator encodes and decodes them, we only keep what compaction would.
        self.consumer_records: dict[str, dict[bytes, bytes]] = {}
        # producer id -> (group, topic, partition) -> (value, position)
        self.pending: dict[int, dict[OffsetKey, tuple[OffsetValue, int]]] = {}
        # (group, topic, partition) -> producer ids with a pending commit there
        self._open: dict[OffsetKey, set[int]] = {}
        # the position at which each committed offset was applied (log order)
        self._positions: dict[OffsetKey, int] = {}
        self._position = 0

    def _next_position(self) -> int:
        self._position += 1
        return self._position

    # -- replay and updates -----------------------------------------------------------------
    def apply_record(self, key: bytes | None, value: bytes | None, producer_id: int = -1) -> None:
        """Replay one record of the partition (a null value is a tombstone); with
        ``producer_id``, a record of that producer's transactional batch."""
        if key is None:
            return
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            if value is None:
                self.remove_offset(k.group, k.topic, k.partition)
            elif producer_id >= 0:
                self.put_pending(
                    producer_id, k.group, k.topic, k.partition, decode_offset_value(value)
                )
            else:
                self.put_offset(k.group, k.topic, k.partition, decode_offset_value(value))
        elif isinstance(k, GroupKey):
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = decode_group_value(value)
        elif (
            isinstance(k, OtherKey)
            and k.version in consumer_group_records.CONSUMER_GROUP_RECORD_TYPES
        ):
            self.put_record(key, value)

    def put_record(self, key: bytes, value: bytes | None) -> None:
        """A consumer group record (key types 3-8); a None value is a tombstone."""
        group = consumer_group_records.decode_key(key).group
        records = self.consumer_records.setdefault(group, {})
        if value is None:
            records.pop(bytes(key), None)
        else:
            records[bytes(key)] = bytes(value)
        if not records:
            del self.consumer_records[group]

    def put_offset(self, group: str, topic: str, partition: int, value: OffsetValue) -> None:
        self.offsets.setdefault(group, {})[(topic, partition)] = value
        self._positions[OffsetKey(group, topic, partition)] = self._next_position()

    def put_pending(
        self, producer_id: int, group: str, topic: str, partition: int, value: OffsetValue
    ) -> None:
        """A transactional commit of ``producer_id``, pending until its marker."""
        key = OffsetKey(group, topic, partition)
        self.pending.setdefault(producer_id, {})[key] = (value, self._next_position())
        self._open.setdefault(key, set()).add(producer_id)

    def apply_marker(self, producer_id: int, committed: bool) -> int:
        """The end of ``producer_id``'s transaction: its pending commits become committed
        (COMMIT) or vanish (ABORT). Returns how many were pending."""
        pending = self.pending.pop(producer_id, {})
        for key, (value, position) in pending.items():
            producers = self._open.get(key)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self._open[key]
            if not committed:
                continue
            current = self._positions.get(key)
            if current is None or position > current:
                self.offsets.setdefault(key.group, {})[(key.topic, key.partition)] = value
                self._positions[key] = position
        return len(pending)

    def remove_offset(self, group: str, topic: str, partition: int) -> None:
        committed = self.offsets.get(group)
        if committed is not None:
            committed.pop((topic, partition), None)
            if not committed:
                del self.offsets[group]
        self._positions.pop(OffsetKey(group, topic, partition), None)

    def put_group(self, group: str, value: GroupValue | None) -> None:
        if value is None:
            self.groups.pop(group, None)
        else:
            self.groups[group] = value

    def delete_group(self, group: str) -> list[OffsetKey]:
        """Forget a group; returns the offset keys that need tombstones."""
        committed = self.offsets.pop(group, {})
        self.groups.pop(group, None)
        for t, p in committed:
            self._positions.pop(OffsetKey(group, t, p), None)
        return [OffsetKey(group, t, p) for (t, p) in committed]

    # -- reads ------------------------------------------------------------------------------
    def committed(self, group: str) -> dict[TopicPartitionKey, OffsetValue]:
        return self.offsets.get(group, {})

    def get(self, group: str, topic: str, partition: int) -> OffsetValue | None:
        return self.offsets.get(group, {}).get((topic, partition))

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds a commit for the partition."""
        return OffsetKey(group, topic, partition) in self._open

    def pending_count(self) -> int:
        return sum(len(p) for p in self.pending.values())

    def group_ids(self) -> set[str]:
        return set(self.offsets) | set(self.groups) | set(self.consumer_records)

    def offset_only_groups(self) -> list[str]:
        return sorted(
            g for g in self.offsets if g not in self.groups and g not in self.consumer_records
        )

    def count(self) -> int:
        return sum(len(c) for c in self.offsets.values())

    def all_offsets(self) -> Iterator[tuple[str, str, int, OffsetValue]]:
        for group, committed in self.offsets.items():
            for (topic, partition), value in committed.items():
                yield group, topic, partition, value

    # -- retention --------------------------------------------------------------------------
    def expired(self, now_ms: int, retention_ms: int) -> Expired:
        out = Expired([], [])
        for group in list(self.group_ids()):
            if self._has_consumer_members(group):
                continue  # a consumer group with members keeps its offsets
            committed = self.offsets.get(group, {})
            meta = self.groups.get(group)
            gone = [
                OffsetKey(group, t, p)
                for (t, p), v in committed.items()
                if self._expires(meta, t, v, now_ms, retention_ms)
                and not self.has_pending(group, t, p)
            ]
            out.offsets.extend(gone)
            if meta is not None and not meta.members and len(gone) == len(committed):
                out.groups.append(group)
        return out

    def _has_consumer_members(self, group: str) -> bool:
        member_type = consumer_group_records.CONSUMER_GROUP_MEMBER_METADATA
        return any(
            int.from_bytes(k[:2], "big") == member_type
            for k in self.consumer_records.get(group, {})
        )

    @staticmethod
    def _expires(
        meta: GroupValue | None, topic: str, value: OffsetValue, now_ms: int, retention_ms: int
    ) -> bool:
        if value.expire_timestamp >= 0:
            base_expired = now_ms >= value.expire_timestamp
        else:
            base_expired = None
        if meta is None:  # a group that never used group management
            return (
                base_expired
                if base_expired is not None
                else (now_ms - value.commit_timestamp >= retention_ms)
            )
        if not meta.members:  # Empty: retention counts from when it became empty
            if base_expired is not None:
                return base_expired
            base = (
                meta.current_state_timestamp
                if meta.current_state_timestamp >= 0
                else value.commit_timestamp
            )
            return now_ms - base >= retention_ms
        if meta.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        subscribed = _subscribed_topics(meta)
        if subscribed is None or topic in subscribed:
            return False
        if base_expired is not None:
            return base_expired
        return now_ms - value.commit_timestamp >= retention_ms


def _subscribed_topics(meta: GroupValue) -> set[str] | None:
    topics: set[str] = set()
    for m in meta.members:
        try:
            topics.update(decode_subscription(m.subscription).topics)
        except Exception:
            return None
    return topics


def replay(cache: ShardCache, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
    for key, value in records:
        cache.apply_record(key, value)
