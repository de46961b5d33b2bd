"""Cut the partition leader off the rest of the cluster with real network namespaces.

Each storage node and the controller run in a network namespace of their own on a
private bridge (see :mod:`netns`); the gateway and the test stay in the root namespace
on 127.0.0.1 and reach the namespaces through one veth. The test drops all traffic
between the leader and the controller and the other storage nodes, but not the root
namespace, so a stale client path to the old leader stays open: that is the
split-brain case. Then:

- the controller elects a new leader from the ISR (a higher leader epoch);
- the old leader, which cannot reach its followers, never acknowledges an acks=all
  write (its high watermark cannot move) — while an acks=1 write it still takes;
- the producer keeps writing through the new leader;
- after healing, the old leader rejoins as a follower, truncates what only it had
  (the acks=1 record), and every acknowledged message is there exactly once.

Skips with the reason when namespaces cannot be made (not root, no ``ip``/``iptables``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from fault_tools import (
    NumberedProducer,
    explain,
    partition_state,
    read_everything,
    verify,
    wait_full_isr,
)
from helpers.batches import producer_batch
from helpers.waiting import wait_until
from netns import PrivateNetwork, unavailable_reason

from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import storage_pb2, storage_pb2_grpc
from odradek.tools.launcher import Cluster, Placement

STORAGE = ["storage-100", "storage-101", "storage-102"]
MARKER = -1  # the key of the acks=1 record only the cut-off leader gets

_reason = unavailable_reason()
pytestmark = pytest.mark.skipif(_reason is not None, reason=_reason or "")


@pytest.fixture
def network() -> Iterator[PrivateNetwork]:
    net = PrivateNetwork()
    try:
        net.create(["controller", *STORAGE])
        yield net
    finally:
        net.remove()


@pytest.fixture
def cluster(network: PrivateNetwork, cluster_factory: Callable[..., Cluster]) -> Cluster:
    placement = {
        name: Placement(network.ns(name), network.address(name))
        for name in ["controller", *STORAGE]
    }
    return cluster_factory(
        storage_nodes=3,
        replication_factor=3,
        with_groups=False,
        placement=placement,
        settings={"min.insync.replicas": "2", "replica.lag.time.max.ms": "3000"},
    )


def batch(key: int, value: bytes) -> bytes:
    return bytes(producer_batch([(int(time.time() * 1000), str(key).encode(), value)]))


def produce_direct(
    address: str, topic: str, acks: int, timeout_ms: int
) -> storage_pb2.ProducePartitionResult:
    async def call() -> storage_pb2.ProducePartitionResult:
        async with grpc.aio.insecure_channel(address) as channel:
            response = await storage_pb2_grpc.StorageStub(channel).Produce(
                storage_pb2.ProduceRequest(
                    acks=acks,
                    timeout_ms=timeout_ms,
                    partitions=[
                        storage_pb2.ProducePartition(
                            topic=topic, partition=0, records=batch(MARKER, b"stale")
                        )
                    ],
                ),
                timeout=timeout_ms / 1000 + 10,
            )
            return response.partitions[0]

    return asyncio.run(call())


def log_end_offsets(cluster: Cluster, topic: str) -> dict[str, int]:
    async def describe(name: str) -> int:
        async with grpc.aio.insecure_channel(cluster.grpc_address(name)) as channel:
            response = await storage_pb2_grpc.StorageStub(channel).DescribePartitions(
                storage_pb2.DescribePartitionsRequest(), timeout=5
            )
        return next(p.log_end_offset for p in response.partitions if p.topic == topic)

    return {name: asyncio.run(describe(name)) for name in STORAGE}


def test_cut_off_leader_is_replaced_and_loses_nothing_acknowledged(
    cluster: Cluster, network: PrivateNetwork, unique_topic: str
) -> None:
    from fault_tools import create_topic

    create_topic(cluster.bootstrap_servers, unique_topic, 1, 3)
    wait_full_isr(cluster, unique_topic, 1)
    old = partition_state(cluster, unique_topic, 0)
    old_name = f"storage-{old.leader}"
    others = [n for n in STORAGE if n != old_name]
    producer = NumberedProducer(
        cluster.bootstrap_servers, unique_topic, rate=200, config={"request.timeout.ms": 4000}
    ).start()
    try:
        wait_until(lambda: producer.acked_count() > 100, "the first acks", timeout=20)
        network.cut(old_name, ["controller", *others])
        cut_at = time.monotonic()

        # The controller replaces the leader it no longer hears from.
        wait_until(
            lambda: partition_state(cluster, unique_topic, 0).leader not in (-1, old.leader),
            "a new leader",
        )
        new = partition_state(cluster, unique_topic, 0)
        assert new.leader_epoch > old.leader_epoch and old.leader not in new.isr
        elected_after = time.monotonic() - cut_at

        # The old leader still believes it leads, but cannot get acks=all writes replicated.
        stale = produce_direct(cluster.grpc_address(old_name), unique_topic, -1, 2000)
        assert stale.error_code in (
            ErrorCode.REQUEST_TIMED_OUT,
            ErrorCode.NOT_ENOUGH_REPLICAS,
            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ), stale
        diverging = produce_direct(cluster.grpc_address(old_name), unique_topic, 1, 2000)
        assert diverging.error_code == 0  # acks=1 on the wrong side: never acknowledged to ISR

        acked_before = producer.acked_count()
        wait_until(
            lambda: producer.acked_count() > acked_before + 200,
            "acks via the new leader",
            timeout=30,
        )
        network.heal(old_name)
        wait_full_isr(cluster, unique_topic, 1, timeout=60)
        healed = producer.acked_count()
        wait_until(
            lambda: producer.acked_count() > healed + 200, "acks with the healed replica in the ISR"
        )
    finally:
        producer.stop()
    assert not producer.errors, producer.errors
    wait_until(
        lambda: len(set(log_end_offsets(cluster, unique_topic).values())) == 1,
        "every replica at the same log end offset",
        timeout=30,
    )
    everything = read_everything(cluster.bootstrap_servers, unique_topic, 1)
    assert all(seq != MARKER for _, seq in everything.get(0, [])), "divergent record survived"
    problems = verify(producer.acked, everything)
    assert not problems, (problems[:20], explain(cluster, unique_topic, problems, producer))
    assert elected_after < 15
