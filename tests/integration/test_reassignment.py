"""Reassignment and scale-out with real processes and a real client under load.

* Every partition of a topic moves from storage nodes {100,101,102} to three nodes added
  to the running cluster {103,104,105}, while an idempotent acks=all producer
  (librdkafka) and a consumer group run: nothing acknowledged is lost or duplicated,
  the group keeps consuming, and the old nodes delete their copies.
* A throttled move copies at about the configured rate, and an unthrottled one is quick.
* kill -9 of the source leader, and of the controller, in the middle of a (throttled)
  reassignment: it completes after the restart, nothing acknowledged is lost (slow).
* ``auto.leader.rebalance.enable`` brings leadership back to preferred replicas after
  a node restarts (Kafka's imbalance check).
* A failed log directory takes only its partitions offline: their leadership moves to
  the other replica, partitions in the node's healthy directory keep theirs.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError
from fault_tools import (
    NumberedProducer,
    cluster_metadata,
    create_topic,
    partition_state,
    read_everything,
    verify,
    wait_full_isr,
)
from helpers.waiting import wait_until
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from odradek.tools.launcher import Cluster

# Slow suite (make test-slow, run by CI): data moves between storage nodes under load.
pytestmark = pytest.mark.slow

SETTINGS = {
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "3000",
    "auto.leader.rebalance.enable": "false",
    "replica.fetch.wait.max.ms": "200",
}


class GroupConsumer:
    """A consumer group member in a thread, collecting the sequence numbers it reads."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"g-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.consumer.subscribe([topic])
        self.seen: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="group-consumer")

    def start(self) -> GroupConsumer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF and msg.error().fatal():
                    self.errors.append(str(msg.error()))
                continue
            key = msg.key()
            if key is not None:
                self.seen.append((time.monotonic(), int(key)))
        self.consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def values(self) -> set[int]:
        return {seq for _t, seq in list(self.seen)}


def _admin(cluster: Cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)


def _reassign(admin: KafkaAdminClient, targets: dict[tuple[str, int], list[int]]) -> None:
    result = admin.alter_partition_reassignments(
        {TopicPartition(t, p): r for (t, p), r in targets.items()}
    )
    assert all(e is None for e in result.values()), result


def _done(cluster: Cluster, topic: str, targets: dict[tuple[str, int], list[int]]) -> bool:
    md = cluster_metadata(cluster)
    t = next(t for t in md.topics if t.name == topic)
    for (_topic, p), replicas in targets.items():
        state = t.partitions[p]
        if list(state.replicas) != replicas or state.adding_replicas or state.removing_replicas:
            return False
        if sorted(state.isr) != sorted(replicas) or state.leader not in replicas:
            return False
    return True


def _set_configs(
    admin: KafkaAdminClient, kind: ConfigResourceType, name: str, **configs: str | None
) -> None:
    ops = {
        k.replace("_", "."): (AlterConfigOp.DELETE, None) if v is None else (AlterConfigOp.SET, v)
        for k, v in configs.items()
    }
    admin.alter_configs(
        [ConfigResource(kind, name, configs=ops)], raise_on_unknown=False, incremental=True
    )


def _topic_dirs(cluster: Cluster, node: int, topic: str) -> list[str]:
    root = cluster.data_dir / f"storage-{node}"
    return sorted(
        p.name for p in root.rglob(f"{topic}-*") if p.is_dir() and not p.name.endswith("-delete")
    )


def test_move_every_partition_to_new_nodes_while_producing_and_consuming(
    cluster_factory: Callable[..., Cluster],
) -> None:
    cluster = cluster_factory(storage_nodes=3, replication_factor=3, settings=SETTINGS)
    bootstrap = cluster.bootstrap_servers
    topic = "moving"
    create_topic(bootstrap, topic, 6, 3)
    wait_full_isr(cluster, topic, 6)
    producer = NumberedProducer(bootstrap, topic, rate=300).start()
    consumer = GroupConsumer(bootstrap, topic).start()
    wait_until(lambda: len(consumer.seen) > 200, "the group consuming", timeout=60)

    for _ in range(3):
        cluster.add_storage_node()  # scale-out: 103, 104, 105 join empty
    targets = {(topic, p): [103 + (p + i) % 3 for i in range(3)] for p in range(6)}
    admin = _admin(cluster)
    _reassign(admin, targets)
    wait_until(lambda: _done(cluster, topic, targets), "every partition on 103-105", timeout=120)
    moved_at = time.monotonic()
    admin.close()

    wait_until(
        lambda: producer.acked_count() > 300 + len(producer.acked) // 2, "more acks", timeout=30
    )
    time.sleep(2)
    producer.stop()
    assert not producer.errors, producer.errors
    acked = dict(producer.acked)
    wait_until(lambda: set(acked) <= consumer.values(), "the group to read every ack", timeout=60)
    consumer.stop()
    assert not consumer.errors, consumer.errors
    assert any(t > moved_at for t, _seq in consumer.seen), "the group stopped consuming"
    assert verify(acked, read_everything(bootstrap, topic, 6)) == []
    for node in (100, 101, 102):
        wait_until(
            lambda n=node: not _topic_dirs(cluster, n, topic), f"node {node} deleted", timeout=30
        )
    assert all(_topic_dirs(cluster, n, topic) for n in (103, 104, 105))


def test_throttled_move_copies_at_about_the_configured_rate(
    cluster_factory: Callable[..., Cluster],
) -> None:
    cluster = cluster_factory(storage_nodes=3, replication_factor=1, settings=SETTINGS)
    bootstrap = cluster.bootstrap_servers
    topic = "throttled"
    admin = _admin(cluster)
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, replica_assignments={0: [100], 1: [100]})])
    wait_full_isr(cluster, topic, 2)
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20)  # rf 1
    for i in range(6000):
        producer.send(topic, b"x" * 500, partition=i % 2)
    producer.flush()
    producer.close()
    rate = 400_000
    _set_configs(
        admin, ConfigResourceType.TOPIC, topic, follower_replication_throttled_replicas="*"
    )
    _set_configs(
        admin, ConfigResourceType.BROKER, "101", follower_replication_throttled_rate=str(rate)
    )

    started = time.monotonic()
    _reassign(admin, {(topic, 0): [101]})
    wait_until(lambda: _done(cluster, topic, {(topic, 0): [101]}), "throttled move", timeout=60)
    throttled = time.monotonic() - started
    started = time.monotonic()
    _reassign(admin, {(topic, 1): [102]})
    wait_until(lambda: _done(cluster, topic, {(topic, 1): [102]}), "unthrottled move", timeout=60)
    free = time.monotonic() - started
    admin.close()
    size = 3000 * 500  # about 1.5 MB per partition, batch overhead aside
    # one second of burst, then the rate: at least (size - rate) / rate seconds
    assert throttled >= (size - rate) / rate * 0.9, (throttled, free)
    assert throttled <= size / rate * 1.5 + 3.0, (throttled, free)
    assert free < throttled / 2, (throttled, free)


def _kill(cluster: Cluster, name: str) -> None:
    svc = cluster.service(name)
    os.kill(svc.process.pid, signal.SIGKILL)
    svc.process.wait(10)


def _throttled_move_under_load(
    cluster_factory: Callable[..., Cluster], kill: Callable[[Cluster, int], None]
) -> None:
    cluster = cluster_factory(storage_nodes=4, replication_factor=2, settings=SETTINGS)
    bootstrap = cluster.bootstrap_servers
    topic = "kill9"
    admin = _admin(cluster)
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, replica_assignments={0: [100, 101], 1: [101, 100]})])
    wait_full_isr(cluster, topic, 2)
    producer = NumberedProducer(
        bootstrap, topic, rate=400, config={"batch.size": 16384, "linger.ms": 20}
    ).start()
    wait_until(lambda: producer.acked_count() > 2000, "data to move", timeout=60)
    _set_configs(
        admin, ConfigResourceType.TOPIC, topic, follower_replication_throttled_replicas="*"
    )
    for broker in ("102", "103"):
        _set_configs(
            admin, ConfigResourceType.BROKER, broker, follower_replication_throttled_rate="5000"
        )
    targets = {(topic, 0): [102, 103], (topic, 1): [103, 102]}
    _reassign(admin, targets)
    time.sleep(1.5)
    assert not _done(cluster, topic, targets), "the throttle should keep the move going"
    kill(cluster, partition_state(cluster, topic, 0).leader)
    for broker in ("102", "103"):
        _set_configs(
            admin, ConfigResourceType.BROKER, broker, follower_replication_throttled_rate=None
        )
    wait_until(
        lambda: _done(cluster, topic, targets), "the move to finish after the kill", timeout=120
    )
    admin.close()
    time.sleep(1)
    producer.stop()
    assert not producer.errors, producer.errors
    assert verify(dict(producer.acked), read_everything(bootstrap, topic, 2)) == []


@pytest.mark.slow
def test_reassignment_completes_after_kill9_of_the_source_leader(
    cluster_factory: Callable[..., Cluster],
) -> None:
    def kill_leader(cluster: Cluster, leader: int) -> None:
        _kill(cluster, f"storage-{leader}")
        time.sleep(3)  # fenced after the session timeout; the other source leads meanwhile
        cluster.restart(f"storage-{leader}")

    _throttled_move_under_load(cluster_factory, kill_leader)


@pytest.mark.slow
def test_reassignment_completes_after_kill9_of_the_controller(
    cluster_factory: Callable[..., Cluster],
) -> None:
    def kill_controller(cluster: Cluster, _leader: int) -> None:
        _kill(cluster, "controller")
        time.sleep(1)
        cluster.restart("controller")

    _throttled_move_under_load(cluster_factory, kill_controller)


def test_auto_leader_rebalance_returns_leadership_to_preferred_replicas(
    cluster_factory: Callable[..., Cluster],
) -> None:
    settings = {
        **SETTINGS,
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "1",
        "leader.imbalance.per.broker.percentage": "10",
    }
    cluster = cluster_factory(storage_nodes=3, replication_factor=2, settings=settings)
    topic = "preferred"
    create_topic(cluster.bootstrap_servers, topic, 6, 2)
    wait_full_isr(cluster, topic, 6)

    def preferred_everywhere() -> bool:
        md = cluster_metadata(cluster)
        t = next(t for t in md.topics if t.name == topic)
        return all(p.leader == p.replicas[0] for p in t.partitions)

    assert preferred_everywhere()
    svc = cluster.service("storage-100")
    svc.process.send_signal(signal.SIGTERM)  # controlled shutdown: leadership moves away
    svc.process.wait(30)
    wait_until(
        lambda: all(partition_state(cluster, topic, p).leader != 100 for p in range(6)),
        "leadership off node 100",
        timeout=30,
    )
    cluster.restart("storage-100")
    wait_full_isr(cluster, topic, 6)
    wait_until(preferred_everywhere, "leaders back on their preferred replicas", timeout=30)


def test_failed_log_dir_takes_only_its_partitions_offline(
    cluster_factory: Callable[..., Cluster],
) -> None:
    settings = {**SETTINGS, "log.flush.offset.checkpoint.interval.ms": "500"}
    cluster = cluster_factory(storage_nodes=2, replication_factor=2, log_dirs=2, settings=settings)
    bootstrap = cluster.bootstrap_servers
    topic = "disks"
    admin = _admin(cluster)
    from kafka.admin import NewTopic

    admin.create_topics(  # one replica left in sync must still take acks=all writes
        [
            NewTopic(
                topic,
                replica_assignments={p: [100, 101] for p in range(4)},
                topic_configs={"min.insync.replicas": "1"},
            )
        ]
    )
    wait_full_isr(cluster, topic, 4)
    root = cluster.data_dir / "storage-100"

    def placed() -> dict[str, list[int]] | None:
        """Which of node 100's directories holds each partition, once it holds all four.
        The controller lists a new topic's ISR as every replica at once (as Kafka does);
        the node creates the logs only when it applies that metadata."""
        found = {
            d.name: sorted(int(p.name.rsplit("-", 1)[1]) for p in d.glob(f"{topic}-*"))
            for d in (root / "d0", root / "d1")
        }
        return found if sorted(found["d0"] + found["d1"]) == list(range(4)) else None

    in_dir = wait_until(placed, "node 100 to create the topic's four logs", timeout=30)
    assert in_dir["d0"] and in_dir["d1"], in_dir
    failed = root / "d0"
    # Swap the directory away in one rename (the node keeps writing checkpoints into it,
    # so removing it file by file races with those writes), then put a file in its place:
    # every later write in d0 fails.
    gone = root / "d0-gone"
    failed.rename(gone)
    failed.write_text("this disk is gone")
    shutil.rmtree(gone, ignore_errors=True)

    wait_until(
        lambda: all(partition_state(cluster, topic, p).leader == 101 for p in in_dir["d0"]),
        "leadership of the failed directory's partitions on 101",
        timeout=30,
    )
    for p in in_dir["d1"]:
        state = partition_state(cluster, topic, p)
        assert state.leader == 100 and 100 not in state.offline_replicas
    for p in in_dir["d0"]:
        assert list(partition_state(cluster, topic, p).offline_replicas) == [100]
    dirs = {d["log_dir"]: d for d in admin.describe_log_dirs(brokers=[100])[0]["log_dirs"]}
    assert dirs[str(failed)]["error_code"] == 56  # KAFKA_STORAGE_ERROR
    assert dirs[str(root / "d1")]["error_code"] == 0
    admin.close()

    producer = NumberedProducer(bootstrap, topic, rate=200).start()
    wait_until(lambda: producer.acked_count() > 400, "writes to every partition", timeout=60)
    producer.stop()
    assert not producer.errors
    partitions_written = {p for p, _o in producer.acked.values()}
    assert partitions_written == set(range(4))
    assert verify(dict(producer.acked), read_everything(bootstrap, topic, 4)) == []
