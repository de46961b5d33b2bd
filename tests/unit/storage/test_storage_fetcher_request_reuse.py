"""A replica fetcher reuses its previous round's FetchRequest while the round names the
same partitions in the same epochs, with each partition's offsets set in place
(odradek.storage.fetcher, issue 18: one round per replicated record, and building the
messages anew cost three times as much); any other round gets a new request. Either
way the request is exactly what the partitions' logs say now. Real logs; the fetchers
have no leader address, so they never fetch on their own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2, storage_pb2
from odradek.storage.fetcher import ReplicaFetcher, ReplicaFetcherManager
from odradek.storage.metrics import StorageMetrics
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.settings import StorageSettings

ME, LEADER = 1, 2


def _snapshot(version: int = 1, epoch: int = 0) -> Snapshot:
    raw = common_pb2.ClusterMetadata(version=version, cluster_id="c")
    for n in (ME, LEADER):
        raw.nodes.add(node_id=n, kind=common_pb2.STORAGE, host="127.0.0.1", state=common_pb2.ONLINE)
    t = raw.topics.add(name="t", topic_id=b"\x01" * 16)
    for index in range(3):
        t.partitions.add(
            partition=index,
            replicas=[LEADER, ME],
            isr=[LEADER, ME],
            leader=LEADER,
            leader_epoch=epoch if index == 0 else 0,
            partition_epoch=version,
        )
    return Snapshot.build(raw)


@pytest.fixture
async def following(tmp_path: Path) -> AsyncIterator[tuple[ReplicaManager, ReplicaFetcher]]:
    settings = StorageSettings(
        node_id=ME,
        host="127.0.0.1",
        grpc_port=0,
        metrics_port=0,
        controller_address="127.0.0.1:1",
        log_dirs=[tmp_path / "logs"],
        num_replica_fetchers=1,
    )
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    replicas = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    fetchers = ReplicaFetcherManager(settings, lambda _node: None, lambda: 7, StorageMetrics())
    replicas.on_follow = fetchers.add
    replicas.on_unfollow = fetchers.remove
    replicas.apply(_snapshot())
    [fetcher] = fetchers.fetchers.values()
    yield replicas, fetcher
    await fetchers.shutdown()
    logs.shutdown()


def _ready(fetcher: ReplicaFetcher) -> None:
    for state in fetcher.states.values():
        state.truncating = False  # as after the first OffsetForLeaderEpoch


def _expected(fetcher: ReplicaFetcher) -> storage_pb2.FetchRequest:
    """The request built from scratch for every partition the fetcher would fetch now."""
    s = fetcher.settings
    return storage_pb2.FetchRequest(
        replica_id=ME,
        replica_incarnation=7,
        max_wait_ms=s.replica_fetch_wait_max_ms,
        min_bytes=s.replica_fetch_min_bytes,
        max_bytes=s.replica_fetch_response_max_bytes,
        partitions=[
            storage_pb2.FetchPartition(
                topic=st.partition.topic,
                partition=st.partition.index,
                fetch_offset=st.partition.log_end_offset,
                partition_max_bytes=s.replica_fetch_max_bytes,
                current_leader_epoch=st.leader_epoch,
                log_start_offset=st.partition.log_start_offset,
                last_fetched_epoch=st.partition.latest_epoch,
            )
            for st in fetcher.states.values()
            if not st.truncating and st.delayed_until <= fetcher._now()
        ],
    )


async def test_an_unchanged_round_reuses_the_request_with_offsets_set(
    following: tuple[ReplicaManager, ReplicaFetcher],
) -> None:
    replicas, fetcher = following
    _ready(fetcher)
    first, sent = fetcher._build_request()
    assert first is not None and first == _expected(fetcher)
    assert len(sent) == 3
    part = replicas.get("t", 1)
    assert part is not None
    part.truncate_fully_and_start_at(40)  # the log end and start move
    again, sent = fetcher._build_request()
    assert again is first
    assert again == _expected(fetcher)
    assert again.partitions[1].fetch_offset == 40 and again.partitions[1].log_start_offset == 40
    assert sent[("t", 1)][1] == 40


async def test_a_round_naming_other_partitions_or_epochs_builds_anew(
    following: tuple[ReplicaManager, ReplicaFetcher],
) -> None:
    replicas, fetcher = following
    _ready(fetcher)
    first, _ = fetcher._build_request()
    # One partition backs off: the round leaves it out.
    fetcher.states[("t", 2)].delayed_until = fetcher._now() + 60
    fewer, sent = fetcher._build_request()
    assert fewer is not None and fewer is not first
    assert fewer == _expected(fetcher) and set(sent) == {("t", 0), ("t", 1)}
    fetcher.states[("t", 2)].delayed_until = 0
    # A new leader epoch for partition 0: a new fetch state, a new request.
    replicas.apply(_snapshot(version=2, epoch=3))
    _ready(fetcher)
    epoch, _ = fetcher._build_request()
    assert epoch is not None and epoch is not fewer
    assert epoch == _expected(fetcher)
    assert {p.partition: p.current_leader_epoch for p in epoch.partitions} == {0: 3, 1: 0, 2: 0}
