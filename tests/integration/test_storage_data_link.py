"""The data link (docs/data-link.md) against a real storage node: Produce and Fetch
through :class:`odradek.storage_client.StoragePool` as the gateway calls them, the same
answers as over gRPC (offsets, high watermark, long poll, acks=-1), a malformed frame
closing only its connection, and ``data.port=-1`` falling back to gRPC."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator, Callable

import pytest
from test_storage_harness import (
    Client,
    Cluster,
    decode,
    fetch_request,
    make_batch,
    produce_request,
    storage_clusters,
)

from odradek.metadata_cache import MetadataCache
from odradek.storage_client import StoragePool
from odradek.tools.launcher import Cluster as LaunchedCluster

NODE = 100


async def _pool(client: Client) -> StoragePool:
    cache = MetadataCache()
    await cache.update(await client.metadata())
    return StoragePool(cache)


@pytest.fixture(scope="module")
def linked(module_cluster_factory: Callable[..., LaunchedCluster]) -> Cluster:
    # TCP, as between hosts: the Unix socket has its own tests
    # (test_storage_data_link_unix.py).
    return storage_clusters(module_cluster_factory)([NODE], storage={"data.socket.path": ""})


@pytest.fixture
async def client(linked: Cluster) -> AsyncIterator[Client]:
    c = Client(linked)
    yield c
    await c.close()


async def test_node_registers_its_data_port(client: Client) -> None:
    md = await client.metadata()
    (node,) = [n for n in md.nodes if n.node_id == NODE]
    assert node.data_port > 0 and node.data_port != node.grpc_port


async def test_produce_and_fetch_over_the_link_match_grpc(client: Client) -> None:
    await client.create_topic("link-rt")
    pool = await _pool(client)
    try:
        for i in range(3):
            answer = await pool.produce(
                NODE,
                produce_request("link-rt", acks=-1).SerializeToString(),
                [memoryview(make_batch([b"a%d" % i, b"b%d" % i]))],
                timeout=10,
            )
            (r,) = answer.partitions
            assert (r.error_code, r.base_offset) == (0, 2 * i)
        response, records = await pool.fetch(NODE, fetch_request("link-rt", 0), timeout=10)
        (part,) = response.partitions
        assert (part.error_code, part.high_watermark, part.log_end_offset) == (0, 6, 6)
        assert not part.records  # the records travel beside the protobuf
        assert [v for _, v in decode(bytes(records[0]))] == [
            b"a0",
            b"b0",
            b"a1",
            b"b1",
            b"a2",
            b"b2",
        ]
        over_grpc = await client.fetch(NODE, "link-rt", 0)
        assert over_grpc.records == bytes(records[0])
        assert over_grpc.high_watermark == part.high_watermark
        # Errors are the handler's: an offset past the end, an unknown partition.
        response, records = await pool.fetch(NODE, fetch_request("link-rt", 99), timeout=10)
        assert response.partitions[0].error_code == 1 and records == [b""]  # OFFSET_OUT_OF_RANGE
        response, _ = await pool.fetch(NODE, fetch_request("no-such", 0), timeout=10)
        assert response.partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    finally:
        await pool.close()


async def test_long_poll_over_the_link_wakes_on_produce(client: Client) -> None:
    await client.create_topic("link-poll")
    pool = await _pool(client)
    try:
        start = time.monotonic()
        poll = asyncio.ensure_future(
            pool.fetch(NODE, fetch_request("link-poll", 0, wait_ms=10_000), timeout=20)
        )
        await asyncio.sleep(0.3)
        assert not poll.done()  # waiting for data, and not holding up the produce below
        answer = await pool.produce(
            NODE,
            produce_request("link-poll", acks=1).SerializeToString(),
            [make_batch([b"x"])],
            timeout=10,
        )
        assert answer.partitions[0].error_code == 0
        response, records = await asyncio.wait_for(poll, 10)
        assert time.monotonic() - start < 5
        assert [v for _, v in decode(bytes(records[0]))] == [b"x"]
        assert response.partitions[0].high_watermark == 1
    finally:
        await pool.close()


async def test_malformed_frame_closes_only_that_connection(client: Client) -> None:
    await client.create_topic("link-bad")
    md = await client.metadata()
    (node,) = [n for n in md.nodes if n.node_id == NODE]
    with socket.create_connection((node.host, node.data_port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 5) + b"\0" * 5)  # shorter than any frame
        assert sock.recv(1) == b""  # closed by the node
    with socket.create_connection((node.host, node.data_port), timeout=10) as sock:
        # a well-sized frame of an unknown kind: an ERROR answer, the connection stays
        sock.sendall(struct.pack(">iiBii", 13, 42, 99, 0, 0))
        head = sock.recv(13)
        _size, cid, kind = struct.unpack(">iiB", head[:9])
        assert (cid, kind) == (42, 1)
    pool = await _pool(client)
    try:
        answer = await pool.produce(
            NODE,
            produce_request("link-bad", acks=1).SerializeToString(),
            [make_batch([b"ok"])],
            timeout=10,
        )
        assert answer.partitions[0].error_code == 0
    finally:
        await pool.close()


async def test_without_a_data_port_produce_and_fetch_use_grpc(
    cluster_factory: Callable[..., LaunchedCluster],
) -> None:
    cluster = storage_clusters(cluster_factory)([NODE], storage={"data.port": "-1"})
    client = Client(cluster)
    try:
        md = await client.metadata()
        assert [n.data_port for n in md.nodes if n.node_id == NODE] == [0]
        await client.create_topic("grpc-only")
        pool = await _pool(client)
        try:
            answer = await pool.produce(
                NODE,
                produce_request("grpc-only", acks=-1).SerializeToString(),
                [make_batch([b"g"])],
                timeout=10,
            )
            assert answer.partitions[0].error_code == 0
            response, records = await pool.fetch(NODE, fetch_request("grpc-only", 0), timeout=10)
            assert response.partitions[0].high_watermark == 1
            assert [v for _, v in decode(bytes(records[0]))] == [b"g"]
        finally:
            await pool.close()
    finally:
        await client.close()


def _established_to(port: int) -> int:
    """Established TCP connections whose local end is ``port`` (this host, IPv4)."""
    count = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, state = fields[1], fields[3]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "01":
                count += 1
    return count


async def _replicate(cluster: Cluster, topic: str) -> None:
    """acks=-1 writes to a replication factor 2 topic led by NODE: each is answered
    only once the follower has it."""
    client = Client(cluster)
    try:
        await client.create_topic(topic, assignment=[[NODE, NODE + 1]])
        for i in range(5):
            result = await client.produce(NODE, topic, make_batch([b"r%d" % i]), acks=-1)
            assert (result.error_code, result.base_offset) == (0, i)
        follower = await client.describe(NODE + 1, topic)
        assert (follower.log_end_offset, follower.is_leader) == (5, False)
    finally:
        await client.close()


async def test_followers_fetch_over_the_leaders_data_link(
    cluster_factory: Callable[..., LaunchedCluster],
) -> None:
    # Without the nodes' Unix sockets: a follower on its leader's host fetches over the
    # socket otherwise (tests/integration/test_replica_fetch_same_host.py).
    cluster = storage_clusters(cluster_factory)([NODE, NODE + 1], storage={"data.socket.path": ""})
    await _replicate(cluster, "link-replicated")
    client = Client(cluster)
    try:
        md = await client.metadata()
        (leader,) = [n for n in md.nodes if n.node_id == NODE]
    finally:
        await client.close()
    # No gateway in this cluster and the test talks gRPC: the follower's replica
    # fetcher is the one connected to the leader's data link.
    assert _established_to(leader.data_port) >= 1


async def test_without_a_data_port_followers_fetch_over_grpc(
    cluster_factory: Callable[..., LaunchedCluster],
) -> None:
    cluster = storage_clusters(cluster_factory)([NODE, NODE + 1], storage={"data.port": "-1"})
    await _replicate(cluster, "grpc-replicated")
