"""Which replica fetcher follows which partition (ReplicaFetcherManager): the internal
topics get a fetcher of their own per leader, so a round of a user topic's fetcher
handles only user partitions (issue 18: a hundred internal partitions in every round
were most of a replicated one-record produce's cost)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2
from odradek.storage.fetcher import ReplicaFetcherManager
from odradek.storage.metrics import StorageMetrics
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.settings import StorageSettings

ME = 1
LEADER = 2


def _settings(tmp_path: Path, fetchers: int) -> StorageSettings:
    return StorageSettings(
        node_id=ME,
        host="127.0.0.1",
        grpc_port=0,
        metrics_port=0,
        controller_address="127.0.0.1:1",
        log_dirs=[tmp_path / "logs"],
        num_replica_fetchers=fetchers,
    )


def _snapshot(topics: list[str], partitions: int) -> Snapshot:
    """Every partition of ``topics`` on nodes 2 (leader) and 1."""
    raw = common_pb2.ClusterMetadata(version=1, cluster_id="c")
    for n in (ME, LEADER):
        raw.nodes.add(
            node_id=n,
            kind=common_pb2.STORAGE,
            host="127.0.0.1",
            grpc_port=1000 + n,
            state=common_pb2.ONLINE,
        )
    for i, name in enumerate(topics):
        t = raw.topics.add(name=name, topic_id=bytes([i + 1]) * 16)
        for index in range(partitions):
            t.partitions.add(
                partition=index, replicas=[LEADER, ME], isr=[LEADER, ME], leader=LEADER
            )
    return Snapshot.build(raw)


@pytest.fixture(params=[1, 3])
async def following(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[ReplicaFetcherManager]:
    """Node 1 following, from node 2, partitions of ``t`` and of ``__consumer_offsets``
    (no address: the fetchers wait without fetching)."""
    settings = _settings(tmp_path, request.param)
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    replicas = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    fetchers = ReplicaFetcherManager(settings, lambda _node: None, lambda: 1, StorageMetrics())
    replicas.on_follow = fetchers.add
    replicas.apply(_snapshot(["t", "__consumer_offsets"], 6))
    yield fetchers
    await fetchers.shutdown()
    logs.shutdown()


async def test_internal_topics_have_their_own_fetcher(following: ReplicaFetcherManager) -> None:
    topics_by_fetcher = {
        key: {topic for topic, _ in fetcher.states} for key, fetcher in following.fetchers.items()
    }
    internal = [k for k, topics in topics_by_fetcher.items() if "__consumer_offsets" in topics]
    assert len(internal) == 1
    assert topics_by_fetcher[internal[0]] == {"__consumer_offsets"}
    assert all(leader == LEADER for leader, _ in topics_by_fetcher)
    user = {k for k, topics in topics_by_fetcher.items() if "t" in topics}
    assert user and internal[0] not in user
    assert len(following.following()) == 12
