"""Transactional offset commits in the offset store's cache (KIP-98/447).

Offsets written by TxnOffsetCommit stay pending until the producer's marker lands in
``__consumer_offsets``: a COMMIT makes them committed, an ABORT drops them, and until
then reads do not see them and ``require_stable`` readers are told to retry. Replays go
through real record batches (a transactional batch and Kafka's control batches).
"""

from __future__ import annotations

from odradek.consumer_offsets.records import OffsetValue, encode_offset_key, encode_offset_value
from odradek.internal_topic.partition_log import TxnProducer, build_batch, build_txn_batch
from odradek.offsets.cache import ShardCache
from odradek.offsets.store import replayer
from odradek.records.control import ControlRecordType, build_end_txn_marker_batch
from odradek.records.record import decode_batches

DAY = 86_400_000


def offset(o: int, ts: int = 100) -> OffsetValue:
    return OffsetValue(offset=o, metadata="", commit_timestamp=ts, expire_timestamp=-1)


def commit_record(group: str, topic: str, partition: int, o: int) -> tuple[bytes, bytes]:
    return encode_offset_key(group, topic, partition), encode_offset_value(offset(o))


def marker(pid: int, commit: bool) -> bytes:
    return build_end_txn_marker_batch(
        control_type=ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
        coordinator_epoch=3,
        producer_id=pid,
        producer_epoch=0,
        timestamp=1,
    )


def replay(cache: ShardCache, *batches: bytes) -> None:
    apply = replayer(cache)
    for raw in batches:
        for batch in decode_batches(raw):
            for record in batch.records:
                apply(batch, record)


def test_pending_until_commit_marker() -> None:
    cache = ShardCache()
    cache.put_offset("g", "t", 0, offset(5))
    cache.put_pending(7, "g", "t", 0, offset(10))
    cache.put_pending(7, "g", "t", 1, offset(20))
    assert cache.get("g", "t", 0) == offset(5)  # reads see the stable offset only
    assert cache.get("g", "t", 1) is None
    assert cache.has_pending("g", "t", 0) and cache.has_pending("g", "t", 1)
    assert not cache.has_pending("g", "t", 2) and not cache.has_pending("other", "t", 0)
    assert cache.apply_marker(7, committed=True) == 2
    assert cache.get("g", "t", 0) == offset(10)
    assert cache.get("g", "t", 1) == offset(20)
    assert not cache.has_pending("g", "t", 0) and cache.pending_count() == 0


def test_abort_marker_drops_pending_offsets() -> None:
    cache = ShardCache()
    cache.put_offset("g", "t", 0, offset(5))
    cache.put_pending(7, "g", "t", 0, offset(10))
    assert cache.apply_marker(7, committed=False) == 1
    assert cache.get("g", "t", 0) == offset(5)
    assert not cache.has_pending("g", "t", 0)
    assert cache.apply_marker(7, committed=True) == 0  # a retried marker changes nothing
    assert cache.get("g", "t", 0) == offset(5)


def test_markers_settle_only_their_producer() -> None:
    cache = ShardCache()
    cache.put_pending(7, "g", "t", 0, offset(10))
    cache.put_pending(8, "g", "t", 0, offset(11))
    cache.apply_marker(8, committed=False)
    assert cache.has_pending("g", "t", 0)  # producer 7 still holds one
    cache.apply_marker(7, committed=True)
    assert cache.get("g", "t", 0) == offset(10)
    assert not cache.has_pending("g", "t", 0)


def test_a_later_plain_commit_wins_over_an_earlier_transactional_one() -> None:
    """Kafka keeps the most recent write when both kinds of commits are mixed."""
    cache = ShardCache()
    cache.put_pending(7, "g", "t", 0, offset(10))
    cache.put_offset("g", "t", 0, offset(99))  # written after the transactional one
    cache.apply_marker(7, committed=True)
    assert cache.get("g", "t", 0) == offset(99)
    cache.put_offset("g", "t", 1, offset(1))
    cache.put_pending(7, "g", "t", 1, offset(2))  # written after: wins at commit
    cache.apply_marker(7, committed=True)
    assert cache.get("g", "t", 1) == offset(2)


def test_pending_offsets_never_expire() -> None:
    cache = ShardCache()
    cache.put_offset("simple", "t", 0, offset(1, ts=0))
    cache.put_pending(7, "simple", "t", 0, offset(2, ts=0))
    assert cache.expired(now_ms=30 * DAY, retention_ms=DAY).offsets == []
    cache.apply_marker(7, committed=False)
    assert len(cache.expired(now_ms=30 * DAY, retention_ms=DAY).offsets) == 1


def test_replay_of_transactional_batches_and_markers() -> None:
    """A shard load sees the log as written: plain commits, a committed transaction, an
    aborted one, and one still open."""
    committed, aborted, open_ = (
        TxnProducer("a", 7, 0),
        TxnProducer("b", 8, 0),
        TxnProducer("c", 9, 0),
    )
    cache = ShardCache()
    replay(
        cache,
        build_batch([commit_record("g", "t", 0, 1)], 1),
        build_txn_batch([commit_record("g", "t", 0, 10)], 2, committed),
        build_txn_batch([commit_record("g", "t", 1, 30)], 2, aborted),
        build_txn_batch([commit_record("g", "t", 2, 40)], 2, open_),
        marker(7, commit=True),
        marker(8, commit=False),
    )
    assert cache.get("g", "t", 0) == offset(10)
    assert cache.get("g", "t", 1) is None  # aborted work leaves no offset behind
    assert cache.get("g", "t", 2) is None and cache.has_pending("g", "t", 2)
    assert cache.pending_count() == 1
