"""Fault campaign: seeded schedules of kill -9, SIGSTOP/SIGCONT pauses, network
partitions and full disks on 3 storage nodes (RF 3, min.insync.replicas 2) under an idempotent
acks=all producer and a consumer group committing offsets; a checker reports, per
schedule, acknowledged records lost, duplicates, per-partition order violations and
committed offsets that moved backwards (each must be 0).

A partition cuts one storage node off the controller and the other storage nodes
(iptables DROP inside its network namespace, tests/integration/netns.py) while the
gateway still reaches it: the split-brain case, where the cut-off node may still think
it leads. Partitions are scheduled only where network namespaces can be made (root,
``ip`` and ``iptables``); elsewhere the campaign runs without them and says so.

A full disk: every storage node's log directory is a small tmpfs of its own
(tests/helpers/small_disks.py), mounted before the cluster starts. The fault fills one
node's tmpfs to ENOSPC with a filler file under the running producer; the node's next
write fails, its log directory goes offline (Kafka's LogDirFailureChannel), and the
fault waits until the controller shows that node leading none of the schedule's
partitions and outside their ISRs. Healing deletes the filler and restarts the node
(kill -9 and start: an offline log directory stays offline until a restart, as in
Kafka); the schedule's end waits for it to be back in every ISR. Full disks are
scheduled only where a tmpfs can be mounted (root). They are drawn from a random
stream of their own, so the kills, pauses and partitions of every seed's schedule are
the ones that seed had before full disks were added.

``make test-chaos`` runs ``CHAOS_SCHEDULES`` schedules (default 10) from seed
``CHAOS_FIRST`` (default 0) and prints the table (without ``CHAOS_SCHEDULES`` the
campaign is skipped); the default suite runs none, the slow suite one schedule and the
full-disk test below.
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
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from fault_tools import (
    NumberedProducer,
    cluster_metadata,
    create_topic,
    create_topic_once_placeable,
    explain,
    kill9_service,
    online_storage_nodes,
    partition_state,
    read_everything,
    verify,
    wait_full_isr,
)
from helpers import small_disks
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
    # "partition" (cut off the controller and the other storage nodes for ``down``) or
    # "disk" (its log dir filled to ENOSPC; ``down`` counts from when leadership moved)
    kind: str
    target: str  # "leader" of partition 0 or "any" node
    down: float


NETWORK_UNAVAILABLE = unavailable_reason()
KINDS = ["kill", "pause"] if NETWORK_UNAVAILABLE else ["kill", "pause", "partition"]
DISK_UNAVAILABLE = small_disks.unavailable_reason()
# Each storage node's log dir: 24 schedules left 5.5 MiB in each (a 100-schedule campaign
# about 25 MiB); a full disk's filler takes the rest of it in memory for a few seconds.
DISK_SIZE = "256m"
DISK_SHARE = 0.5  # of schedules that get a full disk


def _fault(rng: random.Random, kinds: list[str]) -> Fault:
    return Fault(
        at=rng.uniform(0.5, 2.5),
        kind=rng.choice(kinds),
        target=rng.choice(["leader", "any"]),
        down=rng.uniform(0.5, 4.0),
    )


def schedule(seed: int) -> list[Fault]:
    rng = random.Random(seed)
    faults = [_fault(rng, KINDS) for _ in range(rng.randint(2, 4))]
    disk = random.Random(seed ^ 0xD15C)  # its own stream: the faults above stay the same
    if not DISK_UNAVAILABLE and disk.random() < DISK_SHARE:
        faults.insert(disk.randint(0, len(faults)), _fault(disk, ["disk"]))
    return faults


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


def fill_disk(cluster: Cluster, topic: str, name: str, mount: Path) -> None:
    """Fill ``name``'s log dir to ENOSPC and wait until the controller has moved the
    topic's leaderships and ISR places away from it (its replicas reported offline)."""
    small_disks.fill(mount)
    wait_moved_away(cluster, topic, name)


def wait_moved_away(cluster: Cluster, topic: str, name: str) -> None:
    """Until every partition of ``topic`` has ``name``'s replica offline, another leader
    and ``name`` outside its ISR (or as its last member, which Kafka keeps)."""
    node = int(name.rpartition("-")[2])

    def moved_away() -> bool:
        md = cluster_metadata(cluster)
        t = next(t for t in md.topics if t.name == topic)
        return all(
            node in p.offline_replicas
            and p.leader != node
            and (node not in p.isr or list(p.isr) == [node])
            for p in t.partitions
        )

    wait_until(
        moved_away,
        f"{topic}'s leaderships and ISR places to leave {name} (its log dir is full)",
        timeout=60,
        interval=0.2,
    )


def heal_disk(cluster: Cluster, name: str, mount: Path) -> None:
    """Delete the filler and restart ``name``: its log dir comes back online."""
    small_disks.empty(mount)
    kill9_service(cluster, name)
    cluster.restart(name)


def run_campaign_schedule(
    cluster: Cluster,
    topic: str,
    seed: int,
    network: PrivateNetwork | None = None,
    disks: dict[str, Path] | None = None,
) -> Verdict:
    rng = random.Random(seed ^ 0xC4A05)
    faults = schedule(seed)
    verdict = Verdict(seed, ", ".join(f"{f.kind}:{f.target}:{f.down:.1f}s" for f in faults))
    # The previous schedule's last pause may fence its node only now (seed 95).
    create_topic_once_placeable(cluster, topic, PARTITIONS, 3)
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
            elif fault.kind == "disk":
                assert disks, "full disks are scheduled only with small disks"
                try:
                    fill_disk(cluster, topic, name, disks[name])
                    time.sleep(fault.down)
                finally:
                    heal_disk(cluster, name, disks[name])
            elif fault.kind == "kill":
                kill9_service(cluster, name)
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
    if problems:
        verdict.notes.append(explain(cluster, topic, problems, producer))
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
def disks(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Storage node name -> its log dir, a small tmpfs mounted where the chaos cluster
    puts that node's data; empty when tmpfs cannot be mounted (no full disks then).
    Unmounted after the cluster stops (this fixture is set up before the cluster's)."""
    mounts: dict[str, Path] = {}
    if DISK_UNAVAILABLE:
        yield mounts
        return
    try:
        for name in NODES:
            mounts[name] = tmp_path / "chaos" / name
            small_disks.mount_tmpfs(mounts[name], DISK_SIZE)
        yield mounts
    finally:
        for mount in mounts.values():
            small_disks.unmount(mount)


@pytest.fixture
def chaos_cluster(
    network: PrivateNetwork | None,
    disks: dict[str, Path],
    cluster_factory: Callable[..., Cluster],
    tmp_path: Path,
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
        storage_nodes=3,
        replication_factor=3,
        settings=SETTINGS,
        placement=placement,
        data_dir=tmp_path / "chaos",
    )


def _campaign(
    cluster: Cluster,
    seeds: range,
    network: PrivateNetwork | None = None,
    disks: dict[str, Path] | None = None,
) -> list[Verdict]:
    if NETWORK_UNAVAILABLE:
        print(f"\nno network partitions in these schedules: {NETWORK_UNAVAILABLE}")
    if DISK_UNAVAILABLE:
        print(f"\nno full disks in these schedules: {DISK_UNAVAILABLE}")
    print("\n" + HEADER, flush=True)
    verdicts = []
    for seed in seeds:  # each row as its schedule ends: a campaign runs for an hour
        topic = f"chaos-{seed}-{os.getpid()}"
        verdict = run_campaign_schedule(cluster, topic, seed, network, disks)
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
    kinds = sorted({f.kind for seed in seeds for f in schedule(seed)})
    with_kind = {k: sum(any(f.kind == k for f in schedule(s)) for s in seeds) for k in kinds}
    print("schedules with " + ", ".join(f"{k}: {n}" for k, n in with_kind.items()))
    for name, mount in (disks or {}).items():
        used, total = small_disks.usage(mount)
        print(f"{name} log dir: {used / 2**20:.1f} of {total / 2**20:.0f} MiB used")
    return verdicts


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_one_chaos_schedule(
    chaos_cluster: Cluster, network: PrivateNetwork | None, disks: dict[str, Path]
) -> None:
    (verdict,) = _campaign(chaos_cluster, range(1), network, disks)
    assert verdict.acked > 0 and verdict.ok, verdict


@pytest.mark.chaos
@pytest.mark.timeout(0)
@pytest.mark.skipif("CHAOS_SCHEDULES" not in os.environ, reason="make test-chaos runs it")
def test_chaos_campaign(
    chaos_cluster: Cluster, network: PrivateNetwork | None, disks: dict[str, Path]
) -> None:
    n, first = int(os.environ["CHAOS_SCHEDULES"]), int(os.environ.get("CHAOS_FIRST") or 0)
    verdicts = _campaign(chaos_cluster, range(first, first + n), network, disks)
    bad = [v for v in verdicts if not v.ok or not v.acked]
    assert not bad, [(v.seed, v.notes) for v in bad]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(DISK_UNAVAILABLE is not None, reason=str(DISK_UNAVAILABLE))
def test_full_disk_moves_leadership_away_and_loses_nothing(
    chaos_cluster: Cluster, disks: dict[str, Path]
) -> None:
    """The leader's log dir fills up under an acks=all producer: its leaderships and ISR
    places move to the other two nodes, writes go on there (min.insync.replicas 2), and
    after the disk is emptied and the node restarted it catches up into every ISR with
    every acknowledged record read back once and in order. A topic created while the
    disk is full has that node's replicas offline from the start."""
    cluster, topic = chaos_cluster, "full-disk"
    create_topic(cluster.bootstrap_servers, topic, PARTITIONS, 3)
    wait_full_isr(cluster, topic, PARTITIONS)
    producer = NumberedProducer(cluster.bootstrap_servers, topic, rate=200).start()
    try:
        wait_until(lambda: producer.acked_count() > 200, "acks before the disk fills", timeout=60)
        name = f"storage-{partition_state(cluster, topic, 0).leader}"
        try:
            fill_disk(cluster, topic, name, disks[name])
            # A topic created now: the full node cannot create its logs (seed 62).
            create_topic(cluster.bootstrap_servers, f"{topic}-new", PARTITIONS, 3)
            wait_moved_away(cluster, f"{topic}-new", name)
            full = producer.acked_count()
            wait_until(
                lambda: producer.acked_count() > full + 200,
                f"acks from the other nodes while {name}'s disk is full",
                timeout=60,
            )
        finally:
            heal_disk(cluster, name, disks[name])
        healed = producer.acked_count()
        wait_until(lambda: producer.acked_count() > healed + 200, "acks after healing", timeout=60)
    finally:
        producer.stop()
    wait_full_isr(cluster, topic, PARTITIONS, timeout=90)
    md = cluster_metadata(cluster)
    t = next(t for t in md.topics if t.name == topic)
    assert not any(p.offline_replicas for p in t.partitions), t
    everything = read_everything(cluster.bootstrap_servers, topic, PARTITIONS)
    assert verify(producer.acked, everything) == []
    assert not producer.errors, producer.errors


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_schedule_topic_waits_for_a_fenced_node(cluster_factory: Callable[..., Cluster]) -> None:
    """A schedule's topic is created once all three nodes are placeable again: with one
    node fenced (paused past the session timeout) CreateTopics RF 3 answers
    INVALID_REPLICATION_FACTOR, which ended the campaign at seed 95 when seed 94's last
    pause fenced its node just after the schedule's checks."""
    cluster = cluster_factory(storage_nodes=3, replication_factor=3, settings=SETTINGS)
    pid = _pid(cluster, NODES[0])
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: online_storage_nodes(cluster) == 2, "the paused node fenced")
        with pytest.raises(KafkaException) as refused:
            create_topic(cluster.bootstrap_servers, "refused", PARTITIONS, 3)
        assert refused.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
        threading.Timer(1.0, os.kill, (pid, signal.SIGCONT)).start()
        create_topic_once_placeable(cluster, "placed", PARTITIONS, 3)
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_full_isr(cluster, "placed", PARTITIONS)
