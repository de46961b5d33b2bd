"""Leader/follower state of one partition over a real on-disk log (no network).

Covers the replication rules the storage node applies per partition: the high
watermark is the minimum log end offset over the ISR (Kafka's
``Partition.maybeIncrementLeaderHW``) and never moves back,
acks=-1 bookkeeping, ISR shrink/expand conditions, epoch fencing, and the follower's
high watermark and truncation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.batches import producer_batch

from odradek.log.log import PartitionLog
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.rpc.v1 import common_pb2
from odradek.storage.partition import Partition, Role
from odradek.storage.replica_state import FollowerState
from odradek.topic_config import LogConfig

LAG_MS = 1000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def batch(
    n: int = 2, *, pid: int = -1, epoch: int = -1, seq: int = -1, ts: int = 1000
) -> bytearray:
    return producer_batch(
        ((ts + i, b"k%d" % i, b"v%d" % i) for i in range(n)),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def state(
    leader: int, epoch: int, isr: list[int], replicas: list[int] | None = None, pepoch: int = 0
) -> common_pb2.Partition:
    return common_pb2.Partition(
        partition=0,
        replicas=replicas or [1, 2, 3],
        isr=isr,
        leader=leader,
        leader_epoch=epoch,
        partition_epoch=pepoch,
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(
    tmp_path: Path,
    clock: Clock,
    node_id: int = 1,
    *,
    min_isr: int = 1,
    eligible: set[int] | None = None,
    name: str = "t-0",
) -> Partition:
    config = LogConfig(segment_bytes=1 << 20, min_insync_replicas=min_isr)
    log = PartitionLog.open(tmp_path / f"n{node_id}" / name, "t", 0, config)
    ok = eligible if eligible is not None else {1, 2, 3}
    return Partition(
        node_id,
        "t",
        0,
        b"\x01" * 16,
        log,
        config,
        replica_lag_time_max_ms=LAG_MS,
        clock_ms=clock,
        is_replica_eligible=lambda n: n in ok,
    )


def test_becoming_leader_stamps_the_epoch_at_the_log_end(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock)
    assert p.make_leader(state(1, 0, [1]))
    p.append_as_leader(batch(3), 1)
    assert p.make_leader(state(1, 4, [1], pepoch=1))
    assert p.log.leader_epoch_cache.entries() == [(0, 0), (4, 3)]
    assert p.leader_epoch_start_offset == 3
    # The same epoch again (e.g. an ISR-only change) is not a new leadership.
    assert not p.make_leader(state(1, 4, [1], pepoch=2))
    assert p.partition_epoch == 2


def test_high_watermark_is_the_minimum_over_the_isr(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1, 2, 3]))
    p.append_as_leader(batch(2), -1)  # offsets 0-1
    p.append_as_leader(batch(2), -1)  # offsets 2-3
    assert p.log_end_offset == 4 and p.high_watermark == 0
    p.update_follower_fetch_state(2, 4, 0, clock())
    assert p.high_watermark == 0  # follower 3 has nothing yet
    p.update_follower_fetch_state(3, 2, 0, clock())
    assert p.high_watermark == 2
    p.update_follower_fetch_state(3, 4, 0, clock())
    assert p.high_watermark == 4
    # A follower that reports less (it restarted empty) never moves the HW back.
    p.update_follower_fetch_state(2, 1, 0, clock())
    assert p.high_watermark == 4


def test_single_member_isr_commits_on_append(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1]))
    appended = p.append_as_leader(batch(3), 1)
    assert (appended.first_offset, appended.last_offset) == (0, 2)
    assert p.high_watermark == 3
    assert p.replication_status(3, 0) == (True, ErrorCode.NONE)


def test_acks_all_rules(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock, min_isr=2)
    p.make_leader(state(1, 0, [1, 2], replicas=[1, 2]))
    appended = p.append_as_leader(batch(2), -1)
    required = appended.last_offset + 1
    assert p.replication_status(required, 0) == (False, ErrorCode.NONE)
    p.update_follower_fetch_state(2, required, 0, clock())
    assert p.replication_status(required, 0) == (True, ErrorCode.NONE)

    # ISR shrinks to the leader alone: the HW moves, but min.insync.replicas is not met.
    p.append_as_leader(batch(1), 1)
    clock.now += LAG_MS + 1  # follower 2 stopped fetching long enough to be dropped
    p.pending_isr = (1,)
    assert p.adopt_isr(state(1, 0, [1], replicas=[1, 2], pepoch=1))
    assert p.replication_status(p.log_end_offset, 0) == (
        True,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    )

    # Before appending, acks=-1 is refused outright and nothing is written.
    leo = p.log_end_offset
    with pytest.raises(KafkaError) as err:
        p.append_as_leader(batch(1), -1)
    assert err.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == leo
    p.append_as_leader(batch(1), 1)  # acks=1 still works

    # Leadership moving away answers the waiting producer NOT_LEADER_OR_FOLLOWER.
    p.make_follower(state(2, 1, [2], pepoch=2))
    assert p.replication_status(required, 0) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_leadership_regained_in_a_new_epoch_does_not_complete_old_waits(
    tmp_path: Path, clock: Clock
) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1, 2]))
    appended = p.append_as_leader(batch(1), -1)
    p.make_follower(state(2, 1, [1, 2], pepoch=1))
    p.make_leader(state(1, 2, [1], pepoch=2))
    assert p.high_watermark >= appended.last_offset + 1
    assert p.replication_status(appended.last_offset + 1, 0) == (
        True,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    )


def test_caught_up_follower_outside_the_isr_holds_the_high_watermark(
    tmp_path: Path, clock: Clock
) -> None:
    p = make(tmp_path, clock, eligible={1, 2})
    p.make_leader(state(1, 0, [1], replicas=[1, 2, 3]))
    p.append_as_leader(batch(2), 1)
    assert p.high_watermark == 2
    # Follower 2 (eligible) fetches at the LEO: caught up. It is not in the ISR, but the
    # leader waits for it to join rather than outrun it (Kafka's shouldWaitForReplicaToJoinIsr).
    p.update_follower_fetch_state(2, 2, 0, clock())
    assert p.wants_isr_expansion(2)
    p.append_as_leader(batch(2), 1)
    assert p.high_watermark == 2
    p.update_follower_fetch_state(2, 4, 0, clock())
    assert p.high_watermark == 4
    # Follower 3 is not eligible (offline): it never holds the HW back.
    p.update_follower_fetch_state(3, 0, 0, clock())
    p.append_as_leader(batch(1), 1)
    p.update_follower_fetch_state(2, 5, 0, clock())
    assert p.high_watermark == 5
    assert not p.wants_isr_expansion(3)


def test_isr_expansion_needs_the_high_watermark_and_the_epoch_start(
    tmp_path: Path, clock: Clock
) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1]))
    p.append_as_leader(batch(4), 1)  # 0-3, HW 4
    p.make_leader(state(1, 1, [1], pepoch=1))  # epoch 1 starts at 4
    p.update_follower_fetch_state(2, 3, 0, clock())
    assert not p.wants_isr_expansion(2)
    p.update_follower_fetch_state(2, 4, 0, clock())
    assert p.wants_isr_expansion(2)
    p.pending_isr = (1, 2)
    assert not p.wants_isr_expansion(2)  # one change at a time
    assert p.maximal_isr == (1, 2)


def test_lagging_follower_is_out_of_sync_after_the_lag_time(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1, 2, 3]))
    p.append_as_leader(batch(2), 1)
    p.update_follower_fetch_state(2, 2, 0, clock())
    p.update_follower_fetch_state(3, 0, 0, clock())
    clock.now += LAG_MS
    assert p.out_of_sync_replicas(clock()) == []
    clock.now += 1
    assert p.out_of_sync_replicas(clock()) == [3]
    # A follower with no new data to fetch is in sync however long it is quiet.
    clock.now += 10 * LAG_MS
    assert p.out_of_sync_replicas(clock()) == [3]


def test_follower_keeping_pace_with_a_busy_leader_is_caught_up() -> None:
    f = FollowerState(2)
    # Each fetch reaches the LEO the leader had at the previous fetch, never the current one.
    leo = 10
    f.update_fetch_state(0, 0, leo, now_ms=0)
    for t in range(1, 50):
        f.update_fetch_state(leo, 0, leo + 5, now_ms=t * 100)
        leo += 5
    assert not f.is_out_of_sync(leo + 5, now_ms=50 * 100, max_lag_ms=500)
    assert f.last_caught_up_time_ms == 48 * 100


def test_current_leader_epoch_fencing(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 5, [1]))
    p.check_leader(5)
    p.check_leader(-1)
    with pytest.raises(KafkaError) as old:
        p.check_leader(4)
    assert old.value.code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(KafkaError) as new:
        p.check_leader(6)
    assert new.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    p.make_follower(state(2, 6, [1, 2], pepoch=1))
    with pytest.raises(KafkaError) as follower:
        p.check_leader(6)
    assert follower.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_follower_high_watermark_and_log_start(tmp_path: Path, clock: Clock) -> None:
    leader = make(tmp_path, clock, node_id=1)
    follower = make(tmp_path, clock, node_id=2)
    leader.make_leader(state(1, 0, [1]))
    follower.make_follower(state(1, 0, [1]))
    assert follower.role is Role.FOLLOWER
    for _ in range(3):
        leader.append_as_leader(batch(2), 1)
    follower.append_as_follower(leader.read(0, 1 << 20, max_offset=None, min_one_message=True))
    assert follower.log_end_offset == 6
    follower.update_follower_high_watermark(4)
    assert follower.high_watermark == 4
    follower.update_follower_high_watermark(100)
    assert follower.high_watermark == 6
    leader.delete_records_before(4)
    follower.follow_leader_log_start(leader.log_start_offset)
    assert follower.log_start_offset == 4


def test_truncation_at_the_log_end_drops_an_unused_epoch(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1]))
    p.append_as_leader(batch(2), 1)
    p.make_leader(state(1, 1, [1], pepoch=1))  # epoch 1 starts at 2, nothing written
    p.make_follower(state(2, 2, [1, 2], pepoch=2))
    assert p.latest_epoch == 1
    p.truncate_to(2)
    assert p.latest_epoch == 0 and p.log_end_offset == 2


def test_delete_records_is_bounded_by_the_high_watermark(tmp_path: Path, clock: Clock) -> None:
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1, 2], replicas=[1, 2]))
    p.append_as_leader(batch(4), 1)
    p.update_follower_fetch_state(2, 2, 0, clock())
    assert p.high_watermark == 2
    with pytest.raises(KafkaError) as err:
        p.delete_records_before(3)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert p.delete_records_before(-1) == 2
    assert p.low_watermark() == 0  # follower 2 still reports log start 0
    p.update_follower_fetch_state(2, 4, 2, clock())
    assert p.low_watermark() == 2
