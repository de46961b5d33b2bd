"""Fault campaign: seeded schedules of kill -9, SIGSTOP/SIGCONT pauses and network
partitions on 3 storage nodes (RF 3, min.insync.replicas 2) under an idempotent
acks=all producer and a consumer group committing offsets; a checker reports, per
schedule, acknowledged records lost, duplicates, per-partition order violations and
committed offsets that moved backwards (each must be 0).

A partition cuts one storage node off the controller and the other storage nodes
(iptables DROP inside its network namespace, tests/integration/netns.py) while the
gateway still reaches it: the split-brain case, where the cut-off node may still think
it leads. Partitions are scheduled only where network namespaces can be made (root,
``ip`` and ``iptables``); elsewhere the campaign runs kills and pauses alone and says so.

``make test-chaos`` runs ``CHAOS_SCHEDULES`` schedules (default 10) and prints the
table (without that variable the campaign is skipped); the default suite runs none,
the slow suite one. A full disk is not in the schedules
(tests/unit/storage/test_storage_disk_errors.py covers the storage node's answer).
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, TopicPartition
from fault_tools import (
    NumberedProducer,
    create_topic,
    partition_state,
    read_everything,
    verify,
    wait_full_isr,
)
from helpers.waiting import wait_until
from netns import PrivateNetwork, unavailable_reason

from odradek.tools.launcher import Cluster, Placement

PARTITIONS = 2
NODES = [f"storage-{100 + i}" for i in range(3)]
SETTINGS = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "3000"}


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the previous fault healed
    # "kill" (kill -9, restart after ``down``), "pause" (SIGSTOP, SIGCONT after ``down``)
    # or "partition" (cut off the controller and the other storage nodes for ``down``)
    kind: str
    target: str  # "leader" of partition 0 or "any" node
    down: float


NETWORK_UNAVAILABLE = unavailable_reason()
KINDS = ["kill", "pause"] if NETWORK_UNAVAILABLE else ["kill", "pause", "partition"]


def schedule(seed: int) -> list[Fault]:
    rng = random.Random(seed)
    return [
        Fault(
            at=rng.uniform(0.5, 2.5),
            kind=rng.choice(KINDS),
            target=rng.choice(["leader", "any"]),
            down=rng.uniform(0.5, 4.0),
        )
        for _ in range(rng.randint(2, 4))
    ]


@dataclass
class Verdict:
    seed: int
    faults: str
    acked: int = 0
    lost: int = 0
    duplicates: int = 0
    order: int = 0
    commits_backwards: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.order or self.commits_backwards)

    def row(self) -> str:
        return (
            f"{self.seed:>5} {self.acked:>7} {self.lost:>5} {self.duplicates:>5} "
            f"{self.order:>6} {self.commits_backwards:>8}  {self.faults}"
        )


HEADER = f"{'seed':>5} {'acked':>7} {'lost':>5} {'dups':>5} {'order':>6} {'commits<':>8}  faults"


class CommittingGroup(threading.Thread):
    """A consumer group member that commits after every message batch, and a watcher of
    the group's committed offsets (OffsetFetch) that records every value it sees."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.stop = threading.Event()
        self.seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}

    def run(self) -> None:
        member = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        watcher = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})
        member.subscribe([self.topic])
        last_watch = 0.0
        try:
            while not self.stop.is_set():
                msgs = member.consume(100, 0.2)
                if any(m.error() is None for m in msgs):
                    try:
                        member.commit(asynchronous=False)
                    except Exception:
                        pass
                if time.monotonic() - last_watch > 0.5:
                    last_watch = time.monotonic()
                    try:
                        parts = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
                        for tp in watcher.committed(parts, timeout=5):
                            if tp.offset >= 0:
                                self.seen[tp.partition].append(tp.offset)
                    except Exception:
                        pass
        finally:
            member.close()
            watcher.close()

    def backwards(self) -> int:
        return sum(
            1 for offsets in self.seen.values() for a, b in itertools.pairwise(offsets) if b < a
        )


def _pid(cluster: Cluster, name: str) -> int:
    return cluster.service(name).process.pid


def run_campaign_schedule(
    cluster: Cluster, topic: str, seed: int, network: PrivateNetwork | None = None
) -> Verdict:
    rng = random.Random(seed ^ 0xC4A05)
    faults = schedule(seed)
    verdict = Verdict(seed, ", ".join(f"{f.kind}:{f.target}:{f.down:.1f}s" for f in faults))
    create_topic(cluster.bootstrap_servers, topic, PARTITIONS, 3)
    wait_full_isr(cluster, topic, PARTITIONS)
    producer = NumberedProducer(cluster.bootstrap_servers, topic, rate=200).start()
    group = CommittingGroup(cluster.bootstrap_servers, topic, f"chaos-{topic}")
    group.start()
    try:
        for fault in faults:
            time.sleep(fault.at)
            leader = partition_state(cluster, topic, 0).leader
            name = f"storage-{leader}" if fault.target == "leader" and leader >= 0 else None
            name = name or rng.choice(NODES)
            if fault.kind == "partition":
                assert network is not None, "partitions are scheduled only with a network"
                network.cut(name, ["controller", *(n for n in NODES if n != name)])
                try:
                    time.sleep(fault.down)
                finally:
                    network.heal(name)
            elif fault.kind == "kill":
                svc = cluster.service(name)
                os.kill(svc.process.pid, signal.SIGKILL)
                svc.process.wait(10)
                time.sleep(fault.down)
                cluster.restart(name)
            else:
                pid = _pid(cluster, name)
                os.kill(pid, signal.SIGSTOP)
                try:
                    time.sleep(fault.down)
                finally:
                    os.kill(pid, signal.SIGCONT)
        healed = producer.acked_count()
        wait_until(lambda: producer.acked_count() > healed + 200, "acks after healing", timeout=90)
    finally:
        producer.stop()
        group.stop.set()
        group.join(30)
    wait_full_isr(cluster, topic, PARTITIONS, timeout=90)
    everything = read_everything(cluster.bootstrap_servers, topic, PARTITIONS)
    problems = verify(producer.acked, everything)
    verdict.acked = len(producer.acked)
    verdict.lost = sum("is lost" in p for p in problems)
    verdict.duplicates = sum("times:" in p for p in problems)
    verdict.order = sum(" after " in p for p in problems)
    verdict.commits_backwards = group.backwards()
    verdict.notes = problems[:10] + producer.errors
    return verdict


@pytest.fixture
def network() -> Iterator[PrivateNetwork | None]:
    """The controller and each storage node in a network namespace of its own, when
    namespaces can be made; None otherwise (no partitions are scheduled then)."""
    if NETWORK_UNAVAILABLE:
        yield None
        return
    net = PrivateNetwork()
    try:
        net.create(["controller", *NODES])
        yield net
    finally:
        net.remove()


@pytest.fixture
def chaos_cluster(
    network: PrivateNetwork | None, cluster_factory: Callable[..., Cluster]
) -> Cluster:
    placement = (
        {
            name: Placement(network.ns(name), network.address(name))
            for name in ["controller", *NODES]
        }
        if network
        else {}
    )
    return cluster_factory(
        storage_nodes=3, replication_factor=3, settings=SETTINGS, placement=placement
    )


def _campaign(
    cluster: Cluster, seeds: range, network: PrivateNetwork | None = None
) -> list[Verdict]:
    if NETWORK_UNAVAILABLE:
        print(f"\nno network partitions in these schedules: {NETWORK_UNAVAILABLE}")
    print("\n" + HEADER, flush=True)
    verdicts = []
    for seed in seeds:  # each row as its schedule ends: a campaign runs for an hour
        verdict = run_campaign_schedule(cluster, f"chaos-{seed}-{os.getpid()}", seed, network)
        verdicts.append(verdict)
        print(verdict.row(), flush=True)
        if not verdict.ok:
            print(f"  seed {seed}: {verdict.notes}", flush=True)
    totals = Verdict(-1, "totals")
    for v in verdicts:
        totals.acked += v.acked
        totals.lost += v.lost
        totals.duplicates += v.duplicates
        totals.order += v.order
        totals.commits_backwards += v.commits_backwards
    print(totals.row().replace("   -1", "  all"))
    return verdicts


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_one_chaos_schedule(chaos_cluster: Cluster, network: PrivateNetwork | None) -> None:
    (verdict,) = _campaign(chaos_cluster, range(1), network)
    assert verdict.acked > 0 and verdict.ok, verdict


@pytest.mark.chaos
@pytest.mark.timeout(0)
@pytest.mark.skipif("CHAOS_SCHEDULES" not in os.environ, reason="make test-chaos runs it")
def test_chaos_campaign(chaos_cluster: Cluster, network: PrivateNetwork | None) -> None:
    n = int(os.environ["CHAOS_SCHEDULES"])
    verdicts = _campaign(chaos_cluster, range(n), network)
    bad = [v for v in verdicts if not v.ok or not v.acked]
    assert not bad, [(v.seed, v.notes) for v in bad]
