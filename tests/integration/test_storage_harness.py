"""Node-level access to a real cluster for the storage node tests, plus tests of the
node's own lifecycle.

The cluster is the launcher's (from the conftest's ``cluster_factory``): a controller
and storage nodes as ``python -m odradek.<svc>`` subprocesses, no gateway.
:class:`Cluster` adds what these tests need beyond ``odradek up``: kill -9,
SIGSTOP/SIGCONT, SIGTERM and restart of any one node. Process control is synchronous
(module-scoped fixtures share one cluster); gRPC clients (:class:`Client`) are created
inside each async test, on that test's event loop. The other ``test_storage_*``
modules import this one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import grpc
import pytest
from helpers.waiting import wait_until_async
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from odradek.rpc.channel import open_channel
from odradek.rpc.v1 import (
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
)
from odradek.tools.launcher import STORAGE_BASE_ID, RunningService, start_process, wait_ready
from odradek.tools.launcher import Cluster as LaunchedCluster

T = TypeVar("T")

CONTROLLER_SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}
STORAGE_SETTINGS = {
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.timeout.ms": "5000",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}


# -- records ------------------------------------------------------------------------------
def make_batch(
    values: list[bytes],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp: int | None = None,
    key: bytes | None = b"k",
) -> bytes:
    """One v2 batch built by kafka-python (offsets unassigned, as a producer sends it)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for i, value in enumerate(values):
        builder.append(i, ts + i, key, value, [])
    return bytes(builder.build())


def fetch_request(topic: str, offset: int, wait_ms: int = 0) -> storage_pb2.FetchRequest:
    """A consumer's Fetch of partition 0 of ``topic`` from ``offset``, up to 1 MiB."""
    return storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            storage_pb2.FetchPartition(
                topic=topic,
                partition=0,
                fetch_offset=offset,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
                last_fetched_epoch=-1,
            )
        ],
    )


def produce_request(topic: str, acks: int) -> storage_pb2.ProduceRequest:
    """The head of a Produce to partition 0 of ``topic`` (its batches go beside it)."""
    return storage_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        partitions=[storage_pb2.ProducePartition(topic=topic, partition=0)],
    )


def decode(records: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in fetched batches (a cut-off last batch is skipped)."""
    out = []
    memory = MemoryRecords(records)
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:
            break
        for record in batch:
            out.append((record.offset, bytes(record.value or b"")))
    return out


def batch_offsets(records: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of every whole batch."""
    out = []
    pos = 0
    while pos + 61 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big", signed=True)
        length = int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        if pos + 12 + length > len(records):
            break
        last_delta = int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
        out.append((base, base + last_delta))
        pos += 12 + length
    return out


# -- processes ----------------------------------------------------------------------------
class Proc:
    """Process control of one service of a launcher cluster: signals, kill -9, SIGTERM,
    and starting it again on its data, with or without waiting for it to serve."""

    def __init__(self, cluster: LaunchedCluster, name: str) -> None:
        self.cluster = cluster
        self.name = name

    @property
    def service(self) -> RunningService:
        return self.cluster.service(self.name)

    @property
    def ports(self) -> dict[str, int]:
        return self.service.ports

    @property
    def log_file(self) -> Path:
        return self.service.log_file

    @property
    def pid(self) -> int:
        return self.service.process.pid

    @property
    def alive(self) -> bool:
        return self.service.process.poll() is None

    def start(self) -> None:
        """Start the stopped service again with its original command (not waiting)."""
        assert not self.alive, f"{self.name} is still running"
        services = self.cluster.services
        index = services.index(self.service)
        services[index] = start_process(
            self.service.spec, self.cluster.run_dir, self.cluster.log_dir
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_ready([self.service], timeout)

    def signal(self, sig: int) -> None:
        if self.alive:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """kill -9: no flush, no checkpoints, no controlled shutdown."""
        if self.alive:
            # SIGKILL alone: it ends a stopped process too. A SIGCONT first let a node
            # stopped to "stall" run for an instant and apply a fetch answer already in
            # its socket (test_seed_3_4 then saw the stalled follower holding m2).
            process = self.service.process
            process.kill()
            process.wait(10)

    def terminate(self, timeout: float = 20.0) -> float:
        """SIGTERM and wait; returns how long the graceful stop took."""
        process = self.service.process
        start = time.monotonic()
        process.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            raise AssertionError(
                f"{self.name} did not stop within {timeout}s:\n{self.tail()}"
            ) from None
        return time.monotonic() - start

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class Cluster:
    """A controller and storage nodes, no gateway: the launcher's cluster (started by
    the conftest's ``cluster_factory``) seen node by node, so a test can stop, kill,
    freeze and restart each storage node and talk to it over gRPC."""

    def __init__(self, launched: LaunchedCluster) -> None:
        self.launched = launched
        self.root = launched.data_dir
        self.controller = Proc(launched, "controller")
        self.nodes = {
            int(svc.spec.settings["node.id"]): Proc(launched, svc.spec.name)
            for svc in launched.services
            if svc.spec.kind == "storage"
        }

    @property
    def controller_address(self) -> str:
        return self.launched.grpc_address("controller")

    def address(self, node_id: int) -> str:
        return self.launched.grpc_address(self.nodes[node_id].name)

    def restart(self, node_id: int, *, wait: bool = True) -> None:
        proc = self.nodes[node_id]
        proc.kill()
        proc.start()
        if wait:
            proc.wait_ready()

    def stop(self) -> None:
        """kill -9 everything: what a test leaves on disk needs no clean shutdown."""
        for proc in [*self.nodes.values(), self.controller]:
            proc.kill()

    def logs(self) -> str:
        return "\n".join(
            f"==== {p.name}\n{p.tail(60)}" for p in [self.controller, *self.nodes.values()]
        )


# -- clients ------------------------------------------------------------------------------
class Client:
    """gRPC stubs for the controller and each storage node, on the running loop."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = open_channel(address)
        return channel

    @property
    def controller(self) -> controller_pb2_grpc.ControllerStub:
        return controller_pb2_grpc.ControllerStub(self._channel(self.cluster.controller_address))

    def node(self, node_id: int) -> storage_pb2_grpc.StorageStub:
        return storage_pb2_grpc.StorageStub(self._channel(self.cluster.address(node_id)))

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(None)

    # -- controller ---------------------------------------------------------------------
    async def metadata(self) -> common_pb2.ClusterMetadata:
        return await self.controller.GetMetadata(controller_pb2.GetMetadataRequest(), timeout=10)

    async def partition(self, topic: str, index: int = 0) -> common_pb2.Partition:
        md = await self.metadata()
        for t in md.topics:
            if t.name == topic:
                for p in t.partitions:
                    if p.partition == index:
                        return p
        raise KeyError(f"{topic}-{index}")

    async def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        rf: int = 1,
        configs: dict[str, str] | None = None,
        assignment: list[list[int]] | None = None,
    ) -> common_pb2.Topic:
        topic = controller_pb2.CreatableTopic(
            name=name,
            num_partitions=partitions if assignment is None else -1,
            replication_factor=rf if assignment is None else -1,
            configs=configs or {},
        )
        for i, replicas in enumerate(assignment or []):
            topic.assignments.append(
                controller_pb2.ReplicaAssignment(partition=i, replicas=replicas)
            )
        response = await self.controller.CreateTopics(
            controller_pb2.CreateTopicsRequest(topics=[topic]), timeout=10
        )
        result = response.results[0]
        assert result.error_code == 0, (result.error_code, result.error_message)
        md = await self.metadata()
        created = next(t for t in md.topics if t.name == name)
        # Wait until every replica hosts its partition and each leader serves it.
        for p in created.partitions:
            for node_id in p.replicas:
                await self.wait_hosted(node_id, name, p.partition, leader=(node_id == p.leader))
        return created

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None]) -> None:
        resource = controller_pb2.ConfigResourceChange(
            type=controller_pb2.TOPIC, name=name, incremental=True
        )
        for key, value in changes.items():
            change = controller_pb2.ConfigChange(
                name=key, op=controller_pb2.SET if value is not None else controller_pb2.DELETE
            )
            if value is not None:
                change.value = value
            resource.changes.append(change)
        response = await self.controller.AlterConfigs(
            controller_pb2.AlterConfigsRequest(resources=[resource]), timeout=10
        )
        assert response.results[0].error_code == 0, response

    # -- storage ------------------------------------------------------------------------
    async def describe(
        self, node_id: int, topic: str, index: int = 0
    ) -> storage_pb2.PartitionState:
        response = await self.node(node_id).DescribePartitions(
            storage_pb2.DescribePartitionsRequest(
                partitions=[common_pb2.TopicPartition(topic=topic, partition=index)]
            ),
            timeout=10,
        )
        return response.partitions[0]

    async def wait_hosted(
        self, node_id: int, topic: str, index: int, *, leader: bool, timeout: float = 15
    ) -> None:
        async def hosted() -> bool:
            try:
                state = await self.describe(node_id, topic, index)
            except grpc.aio.AioRpcError:
                return False
            return state.error_code == 0 and (state.is_leader or not leader)

        await wait_until_async(hosted, f"node {node_id} hosting {topic}-{index}", timeout=timeout)

    async def produce(
        self,
        node_id: int,
        topic: str,
        records: bytes,
        *,
        index: int = 0,
        acks: int = -1,
        timeout_ms: int = 5000,
    ) -> storage_pb2.ProducePartitionResult:
        response = await self.node(node_id).Produce(
            storage_pb2.ProduceRequest(
                acks=acks,
                timeout_ms=timeout_ms,
                partitions=[
                    storage_pb2.ProducePartition(topic=topic, partition=index, records=records)
                ],
            ),
            timeout=timeout_ms / 1000 + 10,
        )
        return response.partitions[0]

    async def fetch(
        self,
        node_id: int,
        topic: str,
        offset: int,
        *,
        index: int = 0,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 1 << 20,
        partition_max_bytes: int = 1 << 20,
        current_leader_epoch: int = -1,
        isolation_level: int = 0,
    ) -> storage_pb2.FetchPartitionResult:
        response = await self.node(node_id).Fetch(
            storage_pb2.FetchRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                partitions=[
                    storage_pb2.FetchPartition(
                        topic=topic,
                        partition=index,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max_bytes,
                        current_leader_epoch=current_leader_epoch,
                    )
                ],
            ),
            timeout=max_wait_ms / 1000 + 10,
        )
        return response.partitions[0]

    async def read_all(
        self, node_id: int, topic: str, *, index: int = 0
    ) -> list[tuple[int, bytes]]:
        """Every committed record of a partition from its leader (consumer view, up to HW)."""
        out: list[tuple[int, bytes]] = []
        offset = (await self.list_offset(node_id, topic, -2, index=index)).offset
        while True:
            result = await self.fetch(node_id, topic, offset, index=index)
            assert result.error_code == 0, result
            records = [r for r in decode(result.records) if r[0] >= offset]
            if not records:
                return out
            out.extend(records)
            offset = records[-1][0] + 1

    async def list_offset(
        self,
        node_id: int,
        topic: str,
        timestamp: int,
        *,
        index: int = 0,
        current_leader_epoch: int = -1,
    ) -> storage_pb2.ListOffsetsPartitionResult:
        response = await self.node(node_id).ListOffsets(
            storage_pb2.ListOffsetsRequest(
                partitions=[
                    storage_pb2.ListOffsetsPartition(
                        topic=topic,
                        partition=index,
                        timestamp=timestamp,
                        current_leader_epoch=current_leader_epoch,
                    )
                ]
            ),
            timeout=10,
        )
        return response.partitions[0]


async def retry(call: Callable[[], Awaitable[T]], timeout: float = 15.0) -> T:
    """Retry a storage call while the node restarts (UNAVAILABLE); other errors fail."""

    async def attempt() -> tuple[T] | None:
        try:
            return (await call(),)  # a tuple: a falsy answer is an answer too
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return None

    (result,) = await wait_until_async(attempt, "the node to answer again", timeout=timeout)
    return result


def raw_log(cluster: Cluster, node_id: int, topic: str, index: int = 0) -> bytes:
    """The bytes of every segment of a partition on one node's disk, in offset order."""
    d = cluster.root / f"storage-{node_id}" / f"{topic}-{index}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def storage_clusters(
    start: Callable[..., LaunchedCluster],
) -> Callable[..., Cluster]:
    """``make_cluster(node_ids, controller={...}, storage={...})`` on top of a
    ``cluster_factory``: storage nodes 100, 101, ... and a controller, no gateway."""

    def factory(
        node_ids: list[int],
        *,
        controller: dict[str, str] | None = None,
        storage: dict[str, str] | None = None,
    ) -> Cluster:
        assert node_ids == list(range(STORAGE_BASE_ID, STORAGE_BASE_ID + len(node_ids)))
        launched = start(
            storage_nodes=len(node_ids),
            gateways=0,
            with_groups=False,
            settings={
                **CONTROLLER_SETTINGS,
                **STORAGE_SETTINGS,
                **(controller or {}),
                **(storage or {}),
            },
        )
        return Cluster(launched)

    return factory


@pytest.fixture
def make_cluster(cluster_factory: Callable[..., LaunchedCluster]) -> Callable[..., Cluster]:
    return storage_clusters(cluster_factory)


# -- the node's own lifecycle ---------------------------------------------------------------
async def test_node_registers_reports_ports_and_exposes_metrics(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster([100])
    client = Client(cluster)
    try:
        md = await client.metadata()
        node = next(n for n in md.nodes if n.node_id == 100)
        assert node.kind == common_pb2.STORAGE and node.state == common_pb2.ONLINE
        assert node.grpc_port == cluster.nodes[100].ports["grpc"]
        assert node.metrics_port == cluster.nodes[100].ports["metrics"]

        await client.create_topic("metrics-t", partitions=2)
        assert (
            await client.produce(100, "metrics-t", make_batch([b"a", b"b"]), acks=1)
        ).error_code == 0
        await client.fetch(100, "metrics-t", 0)
        url = f"http://127.0.0.1:{cluster.nodes[100].ports['metrics']}"
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
        )
        for line in (
            'odradek_log_end_offset{partition="0",topic="metrics-t"} 2.0',
            'odradek_partition_high_watermark{partition="0",topic="metrics-t"} 2.0',
            'odradek_log_segments{partition="1",topic="metrics-t"} 1.0',
            'odradek_partition_under_replicated{partition="0",topic="metrics-t"} 0.0',
            "odradek_storage_produce_requests_total 1.0",
            'odradek_storage_fetch_requests_total{kind="consumer"} 1.0',
        ):
            assert line in body, line
        assert 'odradek_storage_bytes_in_total{topic="metrics-t"}' in body
        assert 'odradek_storage_bytes_out_total{topic="metrics-t"}' in body
        assert "odradek_log_size_bytes" in body and "odradek_log_start_offset" in body
        assert "odradek_isr_shrinks_total" in body and "odradek_isr_expands_total" in body
        ready = await asyncio.to_thread(
            lambda: urllib.request.urlopen(url + "/readyz", timeout=5).status
        )
        assert ready == 200
    finally:
        await client.close()


async def test_sigterm_moves_leadership_away_before_stopping(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster([100, 101])
    client = Client(cluster)
    try:
        await client.create_topic("cs", rf=2, assignment=[[100, 101]])
        before = await client.partition("cs")
        assert before.leader == 100
        assert (await client.produce(100, "cs", make_batch([b"x"]))).error_code == 0
        took = await asyncio.to_thread(cluster.nodes[100].terminate)
        after = await client.partition("cs")
        assert after.leader == 101 and after.leader_epoch > before.leader_epoch
        assert took < 5.0, took
        log_text = cluster.nodes[100].log_file.read_text()
        assert "controlled shutdown did not finish" not in log_text
        # The stop was clean: the next start skips recovery and has everything.
        cluster.nodes[100].start()
        cluster.nodes[100].wait_ready()
        await client.wait_hosted(100, "cs", 0, leader=False)
        state = await client.describe(100, "cs")
        assert state.log_end_offset == 1
    finally:
        await client.close()


async def test_sigterm_with_the_controller_gone_is_bounded(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster([100, 101], storage={"controlled.shutdown.timeout.ms": "1500"})
    client = Client(cluster)
    try:
        await client.create_topic("cs2", rf=2, assignment=[[100, 101]])
        cluster.controller.kill()
        for node_id in (100, 101):
            took = await asyncio.to_thread(cluster.nodes[node_id].terminate)
            assert took < 6.0, took
    finally:
        await client.close()
