"""The data link over a storage node's Unix socket (docs/data-link.md, "Same host"),
against a real storage node: the node registers the socket (path, host, per-start
token) and serves it with file permissions 0600/0700; a pool on this host uses it for
Produce and Fetch with the answers of the TCP link (long poll included); a hello that
does not match the metadata (another start of the node) and a socket on another host
leave the calls to TCP; a restarted node is reached over its new socket. Another
user's connection is refused in tests/unit/datalink/test_datalink_unix_socket.py."""

from __future__ import annotations

import asyncio
import stat
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from test_storage_harness import (
    Client,
    Cluster,
    decode,
    fetch_request,
    make_batch,
    produce_request,
    storage_clusters,
)

import odradek.datalink.same_host  # noqa: F401  # registers the connection counter
from odradek.datalink.unix_hello import TOKEN_BYTES
from odradek.datalink.unix_socket import host_id
from odradek.metadata_cache import MetadataCache
from odradek.rpc.v1 import common_pb2
from odradek.storage_client import StoragePool
from odradek.tools.launcher import Cluster as LaunchedCluster

NODE = 100


@pytest.fixture(scope="module")
def linked(module_cluster_factory: Callable[..., LaunchedCluster]) -> Cluster:
    return storage_clusters(module_cluster_factory)([NODE])


@pytest.fixture
async def client(linked: Cluster) -> AsyncIterator[Client]:
    c = Client(linked)
    yield c
    await c.close()


async def _node(client: Client) -> common_pb2.Node:
    md = await client.metadata()
    (node,) = [n for n in md.nodes if n.node_id == NODE]
    return node


async def _pool(
    client: Client, edit: Callable[[common_pb2.DataSocket], None] | None = None
) -> StoragePool:
    md = await client.metadata()
    if edit is not None:
        for n in md.nodes:
            if n.node_id == NODE:
                edit(n.data_socket)
    cache = MetadataCache()
    await cache.update(md)
    return StoragePool(cache)


def _counts() -> tuple[float, float]:
    """Data link connections this process opened: (over a Unix socket, over TCP)."""

    def count(transport: str) -> float:
        value = REGISTRY.get_sample_value(
            "odradek_data_link_connections_total", {"transport": transport}
        )
        return value or 0.0

    return count("unix"), count("tcp")


async def _round_trip(pool: StoragePool, topic: str, value: bytes) -> list[bytes]:
    answer = await pool.produce(
        NODE, produce_request(topic, acks=-1).SerializeToString(), [make_batch([value])], timeout=10
    )
    assert answer.partitions[0].error_code == 0
    response, records = await pool.fetch(NODE, fetch_request(topic, 0), timeout=10)
    assert response.partitions[0].error_code == 0
    return [v for _, v in decode(bytes(records[0]))]


async def test_node_registers_a_private_socket(client: Client, linked: Cluster) -> None:
    node = await _node(client)
    sock = node.data_socket
    assert sock.path == str(linked.root.resolve() / f"storage-{NODE}" / "link" / "data.sock")
    assert sock.host_id == host_id() and len(sock.token) == TOKEN_BYTES
    path = Path(sock.path)
    assert stat.S_ISSOCK(path.lstat().st_mode)
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.lstat().st_mode) == 0o700
    assert node.data_port > 0  # TCP stays for everyone else


async def test_produce_and_fetch_over_the_unix_socket(client: Client) -> None:
    await client.create_topic("unix-rt")
    pool = await _pool(client)
    before = _counts()
    try:
        assert await _round_trip(pool, "unix-rt", b"one") == [b"one"]
        # A long poll waits on the socket without holding up a Produce behind it.
        start = time.monotonic()
        poll = asyncio.ensure_future(
            pool.fetch(NODE, fetch_request("unix-rt", 1, 10_000), timeout=20)
        )
        await asyncio.sleep(0.3)
        assert not poll.done()
        answer = await pool.produce(
            NODE,
            produce_request("unix-rt", acks=1).SerializeToString(),
            [make_batch([b"two"])],
            timeout=10,
        )
        assert answer.partitions[0].error_code == 0
        response, records = await asyncio.wait_for(poll, 10)
        assert time.monotonic() - start < 5
        assert [v for _, v in decode(bytes(records[0]))] == [b"two"]
        assert response.partitions[0].high_watermark == 2
    finally:
        await pool.close()
    unix, tcp = _counts()
    assert (unix - before[0], tcp - before[1]) == (1, 0)


async def test_large_fetch_answers_over_the_socket_match_tcp(client: Client) -> None:
    """A consumer's large records go over the socket by sendfile (FileRange, issue 18):
    the same bytes as the TCP link's ``pread`` copy, several answers pipelined on one
    connection, and the bytes below the high watermark only."""
    await client.create_topic("unix-large")
    values = [bytes([65 + i % 26]) * 1000 for i in range(300)]
    batches = [make_batch(values[i : i + 100]) for i in range(0, 300, 100)]
    unix = await _pool(client)
    tcp = await _pool(client, lambda s: s.Clear())
    try:
        for batch in batches:  # three ~100 KB batches: each read is a FileRange
            answer = await unix.produce(
                NODE,
                produce_request("unix-large", acks=-1).SerializeToString(),
                [batch],
                timeout=10,
            )
            assert answer.partitions[0].error_code == 0
        fetches = [unix.fetch(NODE, fetch_request("unix-large", o), timeout=10) for o in (0, 100)]
        over_unix = await asyncio.gather(
            *fetches, tcp.fetch(NODE, fetch_request("unix-large", 0), timeout=10)
        )
        (_, first), (_, second), (_, plain) = over_unix
        # (stored with their offsets assigned: the node's bytes, not the ones sent)
        assert bytes(first[0]) == bytes(plain[0])
        assert len(first[0]) == sum(map(len, batches))
        assert bytes(second[0]) == bytes(first[0])[len(batches[0]) :]
        assert [v for _, v in decode(bytes(first[0]))] == values
    finally:
        await unix.close()
        await tcp.close()


async def test_a_hello_of_another_start_falls_back_to_tcp(client: Client) -> None:
    await client.create_topic("unix-stale")

    def other_start(sock: common_pb2.DataSocket) -> None:
        sock.token = bytes(TOKEN_BYTES)  # what an earlier start of the node registered

    pool = await _pool(client, other_start)
    before = _counts()
    try:
        assert await _round_trip(pool, "unix-stale", b"x") == [b"x"]
    finally:
        await pool.close()
    unix, tcp = _counts()
    assert (unix - before[0], tcp - before[1]) == (0, 1)


async def test_a_socket_on_another_host_is_not_tried(client: Client, tmp_path: Path) -> None:
    await client.create_topic("unix-host")

    def elsewhere(sock: common_pb2.DataSocket) -> None:
        sock.host_id = "another-host"

    pool = await _pool(client, elsewhere)
    before = _counts()
    try:
        assert await _round_trip(pool, "unix-host", b"y") == [b"y"]
    finally:
        await pool.close()
    unix, tcp = _counts()
    assert (unix - before[0], tcp - before[1]) == (0, 1)


async def test_a_restarted_node_is_reached_over_its_new_socket(
    client: Client, linked: Cluster
) -> None:
    await client.create_topic("unix-restart")
    old = (await _node(client)).data_socket.token
    linked.restart(NODE)
    deadline = time.monotonic() + 30
    while (node := await _node(client)).data_socket.token == old or node.state != common_pb2.ONLINE:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    # A pool that still holds the old start's metadata is refused by the hello.
    pool = await _pool(client, lambda sock: setattr(sock, "token", old))
    before = _counts()
    try:
        for _ in range(100):  # the node may still be taking up its partitions
            try:
                response, _ = await pool.fetch(NODE, fetch_request("unix-restart", 0), timeout=10)
            except Exception:
                response = None
            if response is not None and response.partitions[0].error_code == 0:
                break
            await asyncio.sleep(0.2)
        assert await _round_trip(pool, "unix-restart", b"z") == [b"z"]
    finally:
        await pool.close()
    assert _counts()[0] == before[0]
    pool = await _pool(client)
    try:
        assert await _round_trip(pool, "unix-restart", b"w") == [b"z", b"w"]
    finally:
        await pool.close()
    assert _counts()[0] == before[0] + 1
