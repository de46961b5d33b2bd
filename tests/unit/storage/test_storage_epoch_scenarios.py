"""The seed's replication failure stories (sections 3.3, 3.4, 3.5), replayed step by step.

Two storage nodes run in this process on real logs and real gRPC sockets. In process,
not as a launcher cluster, because the test plays the controller (no controller
process publishes these exact orders): it decides exactly when each node leads,
follows, crashes (its logs are dropped without flush or checkpoint, as kill -9 leaves
them) and restarts. With truncation by high watermark these orders lose an
acknowledged message (3.3) or leave two replicas with different records at one
offset (3.4); with truncation by leader epoch neither happens.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.batches import producer_batch
from helpers.waiting import wait_until_async
from kafka.record.memory_records import MemoryRecords

from odradek.controller_client import ControllerClient
from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.rpc.channel import open_channel
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from odradek.storage.node import StorageNode
from odradek.storage.servicer import StorageServicer
from odradek.storage.settings import StorageSettings

TOPIC = "seed"
TOPIC_ID = uuid.UUID("00000000-0000-4000-8000-000000000042").bytes
A, B = 1, 2


def batch(value: bytes) -> bytes:
    return bytes(producer_batch([(1_000, None, value)]))


def values(records: bytes) -> list[bytes]:
    out = []
    memory = MemoryRecords(records)
    while memory.has_next():
        b = memory.next_batch()
        if b is None:
            break
        out += [bytes(r.value) for r in b]
    return out


class Node:
    """One storage node in this process; ``crash`` leaves its files as kill -9 would."""

    def __init__(self, node_id: int, root: Path) -> None:
        self.node_id = node_id
        self.dir = root / f"node-{node_id}"
        self.port = 0
        self.running = False

    async def start(self) -> None:
        self.log_manager = LogManager([self.dir], self.node_id, "seed-cluster", {})
        settings = StorageSettings(
            node_id=self.node_id,
            host="127.0.0.1",
            grpc_port=0,
            metrics_port=0,
            controller_address="127.0.0.1:9",  # ISR changes come from the test, not a controller
            log_dirs=[self.dir],
            replica_lag_time_max_ms=60_000,
            replica_fetch_wait_max_ms=100,
            replica_fetch_backoff_ms=100,
        )
        self.node = StorageNode(
            settings, self.log_manager, ControllerClient("127.0.0.1:9"), incarnation=lambda: 1
        )
        servicer = StorageServicer()
        servicer.handlers = self.node.handlers
        self.rpc = RpcServer("127.0.0.1", 0)
        storage_pb2_grpc.add_StorageServicer_to_server(servicer, self.rpc.server)
        self.port = await self.rpc.start()
        self.node.start()
        self.channel = open_channel(f"127.0.0.1:{self.port}")
        self.stub = storage_pb2_grpc.StorageStub(self.channel)
        self.running = True

    async def crash(self) -> None:
        self.running = False
        await self.channel.close(None)
        await self.rpc.stop(grace=0)
        await self.node.stop()
        self.log_manager.close_without_shutdown()

    async def stop(self) -> None:
        if self.running:
            await self.crash()

    def apply(self, snapshot: Snapshot) -> None:
        self.node.apply(snapshot)

    def log(self) -> bytes:
        return b"".join(p.read_bytes() for p in sorted((self.dir / f"{TOPIC}-0").glob("*.log")))

    async def state(self) -> storage_pb2.PartitionState:
        r = await self.stub.DescribePartitions(storage_pb2.DescribePartitionsRequest())
        return next(p for p in r.partitions if p.topic == TOPIC)

    async def produce(self, value: bytes, acks: int) -> storage_pb2.ProducePartitionResult:
        r = await self.stub.Produce(
            storage_pb2.ProduceRequest(
                acks=acks,
                timeout_ms=5000,
                partitions=[
                    storage_pb2.ProducePartition(topic=TOPIC, partition=0, records=batch(value))
                ],
            )
        )
        return r.partitions[0]

    async def consume(self) -> list[bytes]:
        r = await self.stub.Fetch(
            storage_pb2.FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                partitions=[
                    storage_pb2.FetchPartition(
                        topic=TOPIC,
                        partition=0,
                        fetch_offset=0,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=-1,
                    )
                ],
            )
        )
        assert r.partitions[0].error_code == 0, r
        return values(r.partitions[0].records)


class Controller:
    """The test's stand-in for the controller: publishes metadata snapshots it chooses."""

    def __init__(self, nodes: dict[int, Node]) -> None:
        self.nodes = nodes
        self.version = 0

    def publish(self, leader: int, epoch: int, isr: list[int]) -> None:
        self.version += 1
        raw = common_pb2.ClusterMetadata(
            version=self.version, cluster_id="seed-cluster", controller_id=3000, controller_epoch=1
        )
        for n in self.nodes.values():
            raw.nodes.append(
                common_pb2.Node(
                    node_id=n.node_id,
                    kind=common_pb2.STORAGE,
                    host="127.0.0.1",
                    grpc_port=n.port,
                    state=common_pb2.ONLINE if n.running else common_pb2.OFFLINE,
                )
            )
        raw.topics.append(
            common_pb2.Topic(
                name=TOPIC,
                topic_id=TOPIC_ID,
                configs={"min.insync.replicas": "1"},
                partitions=[
                    common_pb2.Partition(
                        partition=0,
                        replicas=[A, B],
                        isr=isr,
                        leader=leader,
                        leader_epoch=epoch,
                        partition_epoch=self.version,
                    )
                ],
            )
        )
        snapshot = Snapshot.build(raw)
        for n in self.nodes.values():
            if n.running:
                n.apply(snapshot)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[Node, Node, Controller]]:
    a, b = Node(A, tmp_path), Node(B, tmp_path)
    await a.start()
    await b.start()
    ctl = Controller({A: a, B: b})
    yield a, b, ctl
    for n in (a, b):
        await n.stop()


async def hw_is(node: Node, hw: int) -> bool:
    return (await node.state()).high_watermark == hw


async def checkpoint_committed(a: Node, b: Node, hw: int) -> None:
    """Both replicas know ``hw`` and have checkpointed it (replication-offset-checkpoint)."""
    await wait_until_async(lambda: hw_is(a, hw), f"A's high watermark at {hw}")
    await wait_until_async(lambda: hw_is(b, hw), f"B's high watermark at {hw}")
    a.log_manager.checkpoint_high_watermarks()
    b.log_manager.checkpoint_high_watermarks()


async def in_step(a: Node, b: Node) -> bool:
    """Same offsets everywhere and the same bytes on disk (a stale high watermark alone
    can make the offsets agree before the follower has truncated)."""
    sa, sb = await a.state(), await b.state()
    offsets = sa.log_end_offset == sb.log_end_offset == sa.high_watermark == sb.high_watermark
    return offsets and a.log() == b.log()


async def test_seed_3_3_restart_with_a_stale_high_watermark_loses_nothing(
    cluster: tuple[Node, Node, Controller],
) -> None:
    a, b, ctl = cluster
    ctl.publish(leader=A, epoch=0, isr=[A, B])
    assert (await a.produce(b"m0", acks=-1)).error_code == 0
    await wait_until_async(lambda: hw_is(b, 1), "B's high watermark at 1")
    b.log_manager.checkpoint_high_watermarks()  # the seed's state: B's HW=1 on disk...
    assert (await a.produce(b"m1", acks=-1)).error_code == 0  # ...acknowledged: B has it
    assert (await b.state()).log_end_offset == 2

    # A dies; B restarts (kill -9: its high watermark checkpoint is stale) and comes
    # back as A's follower. Truncating to that high watermark would drop m1 here.
    await a.crash()
    await b.crash()
    await b.start()
    ctl.publish(leader=A, epoch=0, isr=[A, B])
    restarted = await b.state()
    assert (restarted.high_watermark, restarted.log_end_offset) == (1, 2)
    # The scenario: a window in which B's fetcher fails to reach A (no answer, so no
    # truncation to B's stale high watermark may happen).
    await asyncio.sleep(0.3)
    assert (await b.state()).log_end_offset == 2

    # B becomes leader (epoch 1 starts at its log end), then A returns as its follower.
    ctl.publish(leader=B, epoch=1, isr=[B])
    assert await b.consume() == [b"m0", b"m1"]
    await a.start()
    ctl.publish(leader=B, epoch=1, isr=[B, A])
    assert (await b.produce(b"m2", acks=-1)).error_code == 0
    await wait_until_async(lambda: in_step(a, b), "A and B in step")
    assert a.log() == b.log()
    assert await b.consume() == [b"m0", b"m1", b"m2"]


async def test_seed_3_4_divergent_tail_is_replaced(cluster: tuple[Node, Node, Controller]) -> None:
    a, b, ctl = cluster
    ctl.publish(leader=A, epoch=0, isr=[A, B])
    assert (await a.produce(b"m0", acks=-1)).error_code == 0
    assert (await a.produce(b"m1", acks=-1)).error_code == 0
    await checkpoint_committed(a, b, 2)
    # B is gone; A alone takes m2 (acks=1: never acknowledged to an acks=all producer).
    await b.crash()
    assert (await a.produce(b"m2", acks=1)).error_code == 0
    await a.crash()

    # B restarts first and leads epoch 1; a different m2 is written at offset 2.
    await b.start()
    ctl.publish(leader=B, epoch=1, isr=[B])
    written = await b.produce(b"m2-new", acks=-1)
    assert (written.error_code, written.base_offset) == (0, 2)

    # A returns with its own m2 at offset 2 (same offset, different record).
    await a.start()
    ctl.publish(leader=B, epoch=1, isr=[B, A])
    await wait_until_async(lambda: in_step(a, b), "A and B in step")
    assert a.log() == b.log()
    assert await b.consume() == [b"m0", b"m1", b"m2-new"]
    assert (await b.produce(b"m3", acks=-1)).error_code == 0
    await wait_until_async(lambda: in_step(a, b), "A and B in step")
    assert a.log() == b.log()


async def test_seed_3_5_2_new_leader_that_lost_its_tail(
    cluster: tuple[Node, Node, Controller],
) -> None:
    """B lost m1 in the crash (unflushed), leads epoch 1 and writes m1' at offset 1;
    A must drop its m1 when it returns (OffsetForLeaderEpoch(0) answers 1)."""
    a, b, ctl = cluster
    ctl.publish(leader=A, epoch=0, isr=[A, B])
    assert (await a.produce(b"m0", acks=-1)).error_code == 0
    assert (await a.produce(b"m1", acks=-1)).error_code == 0
    await checkpoint_committed(a, b, 2)  # A restarts believing 2 records are committed
    await b.crash()
    await a.crash()
    segment = sorted((b.dir / f"{TOPIC}-0").glob("*.log"))[-1]
    data = segment.read_bytes()
    first_batch = 12 + int.from_bytes(data[8:12], "big")
    segment.write_bytes(data[:first_batch])  # the OS never wrote B's copy of m1

    await b.start()
    ctl.publish(leader=B, epoch=1, isr=[B])
    assert (await b.state()).log_end_offset == 1
    assert (await b.produce(b"m1-new", acks=-1)).base_offset == 1
    await a.start()
    reopened = a.log_manager.get_log(TOPIC, 0)
    assert reopened is not None and reopened.high_watermark == 2  # truncating there keeps m1
    ctl.publish(leader=B, epoch=1, isr=[B, A])
    await wait_until_async(lambda: in_step(a, b), "A and B in step")
    assert a.log() == b.log()
    assert await b.consume() == [b"m0", b"m1-new"]


async def test_follower_fetch_against_a_dead_leader_does_not_truncate(
    cluster: tuple[Node, Node, Controller],
) -> None:
    a, b, ctl = cluster
    ctl.publish(leader=A, epoch=0, isr=[A, B])
    for i in range(3):
        assert (await a.produce(b"x%d" % i, acks=-1)).error_code == 0
    await a.crash()
    await asyncio.sleep(0.5)  # the scenario: a window in which B's fetcher keeps failing
    state = await b.state()
    assert (state.log_end_offset, state.is_leader) == (3, False)
