"""The seed's failure stories 3.3 and 3.4 with real processes (controller + two storage nodes).

Two replicas A (100, first leader) and B (101), ``min.insync.replicas=1``. The
high-watermark checkpoint is never written during these tests, so a node restarted
after kill -9 comes back with a high watermark of 0: exactly the state in which
truncating to the high watermark loses acknowledged data.

Our controller fences a restarted replica out of the ISR (as KRaft does when a broker
re-registers), so for the 3.4 story, where the restarted B must lead while A is down,
the topic allows unclean election: that is the only way B can lead there, and what
is checked is that the replicas never diverge.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

import pytest
from helpers.waiting import wait_until_async
from test_storage_harness import Client, Cluster, make_batch, raw_log, storage_clusters

from odradek.tools.launcher import Cluster as LaunchedCluster

A, B = 100, 101
SETTINGS = {
    "controller": {"broker.session.timeout.ms": "4000"},
    "storage": {
        "replica.lag.time.max.ms": "30000",
        "log.flush.offset.checkpoint.interval.ms": "3600000",
    },
}


@pytest.fixture
def make_cluster(cluster_factory: Callable[..., LaunchedCluster]) -> Callable[..., Cluster]:
    return storage_clusters(cluster_factory)


async def leader_is(client: Client, topic: str, node: int) -> bool:
    return (await client.partition(topic)).leader == node


async def isr_is(client: Client, topic: str, members: list[int]) -> bool:
    return sorted((await client.partition(topic)).isr) == members


async def healed(cluster: Cluster, client: Client, topic: str) -> bytes:
    async def in_step() -> bool:
        states = [await client.describe(n, topic) for n in (A, B)]
        offsets = len({(s.log_end_offset, s.high_watermark) for s in states}) == 1 and all(
            s.log_end_offset == s.high_watermark for s in states
        )
        # Offsets alone can agree before a follower with a stale high watermark truncated.
        return offsets and raw_log(cluster, A, topic) == raw_log(cluster, B, topic)

    await wait_until_async(in_step, "both replicas holding the same bytes", timeout=20)
    return raw_log(cluster, A, topic)


async def test_seed_3_3_restarted_follower_keeps_what_it_had(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster([A, B], **SETTINGS)
    client = Client(cluster)
    try:
        await client.create_topic(
            "s33", rf=2, configs={"min.insync.replicas": "1"}, assignment=[[A, B]]
        )
        for value in (b"m0", b"m1"):
            assert (await client.produce(A, "s33", make_batch([value]))).error_code == 0
        assert (await client.describe(B, "s33")).log_end_offset == 2

        # A stalls; B is killed and restarts, as A's follower, with a stale high watermark.
        cluster.nodes[A].signal(signal.SIGSTOP)
        try:
            cluster.restart(B)
            await client.wait_hosted(B, "s33", 0, leader=False)
            state = await client.describe(B, "s33")
            assert (state.high_watermark, state.log_end_offset) == (0, 2)
            # The scenario: a window in which B, following a frozen A, must not truncate.
            await asyncio.sleep(0.5)
            assert (await client.describe(B, "s33")).log_end_offset == 2  # nothing truncated
        finally:
            cluster.nodes[A].signal(signal.SIGCONT)
        await wait_until_async(
            lambda: isr_is(client, "s33", [A, B]), "B back in the ISR", timeout=15
        )

        # A dies; B leads in a new epoch with both messages.
        before = await client.partition("s33")
        cluster.nodes[A].kill()
        await wait_until_async(lambda: leader_is(client, "s33", B), "B elected", timeout=15)
        assert (await client.partition("s33")).leader_epoch > before.leader_epoch
        assert [v for _, v in await client.read_all(B, "s33")] == [b"m0", b"m1"]
        assert (await client.produce(B, "s33", make_batch([b"m2"]))).error_code == 0

        # A returns as B's follower: truncation by epoch keeps everything.
        cluster.nodes[A].start()
        cluster.nodes[A].wait_ready()
        await wait_until_async(
            lambda: isr_is(client, "s33", [A, B]), "A back in the ISR", timeout=15
        )
        await healed(cluster, client, "s33")
        assert [v for _, v in await client.read_all(B, "s33")] == [b"m0", b"m1", b"m2"]
    finally:
        await client.close()


async def test_seed_3_4_replicas_never_diverge(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster([A, B], **SETTINGS)
    client = Client(cluster)
    try:
        await client.create_topic(
            "s34",
            rf=2,
            configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
            assignment=[[A, B]],
        )
        for value in (b"m0", b"m1"):
            assert (await client.produce(A, "s34", make_batch([value]))).error_code == 0
        # B stalls; A alone takes m2 (acks=1), then both crash.
        cluster.nodes[B].signal(signal.SIGSTOP)
        assert (await client.produce(A, "s34", make_batch([b"m2"]), acks=1)).error_code == 0
        cluster.nodes[B].kill()
        cluster.nodes[A].kill()

        # B restarts first and becomes leader (A is offline); a new m2 lands at offset 2.
        cluster.nodes[B].start()
        cluster.nodes[B].wait_ready()
        await wait_until_async(lambda: leader_is(client, "s34", B), "B elected", timeout=20)
        written = await client.produce(B, "s34", make_batch([b"m2-new"]))
        assert (written.error_code, written.base_offset) == (0, 2)

        # A returns holding a different m2 at offset 2: it must give it up.
        cluster.nodes[A].start()
        cluster.nodes[A].wait_ready()
        await wait_until_async(
            lambda: isr_is(client, "s34", [A, B]), "A back in the ISR", timeout=15
        )
        await healed(cluster, client, "s34")
        assert [v for _, v in await client.read_all(B, "s34")] == [b"m0", b"m1", b"m2-new"]
        assert (await client.produce(B, "s34", make_batch([b"m3"]))).error_code == 0
        await healed(cluster, client, "s34")
    finally:
        await client.close()
