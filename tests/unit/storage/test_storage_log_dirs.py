"""Several log directories on one node: placement, AlterReplicaLogDirs moves (future logs
copied, swapped in, resumed after a restart), DescribeLogDirs, failed directories, and
the replication throttle's bound."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

import pytest
from helpers.batches import producer_batch

from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import common_pb2, storage_pb2
from odradek.storage.log_dir_mover import LogDirMover
from odradek.storage.log_dirs import LogDirsHandler
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.replication_quota import (
    ReplicationQuota,
    is_throttled,
    throttled_partitions,
)

ME = 1
TOPIC_ID = uuid.uuid4().bytes
BROKER = {"log.segment.bytes": "4096", "log.segment.delete.delay.ms": "0"}


def batch(n: int = 5, size: int = 100, epoch_ts: int = 1000) -> bytearray:
    return producer_batch((epoch_ts + i, None, bytes(size)) for i in range(n))


def snapshot(version: int, partitions: int = 4, *, leader: int = ME) -> Snapshot:
    raw = common_pb2.ClusterMetadata(version=version, cluster_id="c")
    raw.nodes.append(
        common_pb2.Node(node_id=ME, kind=common_pb2.STORAGE, host="h", state=common_pb2.ONLINE)
    )
    t = raw.topics.add(name="t", topic_id=TOPIC_ID)
    for i in range(partitions):
        t.partitions.add(partition=i, replicas=[ME], isr=[ME], leader=leader, leader_epoch=version)
    return Snapshot.build(raw)


class Node:
    """A ReplicaManager over a real LogManager with two directories, and the log-dir parts."""

    def __init__(self, root: Path) -> None:
        self.dirs = [root / "d1", root / "d2"]
        self.logs = LogManager(self.dirs, ME, "c", BROKER)
        self.replicas = ReplicaManager(ME, self.logs, BROKER, replica_lag_time_max_ms=30_000)
        self.mover = LogDirMover(self.logs, ReplicationQuota(), chunk_bytes=1000)
        self.replicas.on_partition_opened = self.mover.resume
        self.replicas.on_partition_removed = self.mover.cancel
        self.handler = LogDirsHandler(self.replicas, self.logs, self.mover)

    def part(self, index: int) -> Partition:
        p = self.replicas.get("t", index)
        assert p is not None
        return p

    def alter(self, index: int, path: Path | str) -> int:
        move = storage_pb2.ReplicaLogDirMove(topic="t", partition=index, path=str(path))
        return (
            self.handler.alter(storage_pb2.AlterReplicaLogDirsRequest(moves=[move]))
            .results[0]
            .error_code
        )

    def describe(self) -> dict[str, storage_pb2.LogDirDescription]:
        response = self.handler.describe(storage_pb2.DescribeLogDirsRequest(all_partitions=True))
        return {d.path: d for d in response.dirs}

    def copy_all(self) -> None:
        for _ in range(10_000):
            if not self.mover.moves:
                return
            for move in list(self.mover.moves.values()):
                self.mover.step(move)
        raise AssertionError("the move never finished")


def test_new_logs_spread_over_directories_and_describe_shows_them(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.replicas.apply(snapshot(1))
    per_dir = {str(d): len(node.describe()[str(d.resolve())].replicas) for d in node.dirs}
    assert sorted(per_dir.values()) == [2, 2]
    node.part(0).append_as_leader(batch(), -1)
    d0 = node.describe()[str(node.logs.dir_of("t", 0))]
    sizes = {(r.topic, r.partition): r.size_bytes for r in d0.replicas}
    assert sizes[("t", 0)] == node.part(0).size_bytes > 0
    assert d0.total_bytes > 0 and 0 <= d0.usable_bytes <= d0.total_bytes
    node.logs.shutdown()


def test_move_copies_then_swaps_and_keeps_every_record(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.replicas.apply(snapshot(1, partitions=1))
    p = node.part(0)
    for _ in range(30):
        p.append_as_leader(batch(), -1)
    p.log.high_watermark = p.log_end_offset
    p.delete_records_before(10)
    before = p.read(10, 1 << 30, max_offset=None, min_one_message=True)
    source = node.logs.dir_of("t", 0)
    target = next(d for d in node.logs.log_dirs if d != source)

    assert node.alter(0, target) == ErrorCode.NONE
    future = {r.partition: r for r in node.describe()[str(target)].replicas if r.is_future}
    assert future[0].offset_lag == p.log_end_offset  # nothing copied yet
    node.mover.step(next(iter(node.mover.moves.values())))
    p.append_as_leader(batch(), -1)  # appends continue during the move
    node.copy_all()

    assert node.logs.dir_of("t", 0) == target and node.logs.future_log("t", 0) is None
    assert p.log.dir.parent == target
    assert p.log_start_offset == 10
    after = p.read(10, 1 << 30, max_offset=None, min_one_message=True)
    assert after.startswith(before) and len(after) > len(before)
    assert [e.epoch for e in p.log.leader_epoch_cache.entries()] == [1]
    assert not any(source.glob("t-0")), "the old copy is renamed for deletion"
    node.logs.purge_deleted_logs()
    assert not [x for x in source.iterdir() if x.name.startswith("t-0")]
    node.logs.shutdown()


def test_move_resumes_after_a_restart_and_a_half_swap_is_finished(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.replicas.apply(snapshot(1, partitions=2))
    for i in (0, 1):
        for _ in range(20):
            node.part(i).append_as_leader(batch(), -1)
    targets = {
        i: next(d for d in node.logs.log_dirs if d != node.logs.dir_of("t", i)) for i in (0, 1)
    }
    assert node.alter(0, targets[0]) == ErrorCode.NONE
    node.mover.step(node.mover.moves[("t", 0)])  # t-0: part-way when the node stops
    # t-1: a caught-up future log whose swap was cut short after the first rename
    current = node.part(1).log
    future = node.logs.create_future_log("t", 1, targets[1])
    future.append_as_follower(current.read(0, 1 << 30).records)
    expected = {
        i: node.part(i).read(0, 1 << 30, max_offset=None, min_one_message=True) for i in (0, 1)
    }
    node.logs.shutdown()
    current.dir.rename(current.dir.with_name(current.dir.name + ".0-delete"))

    again = Node(tmp_path)
    assert again.logs.dir_of("t", 1) == targets[1]  # promoted at load
    again.replicas.apply(snapshot(2, partitions=2))
    assert again.logs.future_log("t", 0) is not None and ("t", 0) in again.mover.moves
    again.copy_all()
    assert again.logs.dir_of("t", 0) == targets[0]
    for i in (0, 1):
        got = again.part(i).read(0, 1 << 30, max_offset=None, min_one_message=True)
        assert got == expected[i]
    again.logs.shutdown()


def test_alter_errors_and_cancel(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.replicas.apply(snapshot(1, partitions=1))
    assert node.alter(0, tmp_path / "elsewhere") == ErrorCode.LOG_DIR_NOT_FOUND
    assert node.alter(7, node.logs.log_dirs[0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    source = node.logs.dir_of("t", 0)
    target = next(d for d in node.logs.log_dirs if d != source)
    assert node.alter(0, target) == ErrorCode.NONE
    assert node.alter(0, source) == ErrorCode.NONE  # back where it is: the move is cancelled
    assert node.logs.future_log("t", 0) is None and not node.mover.moves
    node.logs.shutdown()


def test_preferred_dir_for_a_replica_not_here_yet(tmp_path: Path) -> None:
    node = Node(tmp_path)
    raw = snapshot(1, partitions=1).raw
    raw.topics[0].partitions[0].replicas[:] = [2]
    raw.topics[0].partitions[0].leader = 2
    node.replicas.apply(Snapshot.build(raw))
    d2 = node.logs.log_dirs[1]
    assert node.alter(0, d2) == ErrorCode.REPLICA_NOT_AVAILABLE
    node.replicas.apply(snapshot(2, partitions=1))  # now assigned here
    assert node.logs.dir_of("t", 0) == d2
    node.logs.shutdown()


def test_failed_directory_takes_only_its_partitions_offline(tmp_path: Path) -> None:
    node = Node(tmp_path)
    failures: list[Path] = []
    node.logs.on_dir_failure = lambda d, _reason: failures.append(d)
    node.replicas.on_io_error = lambda p, exc: node.logs.io_failure((p.topic, p.index), exc)
    node.replicas.apply(snapshot(1))
    bad = node.logs.dir_of("t", 0)
    assert bad is not None
    on_bad = [i for i in range(4) if node.logs.dir_of("t", i) == bad]
    # the directory vanishes under the node: the next roll/append cannot create files
    shutil.rmtree(bad)
    bad.write_text("not a directory any more")
    with pytest.raises(Exception) as info:
        for _ in range(200):
            node.part(on_bad[0]).append_as_leader(batch(20), -1)
    assert getattr(info.value, "code", None) == ErrorCode.KAFKA_STORAGE_ERROR
    assert failures == [bad] and node.logs.offline_dirs == {bad}
    assert node.part(on_bad[0]).offline
    good = [i for i in range(4) if i not in on_bad]
    node.part(good[0]).append_as_leader(batch(), -1)  # the other directory still works
    described = node.describe()
    assert described[str(bad)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert not described[str(bad)].replicas
    node.logs.checkpoint_recovery_points()  # skips the failed directory
    node.logs.shutdown()

    # restart with the directory still broken: its partitions come back offline
    again = Node.__new__(Node)
    again.dirs = node.dirs
    again.logs = LogManager(node.dirs, ME, "c", BROKER)
    assert again.logs.offline_dirs == {bad}
    again.replicas = ReplicaManager(ME, again.logs, BROKER, replica_lag_time_max_ms=30_000)
    again.replicas.apply(snapshot(2))
    assert again.replicas.offline == {("t", i) for i in on_bad}
    assert sorted(again.replicas.partitions) == [("t", i) for i in good]
    again.logs.shutdown()


def test_throttled_replicas_syntax() -> None:
    assert throttled_partitions("0:1,1:2,3:1", 1) == {0, 3}
    assert throttled_partitions("*", 5) is None
    assert throttled_partitions("", 1) == frozenset()
    assert is_throttled("*", 1, 9) and not is_throttled("0:2", 1, 0)


def test_quota_bounds_the_long_run_rate() -> None:
    now = [0.0]
    quota = ReplicationQuota(clock=lambda: now[0])
    quota.set_bound(1000)
    sent = 0
    while now[0] < 20.0:
        if not quota.exceeded():
            quota.record(100)
            sent += 100
        now[0] += 0.001
    assert 20_000 <= sent <= 21_100  # 1000 B/s for 20 s plus at most the 1 s burst
    quota.set_bound((1 << 63) - 1)
    assert quota.unlimited and not quota.exceeded()


def test_mover_task_runs_under_the_event_loop(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = Node(tmp_path)
        node.replicas.apply(snapshot(1, partitions=1))
        for _ in range(10):
            node.part(0).append_as_leader(batch(), -1)
        source = node.logs.dir_of("t", 0)
        target = next(d for d in node.logs.log_dirs if d != source)
        node.mover.start()
        assert node.alter(0, target) == ErrorCode.NONE
        for _ in range(500):
            if node.logs.dir_of("t", 0) == target:
                break
            await asyncio.sleep(0.01)
        await node.mover.stop()
        assert node.logs.dir_of("t", 0) == target
        node.logs.shutdown()

    asyncio.run(scenario())
