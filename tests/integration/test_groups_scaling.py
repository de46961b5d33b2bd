"""Coordinator shards moving under load: three coordinators, three groups consuming
and committing continuously while one coordinator stops gracefully, a new one joins
and another is killed. Every group keeps committing after each change and is Stable
again within two session timeouts of it; a committed offset only ever goes back to one
a consumer of the group itself committed (a commit librdkafka re-sends), and what was
committed before the moves is still there at the end."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import confluent_kafka
import grpc
import pytest
from helpers.waiting import wait_until
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from odradek.group_shard import coordinator_of, group_shard
from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc
from odradek.tools.launcher import (
    COORDINATOR_BASE_ID,
    Cluster,
    ServiceSpec,
    start_process,
    wait_ready,
)

pytestmark = pytest.mark.slow

SESSION_TIMEOUT_MS = 6000
PARTITIONS = 6


@pytest.fixture
def cluster(cluster_factory: Callable[..., Cluster]) -> Cluster:
    return cluster_factory(coordinators=3)


def metadata(cluster: Cluster) -> common_pb2.ClusterMetadata:
    port = cluster.service("controller").ports["grpc"]
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)
        return stub.GetMetadata(controller_pb2.GetMetadataRequest(), timeout=10)


def owner(cluster: Cluster, group: str) -> int:
    md = metadata(cluster)
    return coordinator_of(md, group_shard(group, len(md.coordinator_shards)))[0]


def shard_owners(cluster: Cluster) -> set[int]:
    return {s.coordinator_id for s in metadata(cluster).coordinator_shards}


class Load:
    """A producer, three groups of two consumers each, and a watcher of commits."""

    def __init__(self, bootstrap: str, topic: str, groups: list[str]) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.groups = groups
        self.stop = threading.Event()
        self.high: dict[tuple[str, int], int] = {}
        # (group, partition) -> the offsets consumers were told they committed; what the
        # watcher saw go backwards: (group, partition, from, to, when).
        self.acked: dict[tuple[str, int], list[int]] = {}
        self.backwards: list[tuple[str, int, int, int, str]] = []
        self.consumed = dict.fromkeys(groups, 0)
        self.phase = "start"  # named in reports: which change the load was living through
        self.threads = [threading.Thread(target=self._produce, daemon=True)]
        self.threads += [
            threading.Thread(target=self._consume, args=(g,), daemon=True) for g in groups
        ]
        self.threads.append(threading.Thread(target=self._watch, daemon=True))
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        i = 0
        while not self.stop.is_set():
            producer.send(self.topic, f"v{i}".encode(), partition=i % PARTITIONS)
            i += 1
            time.sleep(0.005)  # pacing: about 200 records a second
        producer.flush()
        producer.close()

    def _consume(self, group: str) -> None:
        config = {
            "bootstrap.servers": self.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "on_commit": lambda err, parts: self._committed(group, err, parts),
        }
        consumers = [confluent_kafka.Consumer(config) for _ in range(2)]
        for c in consumers:
            c.subscribe([self.topic])
        while not self.stop.is_set():
            for c in consumers:
                msg = c.poll(0.05)
                if msg is not None and msg.error() is None:
                    self.consumed[group] += 1
        for c in consumers:
            c.close()

    def _committed(
        self,
        group: str,
        err: confluent_kafka.KafkaError | None,
        parts: list[confluent_kafka.TopicPartition],
    ) -> None:
        if err is None:
            for p in parts:
                if p.error is None:
                    self.acked.setdefault((group, p.partition), []).append(p.offset)

    def resent(self, group: str, partition: int, after: int) -> bool:
        """A consumer of ``group`` was told it committed ``after``: a move back to it is a
        re-sent commit landing last. (Not "told after the higher one": the answers to
        two commits on two connections may arrive in either order.)"""
        return after in self.acked.get((group, partition), [])

    def unexplained_backwards(self) -> list[str]:
        """Backward moves to an offset no consumer of the group was told it committed.

        A move back to an acknowledged commit is the client's doing, not the cluster's:
        librdkafka defers an auto-commit that failed with NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS while a shard moves and sends it again once the
        coordinator is back, after newer commits of the same member and generation may
        have landed (Kafka stores what is committed last, and its Java consumer does not
        retry commitAsync for exactly this reason: KafkaConsumer#commitAsync)."""
        return [
            f"{g} p{p}: {before} -> {after} ({when})"
            for g, p, before, after, when in self.backwards
            if not self.resent(g, p, after)
        ]

    def _watch(self) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        while not self.stop.is_set():
            try:
                found = admin.list_group_offsets({g: None for g in self.groups})
            except Exception:  # coordinator moving: retriable
                time.sleep(0.1)  # the watcher's polling interval
                continue
            for g, offsets in found.items():
                for tp, o in offsets.items():
                    key = (g, tp.partition)
                    if o.offset < self.high.get(key, -1):
                        when = f"{self.phase}, {time.strftime('%H:%M:%S')}"
                        self.backwards.append((g, tp.partition, self.high[key], o.offset, when))
                    self.high[key] = max(self.high.get(key, -1), o.offset)
            time.sleep(0.1)  # the watcher's polling interval
        admin.close()

    def committed(self) -> dict[str, int]:
        """Per group, the sum of the highest committed offsets seen so far."""
        out = dict.fromkeys(self.groups, -1)
        for (g, _p), offset in list(self.high.items()):  # a copy: the watcher thread writes
            out[g] = max(out[g], 0) + offset
        return out

    def wait_commits_advance(self, timeout: float = 20.0) -> None:
        """Commits keep landing: every group's committed offsets grow within ``timeout``
        (a group that has committed nothing yet must commit)."""
        start = self.committed()

        def advanced() -> dict[str, int] | None:
            now = self.committed()
            return now if all(now[g] > start[g] for g in self.groups) else None

        wait_until(advanced, "every group's commits to advance", timeout=timeout)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def all_stable(bootstrap: str, groups: list[str], within: float) -> float:
    """Seconds until every group is Stable with two members (fails after ``within``)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    started = time.monotonic()

    def stable() -> dict[str, tuple[str, int]] | None:
        d = admin.describe_groups(groups)
        states = {g: (d[g]["group_state"], len(d[g]["members"])) for g in groups}
        return states if all(v == ("Stable", 2) for v in states.values()) else None

    try:
        wait_until(
            stable,
            "every group Stable with two members",
            timeout=within,
            interval=0.1,
            ignoring=(KafkaError, KeyError),  # a coordinator moving
        )
        return time.monotonic() - started
    finally:
        admin.close()


def add_coordinator(cluster: Cluster, node_id: int) -> None:
    template = cluster.service(f"coordinator-{COORDINATOR_BASE_ID}").spec
    settings = dict(template.settings)
    settings["node.id"] = str(node_id)
    spec = ServiceSpec(
        f"coordinator-{node_id}",
        "coordinator",
        "coordinator",
        settings,
        template.data_dir.parent / f"coordinator-{node_id}",
    )
    svc = start_process(spec, cluster.run_dir, cluster.log_dir)
    cluster.services.append(svc)
    wait_ready([svc], 60)


def test_coordinators_come_and_go_under_load(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap_servers
    topic = f"scale-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    # Three groups on three different coordinators.
    groups: list[str] = []
    owners: set[int] = set()
    while len(groups) < 3:
        g = f"scale-{uuid.uuid4().hex[:6]}"
        o = owner(cluster, g)
        if o not in owners:
            owners.add(o)
            groups.append(g)
    load = Load(bootstrap, topic, groups)
    limit = 2 * SESSION_TIMEOUT_MS / 1000.0
    try:
        all_stable(bootstrap, groups, 30)
        load.wait_commits_advance()  # every group has committed by now
        # 1. a coordinator stops gracefully (its shards move at once)
        load.phase = "1: a coordinator stops"
        victim = owner(cluster, groups[0])
        stop = cluster.service(f"coordinator-{victim}")
        stop.process.terminate()
        stop.process.wait(20)
        wait_until(lambda: owner(cluster, groups[0]) != victim, "the shard to move", timeout=limit)
        assert all_stable(bootstrap, groups, limit) < limit
        before = sum(load.consumed.values())
        load.wait_commits_advance()
        assert sum(load.consumed.values()) > before, "consumption stalled"
        # 2. a new coordinator joins (shards are rebalanced onto it)
        load.phase = "2: a coordinator joins"
        add_coordinator(cluster, COORDINATOR_BASE_ID + 3)
        wait_until(
            lambda: COORDINATOR_BASE_ID + 3 in shard_owners(cluster),
            "shards on the new coordinator",
            timeout=limit,
        )
        assert all_stable(bootstrap, groups, limit) < limit
        load.wait_commits_advance()
        # 3. another coordinator dies without a word (detected by its missed heartbeats)
        load.phase = "3: a coordinator is killed"
        victim = owner(cluster, groups[1])
        killed = cluster.service(f"coordinator-{victim}")
        killed.process.kill()
        killed.process.wait(10)
        wait_until(lambda: owner(cluster, groups[1]) != victim, "the shard to move", timeout=limit)
        assert all_stable(bootstrap, groups, limit) < limit
        load.wait_commits_advance()
    finally:
        load.close()
    # Committed offsets only go back to what a consumer itself committed (see
    # Load.unexplained_backwards): the cluster never serves an offset nobody committed.
    assert not load.unexplained_backwards(), (load.unexplained_backwards(), load.backwards)
    assert all(n > 0 for n in load.consumed.values())
    # Offsets committed before the moves are all still there: the last commit of each
    # partition is the highest seen, or one a consumer itself committed later (a re-sent
    # commit, as above).
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    final = admin.list_group_offsets({g: None for g in groups})
    admin.close()
    for (g, p), high in load.high.items():
        last = final[g][TopicPartition(topic, p)].offset
        assert last >= high or load.resent(g, p, last), (g, p, last, high)
