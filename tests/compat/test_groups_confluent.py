"""Consumer groups with librdkafka (confluent-kafka) against a real cluster.

Range, roundrobin and cooperative-sticky assignors: one consumer, then three, on a
6-partition topic, every partition owned by exactly one member after every
rebalance; a member leaving and a member killed (its session times out) hand their
partitions over; committed offsets survive consumer restarts; auto.offset.reset
earliest/latest; seek; static members rejoining without a rebalance.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.tools.launcher import Cluster

pytestmark = pytest.mark.compat

PARTITIONS = 6


@pytest.fixture(scope="module")
def bootstrap(module_cluster_factory: Callable[..., Cluster]) -> str:
    """A cluster of this module's own, so its rebalances meet no other test's groups."""
    return module_cluster_factory().bootstrap_servers


def make_topic(bootstrap: str, records: int = 60) -> str:
    name = f"ck-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(name, f"v{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)
    return name


def consumer(bootstrap: str, group: str, strategy: str = "range", **extra: Any) -> Any:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "partition.assignment.strategy": strategy,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 3000,
        "heartbeat.interval.ms": 300,
        "topic.metadata.refresh.interval.ms": 1000,
        **extra,
    }
    return Consumer(config)


def owned(c: Any) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def settle(
    consumers: list[Any], done: Callable[[list[set[int]]], bool], timeout: float = 30.0
) -> list[set[int]]:
    """Poll every consumer until ``done(assignments)`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        for c in consumers:
            c.poll(0.05)
        assignments = [owned(c) for c in consumers]
        if done(assignments):
            return assignments
        assert time.monotonic() < deadline, f"assignments never settled: {assignments}"


def exactly_once(n: int) -> Callable[[list[set[int]]], bool]:
    """Every partition owned by exactly one of ``n`` members, each owning some."""

    def check(assignments: list[set[int]]) -> bool:
        flat = [p for a in assignments for p in a]
        return (
            len(assignments) == n and sorted(flat) == list(range(PARTITIONS)) and all(assignments)
        )

    return check


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_one_then_three_consumers_then_leave(bootstrap: str, strategy: str) -> None:
    topic = make_topic(bootstrap)
    group = f"g-{strategy}-{uuid.uuid4().hex[:6]}"
    members = [consumer(bootstrap, group, strategy)]
    members[0].subscribe([topic])
    try:
        assert settle(members, exactly_once(1)) == [set(range(PARTITIONS))]
        for _ in range(2):
            c = consumer(bootstrap, group, strategy)
            c.subscribe([topic])
            members.append(c)
        assignments = settle(members, exactly_once(3))
        assert all(len(a) == 2 for a in assignments)
        leaving = members.pop()
        leaving.close()
        assignments = settle(members, exactly_once(2))
        assert sorted(len(a) for a in assignments) == [3, 3]
    finally:
        for c in members:
            c.close()


KILLABLE = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "partition.assignment.strategy": sys.argv[4],
                  "session.timeout.ms": 3000, "heartbeat.interval.ms": 300})
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(0.1)
        if c.assignment():
            print("assigned", flush=True)
    """
)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_killed_member_is_replaced_after_its_session_timeout(
    bootstrap: str, strategy: str, tmp_path: Path
) -> None:
    topic = make_topic(bootstrap)
    group = f"kill-{strategy}-{uuid.uuid4().hex[:6]}"
    script = tmp_path / "member.py"
    script.write_text(KILLABLE)
    survivor = consumer(bootstrap, group, strategy)
    survivor.subscribe([topic])
    proc = subprocess.Popen(
        [sys.executable, str(script), bootstrap, group, topic, strategy],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(proc.stdout.readline, "")),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    try:
        # The survivor keeps polling (librdkafka rebalances from poll) until both own some.
        settle([survivor], lambda a: 0 < len(a[0]) < PARTITIONS and bool(lines))
        proc.kill()
        proc.wait(10)
        started = time.monotonic()
        settle([survivor], lambda a: a[0] == set(range(PARTITIONS)), timeout=20)
        # Taken over once the killed member's 3 s session expired, not before.
        assert 1.5 < time.monotonic() - started < 15
    finally:
        if proc.poll() is None:
            proc.kill()
        survivor.close()


def drain(c: Any, want: int, timeout: float = 30.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is None:
            got.append(msg)
    return got


def test_committed_offsets_survive_consumer_restarts(bootstrap: str) -> None:
    topic = make_topic(bootstrap, records=60)
    group = f"restart-{uuid.uuid4().hex[:6]}"
    first = consumer(bootstrap, group, "range", **{"enable.auto.commit": False})
    first.subscribe([topic])
    got = drain(first, 60)
    assert len(got) == 60
    # Commit only the first 4 of every partition, with metadata... then stop.
    first.commit(
        offsets=[TopicPartition(topic, p, 4, "half way") for p in range(PARTITIONS)],
        asynchronous=False,
    )
    committed = first.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    assert [tp.offset for tp in committed] == [4] * PARTITIONS
    assert [tp.metadata for tp in committed] == ["half way"] * PARTITIONS
    first.close()
    second = consumer(bootstrap, group)
    second.subscribe([topic])
    rest = drain(second, 36)
    second.close()
    assert len(rest) == 36 and min(m.offset() for m in rest) == 4


def test_auto_offset_reset_and_seek(bootstrap: str) -> None:
    topic = make_topic(bootstrap, records=12)
    earliest = consumer(
        bootstrap, f"early-{uuid.uuid4().hex[:6]}", **{"auto.offset.reset": "earliest"}
    )
    earliest.subscribe([topic])
    assert len(drain(earliest, 12)) == 12
    earliest.close()
    latest = consumer(bootstrap, f"late-{uuid.uuid4().hex[:6]}", **{"auto.offset.reset": "latest"})
    latest.subscribe([topic])
    settle([latest], lambda a: a[0] == set(range(PARTITIONS)))
    # "latest" is resolved when the first fetch starts; keep producing until a new
    # record shows up, then check no old record ever did.
    producer = Producer({"bootstrap.servers": bootstrap})
    fresh: list[Any] = []
    for i in range(20):
        producer.produce(topic, f"new-{i}".encode(), partition=3)
        producer.flush(10)
        fresh = drain(latest, 1, timeout=0.5)
        if fresh:
            break
    assert fresh and fresh[0].partition() == 3 and fresh[0].value().startswith(b"new-")
    assert fresh[0].offset() >= 2  # records 0-1 of partition 3 are from before
    # seek back to the start of partition 3
    latest.seek(TopicPartition(topic, 3, 0))
    again = drain(latest, 3)
    assert [m.offset() for m in again] == [0, 1, 2]
    latest.close()


def test_static_members_rejoin_without_rebalance(bootstrap: str) -> None:
    topic = make_topic(bootstrap)
    group = f"static-{uuid.uuid4().hex[:6]}"
    revocations: list[int] = []

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        revocations.append(len(partitions))

    a = consumer(
        bootstrap, group, "range", **{"group.instance.id": "host-a", "session.timeout.ms": 10000}
    )
    b = consumer(
        bootstrap, group, "range", **{"group.instance.id": "host-b", "session.timeout.ms": 10000}
    )
    a.subscribe([topic], on_revoke=on_revoke)
    b.subscribe([topic])
    try:
        before = settle([a, b], exactly_once(2))
        revocations.clear()
        b.close()  # a static member does not leave the group on close (KIP-345)
        b = consumer(
            bootstrap,
            group,
            "range",
            **{"group.instance.id": "host-b", "session.timeout.ms": 10000},
        )
        b.subscribe([topic])
        after = settle([a, b], exactly_once(2))
        for _ in range(20):  # a rebalance, if one came, would revoke from a
            a.poll(0.1)
            b.poll(0.1)
        assert after == before
        assert revocations == []
    finally:
        a.close()
        b.close()
