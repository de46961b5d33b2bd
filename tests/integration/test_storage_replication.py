"""Replication across three real storage nodes: acks=-1, high watermark, ISR, failover.

Replication factor 3, ``min.insync.replicas`` 2. Followers pull from the leader over the
ReplicaFetch stream; nodes are frozen (SIGSTOP), killed (kill -9) and restarted.
"""

from __future__ import annotations

import asyncio
import signal
import time
import urllib.request
from collections.abc import Callable

import grpc
import pytest
from helpers.waiting import wait_until_async
from test_storage_harness import (
    Client,
    Cluster,
    decode,
    make_batch,
    raw_log,
    retry,
    storage_clusters,
)

from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import storage_pb2
from odradek.tools.launcher import Cluster as LaunchedCluster

NODES = [100, 101, 102]
LAG_MS = 800
RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
}


@pytest.fixture
def make_cluster(cluster_factory: Callable[..., LaunchedCluster]) -> Callable[..., Cluster]:
    return storage_clusters(cluster_factory)


def start(make_cluster: Callable[..., Cluster], **controller: str) -> Cluster:
    return make_cluster(
        NODES,
        controller={"broker.session.timeout.ms": "3000", **controller},
        storage={"replica.lag.time.max.ms": str(LAG_MS)},
    )


async def metric(cluster: Cluster, node_id: int, name: str) -> float:
    url = f"http://127.0.0.1:{cluster.nodes[node_id].ports['metrics']}/metrics"
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


async def produce_to_leader(
    client: Client, topic: str, batch: bytes, *, timeout: float = 30.0
) -> storage_pb2.ProducePartitionResult:
    """What a client does: find the leader, produce acks=-1, retry retriable errors."""

    async def attempt() -> storage_pb2.ProducePartitionResult | None:
        p = await client.partition(topic)
        if p.leader < 0:
            return None
        result = await client.produce(p.leader, topic, batch, acks=-1, timeout_ms=2000)
        return None if result.error_code in RETRIABLE else result

    return await wait_until_async(
        attempt,
        f"a produce to {topic} without a retriable error",
        timeout=timeout,
        ignoring=(grpc.aio.AioRpcError,),
    )


async def assert_replicas_identical(
    cluster: Cluster, client: Client, topic: str, nodes: list[int]
) -> bytes:
    """Every replica holds the same bytes up to the high watermark (and nothing else)."""

    async def in_step() -> bool:
        states = [await client.describe(n, topic) for n in nodes]
        leos = {s.log_end_offset for s in states}
        hws = {s.high_watermark for s in states}
        if not (len(leos) == 1 and hws == leos):
            return False
        # Offsets alone can agree before a follower with a stale high watermark truncated.
        return len({raw_log(cluster, n, topic) for n in nodes}) == 1

    await wait_until_async(in_step, f"replicas of {topic} holding the same bytes", timeout=15)
    return raw_log(cluster, nodes[0], topic)


async def test_acks_all_waits_for_every_isr_follower(make_cluster: Callable[..., Cluster]) -> None:
    cluster = start(make_cluster)
    client = Client(cluster)
    try:
        await client.create_topic(
            "aa", rf=3, configs={"min.insync.replicas": "2"}, assignment=[[100, 101, 102]]
        )
        first = await client.produce(100, "aa", make_batch([b"one"]), acks=-1)
        assert first.error_code == 0
        # acks=-1 answered: both followers had fetched past the batch.
        for n in (101, 102):
            assert (await client.describe(n, "aa")).log_end_offset >= 1

        # Freeze both followers: acks=-1 cannot complete, acks=1 can.
        for n in (101, 102):
            cluster.nodes[n].signal(signal.SIGSTOP)
        pending = asyncio.ensure_future(
            client.produce(100, "aa", make_batch([b"two"]), acks=-1, timeout_ms=20_000)
        )
        await wait_until_async(
            lambda: _leo_at_least(client, 100, "aa", 2), "the leader appending the batch"
        )
        assert not pending.done()  # held: the frozen followers cannot fetch it
        leader = await client.describe(100, "aa")
        assert (leader.log_end_offset, leader.high_watermark) == (2, 1)
        # Consumers see only what is below the high watermark, at either isolation level.
        for isolation in (0, 1):
            seen = await client.fetch(100, "aa", 0, isolation_level=isolation)
            assert [o for o, _ in decode(seen.records)] == [0]
            assert (seen.high_watermark, seen.last_stable_offset) == (1, 1)
        assert (await client.fetch(100, "aa", 1)).records == b""
        # Only one follower back: the high watermark is the minimum over the ISR, still 1.
        cluster.nodes[101].signal(signal.SIGCONT)
        await wait_until_async(
            lambda: _leo_at_least(client, 101, "aa", 2), "follower 101 catching up", timeout=10
        )
        await asyncio.sleep(0.3)  # the scenario: a window for a wrong high watermark to show
        assert not pending.done()
        assert (await client.describe(100, "aa")).high_watermark == 1
        cluster.nodes[102].signal(signal.SIGCONT)
        result = await asyncio.wait_for(pending, 10)
        assert (result.error_code, result.base_offset) == (0, 1)
        assert (await client.describe(100, "aa")).high_watermark == 2
        # A consumer never sees past the high watermark.
        assert [o for o, _ in decode((await client.fetch(100, "aa", 0)).records)] == [0, 1]
        await assert_replicas_identical(cluster, client, "aa", NODES)

        # DeleteRecords answers once every live replica moved its log start.
        response = await client.node(100).DeleteRecords(
            storage_pb2.DeleteRecordsRequest(
                timeout_ms=5000,
                partitions=[storage_pb2.DeleteRecordsPartition(topic="aa", partition=0, offset=1)],
            )
        )
        assert (response.partitions[0].error_code, response.partitions[0].low_watermark) == (0, 1)
        for n in NODES:
            assert (await client.describe(n, "aa")).log_start_offset == 1
    finally:
        for n in NODES:
            cluster.nodes[n].signal(signal.SIGCONT)
        await client.close()


async def _leo_at_least(client: Client, node: int, topic: str, offset: int) -> bool:
    try:
        return (await client.describe(node, topic)).log_end_offset >= offset
    except grpc.aio.AioRpcError:
        return False


async def test_isr_shrinks_on_lag_and_expands_on_catch_up(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = start(make_cluster, **{"broker.session.timeout.ms": "30000"})
    client = Client(cluster)
    try:
        await client.create_topic(
            "isr", rf=3, configs={"min.insync.replicas": "2"}, assignment=[[100, 101, 102]]
        )
        assert (await client.produce(100, "isr", make_batch([b"a"]))).error_code == 0

        # kill -9 a follower. With a 30 s controller session, only the leader's lag check
        # (replica.lag.time.max.ms) can drop it from the ISR.
        cluster.nodes[102].kill()
        killed = time.monotonic()
        assert (await client.produce(100, "isr", make_batch([b"b"]), acks=1)).error_code == 0

        async def isr_is(members: list[int]) -> bool:
            return sorted((await client.partition("isr")).isr) == members

        await wait_until_async(
            lambda: isr_is([100, 101]), "ISR shrinking to [100, 101]", timeout=10
        )
        assert time.monotonic() - killed < 8  # about replica.lag.time.max.ms, with room for load
        assert await metric(cluster, 100, "odradek_isr_shrinks_total") >= 1
        # Two in-sync replicas still satisfy min.insync.replicas=2.
        ok = await client.produce(100, "isr", make_batch([b"c"]), acks=-1)
        assert ok.error_code == 0
        assert (await client.describe(100, "isr")).isr == [100, 101]

        # Down to the leader alone: acks=-1 is refused before appending; acks=1 works.
        cluster.nodes[101].kill()
        assert (await client.produce(100, "isr", make_batch([b"d"]), acks=1)).error_code == 0
        await wait_until_async(lambda: isr_is([100]), "ISR shrinking to [100]", timeout=10)
        leo = (await client.describe(100, "isr")).log_end_offset
        refused = await client.produce(100, "isr", make_batch([b"e"]), acks=-1)
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert (await client.describe(100, "isr")).log_end_offset == leo
        assert (await client.produce(100, "isr", make_batch([b"f"]), acks=1)).error_code == 0

        # The followers return, catch up and are added back.
        for n in (101, 102):
            cluster.nodes[n].start()
        for n in (101, 102):
            cluster.nodes[n].wait_ready()
        await wait_until_async(
            lambda: isr_is([100, 101, 102]), "ISR expanding back to all three", timeout=15
        )
        assert await metric(cluster, 100, "odradek_isr_expands_total") >= 2
        assert (await client.produce(100, "isr", make_batch([b"g"]), acks=-1)).error_code == 0
        await assert_replicas_identical(cluster, client, "isr", NODES)
        values = [v for _, v in await client.read_all(100, "isr")]
        assert values == [b"a", b"b", b"c", b"d", b"f", b"g"]
    finally:
        await client.close()


async def test_leader_failover_loses_no_acknowledged_write(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = start(make_cluster)
    client = Client(cluster)
    try:
        await client.create_topic(
            "fo", rf=3, configs={"min.insync.replicas": "2"}, assignment=[[100, 101, 102]]
        )
        pid = 9000
        acked: list[bytes] = []

        async def write(seq: int) -> None:
            value = b"m%04d" % seq
            batch = make_batch([value], producer_id=pid, producer_epoch=0, base_sequence=seq)
            result = await produce_to_leader(client, "fo", batch)
            assert result.error_code == 0, result
            acked.append(value)

        for seq in range(20):
            await write(seq)
        before = await client.partition("fo")
        assert before.leader == 100
        cluster.nodes[100].kill()
        # Writes keep going: they fail until the controller elects a new leader from the ISR.
        for seq in range(20, 40):
            await write(seq)
        after = await client.partition("fo")
        assert after.leader in (101, 102) and after.leader_epoch > before.leader_epoch
        new_leader = after.leader

        # Fetches with the old epoch are fenced; the new epoch is served.
        stale = await client.fetch(new_leader, "fo", 0, current_leader_epoch=before.leader_epoch)
        assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH
        current = await client.fetch(new_leader, "fo", 0, current_leader_epoch=after.leader_epoch)
        assert current.error_code == 0

        # Where each epoch ends, as the new leader answers followers (OffsetForLeaderEpoch).
        async def epoch_end(
            node: int, epoch: int, current: int
        ) -> storage_pb2.OffsetForLeaderEpochPartitionResult:
            r = await client.node(node).OffsetForLeaderEpoch(
                storage_pb2.OffsetForLeaderEpochRequest(
                    replica_id=-1,
                    partitions=[
                        storage_pb2.OffsetForLeaderEpochPartition(
                            topic="fo",
                            partition=0,
                            current_leader_epoch=current,
                            leader_epoch=epoch,
                        )
                    ],
                )
            )
            return r.partitions[0]

        leader_state = await client.describe(new_leader, "fo")
        old_epoch = await epoch_end(new_leader, before.leader_epoch, after.leader_epoch)
        assert old_epoch.error_code == 0 and old_epoch.leader_epoch == before.leader_epoch
        assert 20 <= old_epoch.end_offset <= 40
        latest = await epoch_end(new_leader, after.leader_epoch, after.leader_epoch)
        assert (latest.leader_epoch, latest.end_offset) == (
            after.leader_epoch,
            leader_state.log_end_offset,
        )
        fenced = await epoch_end(new_leader, 0, before.leader_epoch)
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
        unknown = await epoch_end(new_leader, 0, after.leader_epoch + 1)
        assert unknown.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        follower = next(n for n in (101, 102) if n != new_leader)
        not_leader = await epoch_end(follower, 0, after.leader_epoch)
        assert not_leader.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

        # The old leader returns as a follower, truncates by epoch and catches up.
        cluster.nodes[100].start()
        cluster.nodes[100].wait_ready()
        for seq in range(40, 45):
            await write(seq)
        await wait_until_async(
            lambda: _isr_size(client, "fo", 3), "the old leader rejoining the ISR", timeout=15
        )
        await assert_replicas_identical(cluster, client, "fo", NODES)
        values = [v for _, v in await retry(lambda: client.read_all(new_leader, "fo"))]
        # Every acknowledged write exactly once and in order: the new leader deduplicated
        # retries with the producer state it replicated.
        assert values == acked
    finally:
        await client.close()


async def _isr_size(client: Client, topic: str, n: int) -> bool:
    return len((await client.partition(topic)).isr) == n
