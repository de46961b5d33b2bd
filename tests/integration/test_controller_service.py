"""The controller as a real process: registration, topics, configs, watch, failures, kill -9."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import grpc
import pytest
from helpers.waiting import wait_until_async

from odradek.controller_client import ControllerClient, ControllerUnavailable, Membership
from odradek.rpc.channel import open_sync_channel
from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc
from odradek.tools.launcher import Cluster

NodeKind = common_pb2.NodeKind
NodeState = common_pb2.NodeState

HEARTBEAT_MS = 100
SESSION_MS = 1500


class ControllerProcess:
    """A cluster of one controller and nothing else (the launcher's, from the conftest's
    ``cluster_factory``): these tests play every other service over gRPC."""

    def __init__(self, start: Callable[..., Cluster], **settings: str) -> None:
        self.cluster = start(
            storage_nodes=0,
            gateways=0,
            with_groups=False,
            settings={
                "broker.heartbeat.interval.ms": str(HEARTBEAT_MS),
                "broker.session.timeout.ms": str(SESSION_MS),
                **settings,
            },
        )

    @property
    def ports(self) -> dict[str, int]:
        return self.cluster.service("controller").ports

    @property
    def address(self) -> str:
        return self.cluster.grpc_address("controller")

    def start(self) -> None:
        """Start it again (same address, same metadata store) after :meth:`kill9`."""
        self.cluster.restart("controller")

    def kill9(self) -> None:
        process = self.cluster.service("controller").process
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture
def controller(cluster_factory: Callable[..., Cluster]) -> ControllerProcess:
    return ControllerProcess(cluster_factory)


def node(node_id: int, kind: common_pb2.NodeKind, port: int = 0) -> common_pb2.Node:
    return common_pb2.Node(node_id=node_id, kind=kind, host="127.0.0.1", grpc_port=port)


class Watcher:
    """Follows WatchMetadata in the background and lets the test wait for a condition."""

    def __init__(self, client: ControllerClient) -> None:
        self.client = client
        self.versions: list[int] = []
        self.latest = common_pb2.ClusterMetadata()
        self._changed = asyncio.Condition()
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(client.watch(self._on, self._stop))

    async def _on(self, snapshot: common_pb2.ClusterMetadata) -> None:
        self.versions.append(snapshot.version)
        self.latest = snapshot
        async with self._changed:
            self._changed.notify_all()

    async def wait(
        self, predicate: Callable[[common_pb2.ClusterMetadata], bool], timeout: float = 5.0
    ) -> common_pb2.ClusterMetadata:
        async with asyncio.timeout(timeout):
            async with self._changed:
                await self._changed.wait_for(lambda: predicate(self.latest))
        return self.latest

    async def close(self) -> None:
        self._stop.set()
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task


@asynccontextmanager
async def connected(address: str) -> AsyncIterator[ControllerClient]:
    client = ControllerClient(address)
    try:
        yield client
    finally:
        await client.close()


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return response.read().decode()


def find_topic(md: common_pb2.ClusterMetadata, name: str) -> common_pb2.Topic | None:
    return next((t for t in md.topics if t.name == name), None)


def topic_of(md: common_pb2.ClusterMetadata, name: str) -> common_pb2.Topic:
    topic = find_topic(md, name)
    assert topic is not None, f"no topic {name} in metadata version {md.version}"
    return topic


def leader_of(md: common_pb2.ClusterMetadata, name: str, partition: int = 0) -> int | None:
    topic = find_topic(md, name)
    return (
        None
        if topic is None or len(topic.partitions) <= partition
        else topic.partitions[partition].leader
    )


def node_state(md: common_pb2.ClusterMetadata, node_id: int) -> int:
    return next(
        (n.state for n in md.nodes if n.node_id == node_id), NodeState.NODE_STATE_UNSPECIFIED
    )


async def create(
    client: ControllerClient, *topics: controller_pb2.CreatableTopic, timeout: float = 30.0
) -> list[controller_pb2.TopicResult]:
    response = await client.call(
        lambda s: s.CreateTopics, controller_pb2.CreateTopicsRequest(topics=topics), timeout=timeout
    )
    return list(response.results)


async def test_register_topics_configs_and_watch(controller: ControllerProcess) -> None:
    async with connected(controller.address) as client:
        members = [
            Membership(client, node(100, NodeKind.STORAGE, 7100)),
            Membership(client, node(101, NodeKind.STORAGE, 7101)),
            Membership(client, node(0, NodeKind.GATEWAY)),
        ]
        for m in members:
            await m.register()
            m.start()
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", members[0].cluster_id)
        watcher = Watcher(client)
        md = await watcher.wait(lambda md: len(md.nodes) == 3)
        assert {n.state for n in md.nodes} == {NodeState.ONLINE}
        assert md.cluster_configs["num.partitions"] == "1"
        assert md.cluster_configs["log.segment.bytes"] == "1073741824"
        assert len(md.coordinator_shards) == 50

        results = await create(
            client,
            controller_pb2.CreatableTopic(
                name="orders",
                num_partitions=3,
                replication_factor=2,
                configs={"retention.ms": "3600000"},
            ),
            controller_pb2.CreatableTopic(name="bad name", num_partitions=1, replication_factor=1),
            controller_pb2.CreatableTopic(name="wide", num_partitions=1, replication_factor=3),
            controller_pb2.CreatableTopic(name="dflt", num_partitions=-1, replication_factor=-1),
        )
        assert [r.error_code for r in results] == [0, 17, 38, 0]
        assert results[2].error_message == "Replication factor: 3 larger than available brokers: 2."
        assert len(results[0].topic_id) == 16 and results[0].configs["retention.ms"] == "3600000"
        assert (results[3].num_partitions, results[3].replication_factor) == (1, 1)
        md = await watcher.wait(lambda md: find_topic(md, "orders") is not None)
        orders = topic_of(md, "orders")
        assert orders is not None and bytes(orders.topic_id) == results[0].topic_id
        assert all(
            len(p.replicas) == 2 and p.leader == p.replicas[0] and list(p.isr) == list(p.replicas)
            for p in orders.partitions
        )
        again = await create(client, controller_pb2.CreatableTopic(name="orders", num_partitions=1))
        assert again[0].error_code == 36

        version = md.version
        grown = await client.call(
            lambda s: s.CreatePartitions,
            controller_pb2.CreatePartitionsRequest(
                topics=[
                    controller_pb2.PartitionCountChange(topic="orders", count=5),
                    controller_pb2.PartitionCountChange(topic="dflt", count=0),
                ]
            ),
        )
        assert [r.error_code for r in grown.results] == [0, 37]
        md = await watcher.wait(lambda md: leader_of(md, "orders", 4) is not None)
        assert md.version > version

        op = controller_pb2.ConfigChange
        altered = await client.call(
            lambda s: s.AlterConfigs,
            controller_pb2.AlterConfigsRequest(
                resources=[
                    controller_pb2.ConfigResourceChange(
                        type=controller_pb2.TOPIC,
                        name="orders",
                        incremental=True,
                        changes=[
                            op(name="cleanup.policy", op=controller_pb2.APPEND, value="compact"),
                            op(name="retention.ms", op=controller_pb2.DELETE),
                        ],
                    ),
                    controller_pb2.ConfigResourceChange(
                        type=controller_pb2.TOPIC,
                        name="dflt",
                        incremental=False,
                        changes=[op(name="max.message.bytes", value="2048")],
                    ),
                    controller_pb2.ConfigResourceChange(
                        type=controller_pb2.TOPIC,
                        name="dflt",
                        incremental=True,
                        changes=[op(name="retention.ms", value="nope")],
                    ),
                    controller_pb2.ConfigResourceChange(
                        type=controller_pb2.BROKER,
                        name="",
                        incremental=True,
                        changes=[op(name="log.retention.ms", value="120000")],
                    ),
                ]
            ),
        )
        assert [r.error_code for r in altered.results] == [0, 0, 40, 0]
        md = await watcher.wait(lambda md: md.cluster_configs.get("log.retention.ms") == "120000")
        assert dict(topic_of(md, "orders").configs) == {"cleanup.policy": "delete,compact"}
        assert dict(topic_of(md, "dflt").configs) == {"max.message.bytes": "2048"}

        pids = await client.call(
            lambda s: s.AllocateProducerIds,
            controller_pb2.AllocateProducerIdsRequest(
                node_id=100, incarnation=members[0].incarnation
            ),
        )
        assert (pids.error_code, pids.count) == (0, 1000)
        stale = await client.call(
            lambda s: s.AllocateProducerIds,
            controller_pb2.AllocateProducerIdsRequest(node_id=100, incarnation=999),
        )
        assert stale.error_code == 77

        deleted = await client.call(
            lambda s: s.DeleteTopics,
            controller_pb2.DeleteTopicsRequest(
                names=["dflt", "ghost"], topic_ids=[results[0].topic_id]
            ),
        )
        assert [(r.name, r.error_code) for r in deleted.results] == [
            ("dflt", 0),
            ("ghost", 3),
            ("orders", 0),
        ]
        md = await watcher.wait(lambda md: not md.topics)
        # every change arrived as its own, strictly increasing version
        assert watcher.versions == sorted(set(watcher.versions)) and len(watcher.versions) >= 5

        text = await asyncio.to_thread(http_get, controller.ports["metrics"], "/metrics")
        assert "odradek_controller_active 1.0" in text
        assert f"odradek_controller_metadata_version {float(md.version)}" in text
        assert 'odradek_controller_nodes{kind="storage",state="online"} 2.0' in text
        assert (
            await asyncio.to_thread(http_get, controller.ports["metrics"], "/readyz") == "ready\n"
        )

        await watcher.close()
        for m in members:
            await m.stop()


async def test_missed_heartbeats_fence_the_node_and_move_leadership(
    controller: ControllerProcess,
) -> None:
    async with connected(controller.address) as client:
        a = Membership(client, node(100, NodeKind.STORAGE))
        b = Membership(client, node(101, NodeKind.STORAGE))
        for m in (a, b):
            await m.register()
            m.start()
        results = await create(
            client,
            controller_pb2.CreatableTopic(
                name="solo",
                assignments=[controller_pb2.ReplicaAssignment(partition=0, replicas=[101])],
                num_partitions=-1,
                replication_factor=-1,
            ),
            controller_pb2.CreatableTopic(
                name="pair",
                assignments=[controller_pb2.ReplicaAssignment(partition=0, replicas=[101, 100])],
                num_partitions=-1,
                replication_factor=-1,
            ),
        )
        assert [r.error_code for r in results] == [0, 0]
        watcher = Watcher(client)
        md = await watcher.wait(lambda md: find_topic(md, "pair") is not None)
        assert topic_of(md, "pair").partitions[0].leader == 101

        await b.stop()  # 101 stops heartbeating
        stopped = time.monotonic()
        md = await watcher.wait(lambda md: node_state(md, 101) == NodeState.OFFLINE, timeout=5)
        assert time.monotonic() - stopped < SESSION_MS / 1000 + 1.0
        solo, pair = topic_of(md, "solo").partitions[0], topic_of(md, "pair").partitions[0]
        assert (solo.leader, list(solo.isr), list(solo.offline_replicas)) == (-1, [101], [101])
        assert (pair.leader, list(pair.isr), pair.leader_epoch) == (100, [100], 1)

        # 101 comes back (a new process): it leads what it was the last ISR member of
        back = Membership(client, node(101, NodeKind.STORAGE))
        await back.register()
        back.start()
        md = await watcher.wait(lambda md: leader_of(md, "solo") == 101)
        assert topic_of(md, "solo").partitions[0].leader_epoch == 2
        assert topic_of(md, "pair").partitions[0].leader == 100

        # the leader lets 101 back into the ISR; a preferred election moves leadership home
        p = topic_of(md, "pair").partitions[0]
        alter = controller_pb2.AlterPartitionRequest(
            node_id=100,
            incarnation=a.incarnation,
            topic="pair",
            partition=0,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
            new_isr=[100, 101],
        )
        altered = await client.call(lambda s: s.AlterPartition, alter)
        assert altered.error_code == 0 and list(altered.partition.isr) == [100, 101]
        stale = await client.call(lambda s: s.AlterPartition, alter)
        assert (
            stale.error_code == 95
            and stale.partition.partition_epoch == altered.partition.partition_epoch
        )
        elected = await client.call(
            lambda s: s.ElectLeaders,
            controller_pb2.ElectLeadersRequest(
                type=controller_pb2.PREFERRED,
                partitions=[common_pb2.TopicPartition(topic="pair", partition=0)],
            ),
        )
        assert elected.results[0].error_code == 0
        await watcher.wait(lambda md: leader_of(md, "pair") == 101)

        # controlled shutdown of 101 hands "pair" back to 100 and keeps "solo"
        shut = await client.call(
            lambda s: s.ShutdownNode,
            controller_pb2.ShutdownNodeRequest(node_id=101, incarnation=back.incarnation),
        )
        assert [(tp.topic, tp.partition) for tp in shut.remaining_leaderships] == [("solo", 0)]
        md = await watcher.wait(lambda md: node_state(md, 101) == NodeState.SHUTTING_DOWN)
        assert topic_of(md, "pair").partitions[0].leader == 100
        beat = await client.call(
            lambda s: s.Heartbeat,
            controller_pb2.HeartbeatRequest(node_id=101, incarnation=back.incarnation),
        )
        assert beat.error_code == 0 and beat.shutdown_ready

        await watcher.close()
        for m in (a, back):
            await m.stop()


async def test_a_busy_event_loop_does_not_fence_the_node(controller: ControllerProcess) -> None:
    """Heartbeats come from Membership's own thread: a node whose event loop is blocked
    for twice the session timeout (a hundred partitions created with fsynced
    checkpoints on a loaded disk) keeps its session and incarnation."""
    async with connected(controller.address) as client:
        storage = Membership(client, node(100, NodeKind.STORAGE))
        await storage.register()
        storage.start()
        incarnation = storage.incarnation
        time.sleep(2 * SESSION_MS / 1000)  # noqa: ASYNC251 -- blocks the loop on purpose, as a long synchronous apply does
        md = await client.get_metadata()
        assert node_state(md, 100) == NodeState.ONLINE
        assert next(n.incarnation for n in md.nodes if n.node_id == 100) == incarnation
        watcher = Watcher(client)
        await storage.stop()  # and once it stops heartbeating, it is fenced
        await watcher.wait(lambda md: node_state(md, 100) == NodeState.OFFLINE)
        await watcher.close()


async def test_a_node_fenced_while_its_loop_is_busy_registers_again_at_once(
    controller: ControllerProcess,
) -> None:
    """A node told its session is stale registers again from its heartbeat thread and
    heartbeats the new session, while its event loop is still busy (applying the
    metadata the fencing brought). Were registration left to the loop, the node would
    stay offline until the loop was free, and each new session would expire before
    its first heartbeat (the chaos campaign's flapping node)."""
    async with connected(controller.address) as client:
        storage = Membership(client, node(100, NodeKind.STORAGE))
        await storage.register()
        storage.start()
        first = storage.incarnation
        storage.incarnation = first + 1000  # heartbeats of a session the controller lost
        time.sleep(2 * SESSION_MS / 1000)  # noqa: ASYNC251 -- the loop busy on purpose
        channel = open_sync_channel(controller.address)
        try:
            md = controller_pb2_grpc.ControllerStub(channel).GetMetadata(
                controller_pb2.GetMetadataRequest(), timeout=5
            )
        finally:
            channel.close()
        assert node_state(md, 100) == NodeState.ONLINE
        renewed = next(n.incarnation for n in md.nodes if n.node_id == 100)
        assert renewed not in (first, first + 1000) and renewed == storage.incarnation
        await asyncio.sleep(0)  # the loop learns of it
        await wait_until_async(storage.registered.is_set, "registered on the loop", timeout=5)
        await storage.stop()


async def test_kill_9_and_restart_keeps_everything(controller: ControllerProcess) -> None:
    async with connected(controller.address) as client:
        storage = Membership(client, node(100, NodeKind.STORAGE))
        await storage.register()
        storage.start()
        results = await create(
            client,
            *(
                controller_pb2.CreatableTopic(name=f"t{i}", num_partitions=2, replication_factor=1)
                for i in range(3)
            ),
        )
        assert all(r.error_code == 0 for r in results)
        pids = await client.call(
            lambda s: s.AllocateProducerIds,
            controller_pb2.AllocateProducerIdsRequest(node_id=100, incarnation=storage.incarnation),
        )
        before = await client.get_metadata()
        controller.kill9()
        controller.start()
        client.addresses = [controller.address]
        await client.close()
        after = await client.get_metadata(timeout=10)
        assert after.cluster_id == before.cluster_id
        assert after.version > before.version
        assert after.controller_epoch == before.controller_epoch + 1
        assert {t.name: bytes(t.topic_id) for t in after.topics} == {
            r.name: r.topic_id for r in results
        }
        assert [list(t.partitions) for t in after.topics] == [
            list(t.partitions) for t in before.topics
        ]
        # the node keeps its session across the controller restart (Membership keeps heartbeating)
        more = await client.call(
            lambda s: s.AllocateProducerIds,
            controller_pb2.AllocateProducerIdsRequest(node_id=100, incarnation=storage.incarnation),
        )
        assert (
            more.error_code == 0 and more.first_producer_id >= pids.first_producer_id + pids.count
        )
        await storage.stop()


async def test_kill_9_during_a_create_topics_burst(
    cluster_factory: Callable[..., Cluster],
) -> None:
    controller = ControllerProcess(cluster_factory, **{"broker.session.timeout.ms": "60000"})
    acked: list[str] = []
    async with connected(controller.address) as client:
        await client.call(
            lambda s: s.RegisterNode,
            controller_pb2.RegisterNodeRequest(node=node(100, NodeKind.STORAGE)),
        )

        async def writer(w: int) -> None:
            for i in range(10_000):
                name = f"burst-{w}-{i}"
                try:
                    results = await create(
                        client,
                        controller_pb2.CreatableTopic(
                            name=name, num_partitions=1, replication_factor=1
                        ),
                        timeout=1.0,
                    )
                except (ControllerUnavailable, grpc.aio.AioRpcError):
                    return  # the controller died under us
                assert results[0].error_code == 0
                acked.append(name)

        writers = [asyncio.get_running_loop().create_task(writer(w)) for w in range(6)]
        await wait_until_async(lambda: len(acked) >= 60, "60 acknowledged topics", interval=0.005)
        controller.kill9()
        await asyncio.gather(*writers)
    controller.start()
    async with connected(controller.address) as client:
        md = await client.get_metadata(timeout=10)
    present = {t.name for t in md.topics}
    assert set(acked) <= present  # every acknowledged CreateTopics survived
    assert len(present) - len(acked) <= 6  # at most one in flight per writer
