"""Partition lifecycle driven by metadata snapshots, over a real LogManager on disk.

Become leader / follower, stale snapshots ignored, config changes applied to open
logs, replicas deleted when unassigned or when their topic is deleted or recreated,
stray logs cleaned up at start.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.batches import producer_batch

from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2
from odradek.storage.partition import Partition, Role
from odradek.storage.replica_manager import ReplicaManager, kafka_uuid
from odradek.topic_config import LogConfig

ME = 1
TOPIC_ID = uuid.uuid4().bytes
FOLLOWED: list[str] = []  # partitions handed to the replica fetcher, in order
UNFOLLOWED: list[str] = []


def batch() -> bytearray:
    return producer_batch([(1000, None, b"v")])


def snapshot(
    version: int,
    partitions: list[tuple[int, list[int], int, int]],
    *,
    topic: str = "t",
    topic_id: bytes = TOPIC_ID,
    configs: dict[str, str] | None = None,
    cluster_configs: dict[str, str] | None = None,
) -> Snapshot:
    """``partitions``: (index, replicas, leader, leader_epoch)."""
    raw = common_pb2.ClusterMetadata(
        version=version, cluster_id="c", cluster_configs=cluster_configs or {}
    )
    for n in (1, 2, 3):
        raw.nodes.append(
            common_pb2.Node(
                node_id=n,
                kind=common_pb2.STORAGE,
                host="127.0.0.1",
                grpc_port=1000 + n,
                state=common_pb2.ONLINE,
            )
        )
    if partitions:
        t = raw.topics.add(name=topic, topic_id=topic_id, configs=configs or {})
        for index, replicas, leader, epoch in partitions:
            t.partitions.add(
                partition=index,
                replicas=replicas,
                isr=replicas,
                leader=leader,
                leader_epoch=epoch,
                partition_epoch=version,
            )
    return Snapshot.build(raw)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ReplicaManager]:
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    rm = ReplicaManager(ME, logs, {"log.segment.bytes": "1048576"}, replica_lag_time_max_ms=30_000)
    rm.on_follow = lambda p: FOLLOWED.append(p.name)
    rm.on_unfollow = lambda p: UNFOLLOWED.append(p.name)
    FOLLOWED.clear()
    UNFOLLOWED.clear()
    yield rm
    logs.shutdown()


def part(rm: ReplicaManager, index: int = 0) -> Partition:
    p = rm.get("t", index)
    assert p is not None
    return p


def test_become_leader_and_follower(manager: ReplicaManager, tmp_path: Path) -> None:
    manager.apply(snapshot(1, [(0, [1, 2], 1, 0), (1, [2, 1], 2, 0), (2, [2, 3], 2, 0)]))
    assert sorted(manager.partitions) == [("t", 0), ("t", 1)]  # t-2 is not ours
    assert part(manager, 0).role is Role.LEADER
    assert part(manager, 1).role is Role.FOLLOWER and part(manager, 1).leader_id == 2
    assert FOLLOWED == ["t-1"]
    metadata = (tmp_path / "logs" / "t-0" / "partition.metadata").read_text()
    assert metadata == f"version: 0\ntopic_id: {kafka_uuid(TOPIC_ID)}"
    assert part(manager, 0).config.segment_bytes == 1048576  # static broker default

    part(manager, 1).append_as_follower(_as_follower_batch())
    # Leadership moves here: the fetcher stops and epoch 1 starts at the log end.
    manager.apply(snapshot(2, [(0, [1, 2], 1, 0), (1, [2, 1], 1, 1)]))
    assert part(manager, 1).role is Role.LEADER
    assert "t-1" in UNFOLLOWED
    assert part(manager, 1).log.leader_epoch_cache.entries()[-1] == (1, 1)


def _as_follower_batch() -> bytes:
    b = batch()
    b[12:16] = (0).to_bytes(4, "big")  # partitionLeaderEpoch 0, base offset 0
    return bytes(b)


def test_older_snapshots_are_ignored(manager: ReplicaManager) -> None:
    manager.apply(snapshot(5, [(0, [1, 2], 1, 3)]))
    manager.apply(snapshot(4, [(0, [1, 2], 2, 2)]))
    assert part(manager).role is Role.LEADER and part(manager).leader_epoch == 3
    manager.apply(snapshot(5, [(0, [1, 2], 2, 4)]))
    assert part(manager).role is Role.LEADER


def test_config_changes_apply_to_the_open_log(manager: ReplicaManager) -> None:
    manager.apply(snapshot(1, [(0, [1], 1, 0)]))
    assert part(manager).log.config.max_message_bytes == LogConfig().max_message_bytes
    manager.apply(snapshot(2, [(0, [1], 1, 0)], configs={"max.message.bytes": "2000"}))
    assert part(manager).log.config.max_message_bytes == 2000
    assert part(manager).config.max_message_bytes == 2000
    # Cluster-wide dynamic defaults from the controller apply where the topic is silent.
    manager.apply(snapshot(3, [(0, [1], 1, 0)], cluster_configs={"min.insync.replicas": "2"}))
    assert part(manager).min_insync_replicas == 2
    assert part(manager).log.config.max_message_bytes == LogConfig().max_message_bytes


def test_unassigned_and_deleted_partitions_lose_their_logs(
    manager: ReplicaManager, tmp_path: Path
) -> None:
    manager.apply(snapshot(1, [(0, [1, 2], 1, 0), (1, [1, 2], 2, 0)]))
    part(manager, 0).append_as_leader(batch(), 1)
    # Reassigned away: t-1 goes; the topic deleted: t-0 goes.
    manager.apply(snapshot(2, [(0, [1, 2], 1, 0), (1, [2, 3], 2, 0)]))
    assert manager.get("t", 1) is None
    assert "t-1" in UNFOLLOWED
    manager.apply(snapshot(3, []))
    assert manager.partitions == {}
    names = {p.name for p in (tmp_path / "logs").iterdir() if p.is_dir()}
    assert "t-0" not in names and "t-1" not in names
    assert any(n.startswith("t-0.") and n.endswith("-delete") for n in names)


def test_recreated_topic_starts_from_an_empty_log(manager: ReplicaManager) -> None:
    manager.apply(snapshot(1, [(0, [1], 1, 0)]))
    part(manager).append_as_leader(batch(), 1)
    assert part(manager).log_end_offset == 1
    new_id = uuid.uuid4().bytes
    manager.apply(snapshot(2, [(0, [1], 1, 0)], topic_id=new_id))
    assert part(manager).topic_id == new_id
    assert part(manager).log_end_offset == 0


def test_stray_logs_are_deleted_on_the_first_snapshot(tmp_path: Path) -> None:
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    logs.create_log("gone", 0, kafka_uuid(uuid.uuid4().bytes), LogConfig())
    logs.create_log("t", 0, kafka_uuid(TOPIC_ID), LogConfig())
    created = logs.get_log("t", 0)
    assert created is not None
    created.append_as_leader(batch(), 0)
    logs.shutdown()
    # Restart: the log of a topic deleted while the node was down is removed; ours stays.
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    rm = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    rm.apply(snapshot(1, [(0, [1], 1, 0)]))
    assert [tp for tp, _ in logs.logs()] == [("t", 0)]
    assert part(rm).log_end_offset == 1
    logs.shutdown()
