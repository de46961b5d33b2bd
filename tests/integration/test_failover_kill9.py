"""kill -9 the partition leader under an idempotent acks=all producer; nothing acknowledged
may be lost, duplicated or reordered.

Three storage nodes, replication factor 3, ``min.insync.replicas`` 2, a real client
(confluent-kafka / librdkafka) writing numbered messages. A seeded schedule kills the
storage node leading a partition (found in the controller's metadata, killed by the pid
the launcher recorded) at random moments and restarts it after a random pause, one node
down at a time; then every partition is read back from the start. The default run has
one short schedule; the slow suite repeats with 20 seeds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from fault_tools import (
    NumberedProducer,
    create_topic,
    explain,
    partition_state,
    read_everything,
    verify,
    wait_full_isr,
)
from helpers.waiting import wait_until

from odradek.tools.launcher import Cluster

PARTITIONS = 2
SETTINGS = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "3000"}


@dataclass(frozen=True)
class Kill:
    at: float  # seconds after the producer started (or after the previous restart)
    # "leader" of ``partition``, "any" storage node, "two" (the leader and another:
    # the partition is unavailable, never lossy) or "all" three at once
    target: str
    partition: int
    down: float  # seconds between kill -9 and restart


def schedule(seed: int, kills: int | None = None) -> list[Kill]:
    rng = random.Random(seed)
    n = kills if kills is not None else rng.randint(1, 3)
    return [
        Kill(
            at=rng.uniform(0.5, 3.0),
            target=rng.choices(["leader", "any", "two", "all"], [60, 15, 15, 10])[0],
            partition=rng.randrange(PARTITIONS),
            down=rng.uniform(0.3, 4.5),
        )
        for _ in range(n)
    ]


def kill9(cluster: Cluster, name: str) -> None:
    """kill -9 by the pid cluster.json lists (as an operator would), then reap it."""
    doc = json.loads(cluster.cluster_file.read_text())
    pid = next(s["pid"] for s in doc["services"] if s["name"] == name)
    svc = cluster.service(name)
    assert svc.process.pid == pid
    os.kill(pid, signal.SIGKILL)
    svc.process.wait(10)


def run_schedule(cluster: Cluster, topic: str, seed: int, steps: list[Kill]) -> None:
    rng = random.Random(seed ^ 0x5EED)
    create_topic(cluster.bootstrap_servers, topic, PARTITIONS, 3)
    wait_full_isr(cluster, topic, PARTITIONS)
    producer = NumberedProducer(cluster.bootstrap_servers, topic, rate=300).start()
    log: list[str] = []
    try:
        for step in steps:
            time.sleep(step.at)  # the schedule: kills at chosen moments of the write stream
            nodes = [f"storage-{100 + i}" for i in range(3)]
            leader = partition_state(cluster, topic, step.partition).leader
            first = f"storage-{leader}" if leader >= 0 else rng.choice(nodes)
            if step.target == "leader":
                names = [first]
            elif step.target == "any":
                names = [rng.choice(nodes)]
            elif step.target == "two":
                names = [first, rng.choice([n for n in nodes if n != first])]
            else:
                names = nodes
            for name in names:
                before = producer.acked_count()
                kill9(cluster, name)
                log.append(f"{time.monotonic():.1f} kill -9 {name} (acked so far {before})")
                if len(names) > 1 and name != names[-1]:
                    time.sleep(rng.uniform(0.0, 1.0))  # the schedule: kills a moment apart
            time.sleep(step.down)  # the schedule: how long the nodes stay down
            for name in rng.sample(names, len(names)):
                cluster.restart(name)
                log.append(f"{time.monotonic():.1f} restarted {name}")
        restarted = producer.acked_count()
        wait_until(
            lambda: producer.acked_count() > restarted + 300,
            f"acks after the last restart ({log})",
            timeout=60,
        )
    finally:
        producer.stop()
    assert not producer.errors, (producer.errors, log)
    assert producer.acked_count() > 0, log
    wait_full_isr(cluster, topic, PARTITIONS)
    everything = read_everything(cluster.bootstrap_servers, topic, PARTITIONS)
    problems = verify(producer.acked, everything)
    assert not problems, (
        problems[:20],
        log,
        f"sent {producer.sent}, acked {len(producer.acked)}",
        explain(cluster, topic, problems, producer),
    )


@pytest.fixture
def cluster(cluster_factory: Callable[..., Cluster]) -> Cluster:
    return cluster_factory(
        storage_nodes=3, replication_factor=3, with_groups=False, settings=SETTINGS
    )


def test_leader_killed_and_restarted_under_an_idempotent_producer(
    cluster: Cluster, unique_topic: str
) -> None:
    run_schedule(cluster, unique_topic, 7, [Kill(2.0, "leader", 0, 2.5)])


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_randomized_kill_restart_schedules(cluster: Cluster, unique_topic: str, seed: int) -> None:
    run_schedule(cluster, unique_topic, seed, schedule(seed))
