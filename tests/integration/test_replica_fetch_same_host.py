"""Followers fetch over the leader's Unix socket when it is on their host
(docs/data-link.md, "Same host"): three real storage nodes on one host, an RF3 topic,
acks=-1 produces answered once both followers have fetched, and every follower's data
link connections opened over the socket, none over TCP. After the leader restarts
(a new start: a new socket token), every fetcher reconnects over a socket again, never
refused by a stale hello."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable

import grpc
import pytest
from test_storage_harness import Client, Cluster, make_batch, storage_clusters

from odradek.rpc.v1 import common_pb2
from odradek.tools.launcher import Cluster as LaunchedCluster

NODES = [100, 101, 102]


async def _connections(cluster: Cluster, node_id: int) -> dict[str, float]:
    """The node's ``odradek_data_link_connections_total`` by transport."""
    url = f"http://127.0.0.1:{cluster.nodes[node_id].ports['metrics']}/metrics"
    body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    counts = {"unix": 0.0, "tcp": 0.0}
    for line in body.splitlines():
        if line.startswith("odradek_data_link_connections_total{"):
            transport = line.split('transport="', 1)[1].split('"', 1)[0]
            counts[transport] = float(line.rsplit(" ", 1)[1])
    return counts


async def _produce(client: Client, value: bytes) -> int:
    """Produce acks=-1 to whichever node leads; the leader's id."""
    deadline = time.monotonic() + 60
    while True:
        leader = (await client.partition("same")).leader
        if leader >= 0:
            try:
                result = await client.produce(
                    leader, "same", make_batch([value]), acks=-1, timeout_ms=5000
                )
            except grpc.aio.AioRpcError:
                pass
            else:
                if result.error_code == 0:
                    return leader
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)


async def test_followers_fetch_over_the_leaders_unix_socket(
    cluster_factory: Callable[..., LaunchedCluster],
) -> None:
    cluster = storage_clusters(cluster_factory)(NODES)
    client = Client(cluster)
    try:
        await client.create_topic("same", rf=3, assignment=[[100, 101, 102]])
        assert await _produce(client, b"one") == 100
        for n in (101, 102):
            assert (await client.describe(n, "same")).log_end_offset >= 1
            counts = await _connections(cluster, n)
            assert counts["unix"] >= 1 and counts["tcp"] == 0, (n, counts)
    finally:
        await client.close()


@pytest.mark.slow
async def test_after_the_leader_restarts_followers_use_its_new_socket(
    cluster_factory: Callable[..., LaunchedCluster],
) -> None:
    cluster = storage_clusters(cluster_factory)(NODES)
    client = Client(cluster)
    try:
        await client.create_topic("same", rf=3, assignment=[[100, 101, 102]])
        assert await _produce(client, b"one") == 100
        # The leader restarts: a new token, so the followers' old connections are gone
        # and they reconnect, over the new start's socket.
        old = next(n for n in (await client.metadata()).nodes if n.node_id == 100).data_socket
        cluster.restart(100)
        deadline = time.monotonic() + 30
        while True:
            node = next(n for n in (await client.metadata()).nodes if n.node_id == 100)
            if node.data_socket.token != old.token and node.state == common_pb2.ONLINE:
                break
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        leader = await _produce(client, b"two")
        deadline = time.monotonic() + 30
        for n in (m for m in NODES if m != leader):
            while (await client.describe(n, "same")).log_end_offset < 2:
                assert time.monotonic() < deadline, n  # the restarted node catching up
                await asyncio.sleep(0.2)
        for n in NODES:
            counts = await _connections(cluster, n)
            assert counts["tcp"] == 0, (n, counts)
    finally:
        await client.close()
