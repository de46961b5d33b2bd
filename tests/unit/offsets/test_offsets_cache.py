"""The offset store's per-shard cache: replaying __consumer_offsets and expiry."""

from __future__ import annotations

from odradek.consumer_offsets import consumer_group_records as cg
from odradek.consumer_offsets.records import (
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from odradek.internal_topic.partition_log import build_batch
from odradek.offsets.append_errors import map_append_error
from odradek.offsets.cache import ShardCache
from odradek.protocol.consumer_protocol import encode_subscription
from odradek.protocol.errors import ErrorCode as E
from odradek.records.record import decode_batches

DAY = 86_400_000
RETENTION = 7 * DAY


def offset(o: int, ts: int, expire: int = -1) -> OffsetValue:
    return OffsetValue(offset=o, metadata="", commit_timestamp=ts, expire_timestamp=expire)


def test_replay_through_a_real_record_batch() -> None:
    records = [
        (encode_offset_key("g", "t", 0), encode_offset_value(offset(5, 100))),
        (encode_offset_key("g", "t", 1), encode_offset_value(offset(6, 100))),
        (encode_offset_key("g", "t", 0), encode_offset_value(offset(9, 200))),  # newer wins
        (encode_offset_key("g", "t", 1), None),  # tombstone
        (encode_group_key("g"), encode_group_value(GroupValue("consumer", 3, "range", "m", 5, []))),
        (
            encode_group_key("gone"),
            encode_group_value(GroupValue("consumer", 1, None, None, 1, [])),
        ),
        (encode_group_key("gone"), None),
        # KIP-848 records: kept raw, latest per key.
        (cg.encode_key(cg.ConsumerGroupKey(3, "cg")), cg.encode_value(3, 1)),
        (cg.encode_key(cg.ConsumerGroupKey(3, "cg")), cg.encode_value(3, 2)),
        (cg.encode_key(cg.ConsumerGroupKey(8, "cg", "m")), None),
    ]
    batch = build_batch(records, 1234)
    cache = ShardCache()
    for b in decode_batches(batch):
        for r in b.records:
            cache.apply_record(r.key, r.value)
    assert cache.get("g", "t", 0) == offset(9, 200)
    assert cache.get("g", "t", 1) is None
    assert set(cache.groups) == {"g"} and cache.groups["g"].generation == 3
    assert cache.offset_only_groups() == []
    assert cache.consumer_records == {
        "cg": {cg.encode_key(cg.ConsumerGroupKey(3, "cg")): cg.encode_value(3, 2)}
    }
    cache.put_offset("cg", "t", 0, offset(1, 1))
    assert cache.offset_only_groups() == []
    cache.remove_offset("cg", "t", 0)
    cache.put_offset("simple", "t", 0, offset(1, 1))
    assert cache.offset_only_groups() == ["simple"]
    assert cache.count() == 2
    assert sorted(cache.delete_group("g")) == [OffsetKey("g", "t", 0)]
    assert cache.group_ids() == {"simple", "cg"}


def test_expiry_of_simple_groups_by_commit_time() -> None:
    cache = ShardCache()
    cache.put_offset("simple", "t", 0, offset(1, 0))
    cache.put_offset("simple", "t", 1, offset(1, 2 * DAY))
    gone = cache.expired(RETENTION + DAY, RETENTION)
    assert gone.offsets == [OffsetKey("simple", "t", 0)] and gone.groups == []


def test_expiry_of_empty_groups_counts_from_when_they_became_empty() -> None:
    cache = ShardCache()
    cache.put_group("g", GroupValue("consumer", 4, None, None, 10 * DAY, []))
    cache.put_offset("g", "t", 0, offset(1, 0))  # committed long before the group emptied
    assert cache.expired(10 * DAY + RETENTION - 1, RETENTION).offsets == []
    gone = cache.expired(10 * DAY + RETENTION, RETENTION)
    assert gone.offsets == [OffsetKey("g", "t", 0)]
    assert gone.groups == ["g"]  # an Empty group left without offsets goes too


def test_explicit_expire_timestamp_wins() -> None:
    cache = ShardCache()
    cache.put_offset("simple", "t", 0, offset(1, 0, expire=500))
    assert cache.expired(499, RETENTION).offsets == []
    assert cache.expired(500, RETENTION).offsets == [OffsetKey("simple", "t", 0)]


def test_active_consumer_groups_keep_subscribed_topics_only() -> None:
    cache = ShardCache()
    member = MemberValue("m1", subscription=encode_subscription(["kept"]), session_timeout=10)
    cache.put_group("g", GroupValue("consumer", 2, "range", "m1", 0, [member]))
    cache.put_offset("g", "kept", 0, offset(1, 0))
    cache.put_offset("g", "dropped", 0, offset(1, 0))
    gone = cache.expired(RETENTION, RETENTION)
    assert gone.offsets == [OffsetKey("g", "dropped", 0)] and gone.groups == []
    # Groups of other protocols with members never expire offsets.
    cache.put_group("g", GroupValue("connect", 2, "x", "m1", 0, [member]))
    assert cache.expired(100 * DAY, RETENTION).offsets == []


def test_append_errors_map_to_group_errors() -> None:
    assert map_append_error(E.NOT_LEADER_OR_FOLLOWER) == E.NOT_COORDINATOR
    assert map_append_error(E.NOT_ENOUGH_REPLICAS) == E.COORDINATOR_NOT_AVAILABLE
    assert map_append_error(E.REQUEST_TIMED_OUT) == E.COORDINATOR_NOT_AVAILABLE
    assert map_append_error(E.REQUEST_TIMED_OUT, for_group=True) == E.REBALANCE_IN_PROGRESS
    assert map_append_error(E.MESSAGE_TOO_LARGE) == E.INVALID_COMMIT_OFFSET_SIZE
    assert map_append_error(E.MESSAGE_TOO_LARGE, for_group=True) == E.UNKNOWN_SERVER_ERROR
