"""Consumer groups with the pure-Python clients: kafka-python (JoinGroup v5+, OffsetFetch
v8) and aiokafka (JoinGroup v5, SyncGroup v3, OffsetCommit/OffsetFetch v3 — the old
encodings, docs/compatibility.md C5).

One consumer then three on a 6-partition topic, each partition owned once; a member
leaving hands its partitions over; commits survive a consumer restart; seek.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import aiokafka
import pytest
from helpers.kafka_python import JOIN_POLL_MS
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import NewTopic

from odradek.tools.launcher import Cluster

pytestmark = pytest.mark.compat

PARTITIONS = 6


@pytest.fixture(scope="module")
def bootstrap(module_cluster_factory: Callable[..., Cluster]) -> str:
    """A cluster of this module's own, so its rebalances meet no other test's groups."""
    return module_cluster_factory().bootstrap_servers


def make_topic(bootstrap: str, records: int = 60) -> str:
    name = f"py-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(records):
        producer.send(name, f"v{i}".encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    return name


def kp_consumer(bootstrap: str, group: str, topic: str, **extra: Any) -> KafkaConsumer:
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        # Room for a heartbeat thread starved on a loaded 2-core machine; members here
        # leave with LeaveGroup (close), so a longer session slows no rebalance.
        session_timeout_ms=15000,
        heartbeat_interval_ms=300,
        **extra,
    )


def settle(consumers: list[KafkaConsumer], n: int, timeout: float = 40.0) -> list[set[int]]:
    """Each consumer polls in a thread of its own, long enough for a whole join
    (helpers.kafka_python explains why)."""
    stop = threading.Event()

    def poll_loop(c: KafkaConsumer) -> None:
        while not stop.is_set():
            c.poll(JOIN_POLL_MS)

    threads = [threading.Thread(target=poll_loop, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
            flat = sorted(p for a in assignments for p in a)
            if flat == list(range(PARTITIONS)) and all(assignments) and len(assignments) == n:
                return assignments
            assert time.monotonic() < deadline, f"assignments never settled: {assignments}"
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(JOIN_POLL_MS / 1000 + 30)


def test_kafka_python_group_lifecycle(bootstrap: str) -> None:
    topic = make_topic(bootstrap)
    group = f"kp-{uuid.uuid4().hex[:6]}"
    members = [kp_consumer(bootstrap, group, topic, enable_auto_commit=False)]
    try:
        assert settle(members, 1) == [set(range(PARTITIONS))]
        members += [
            kp_consumer(bootstrap, group, topic, enable_auto_commit=False) for _ in range(2)
        ]
        assert sorted(len(a) for a in settle(members, 3)) == [2, 2, 2]
        members.pop().close()
        assert sorted(len(a) for a in settle(members, 2)) == [3, 3]
    finally:
        for c in members:
            c.close()


def test_kafka_python_commit_restart_and_seek(bootstrap: str) -> None:
    topic = make_topic(bootstrap, records=30)
    group = f"kpc-{uuid.uuid4().hex[:6]}"
    c = kp_consumer(bootstrap, group, topic, enable_auto_commit=False)
    try:  # closed even when an assertion fails: a leaked client retries forever
        seen = 0
        deadline = time.monotonic() + 60  # joining included: slow on a loaded 2-core machine
        while seen < 30 and time.monotonic() < deadline:
            seen += sum(len(v) for v in c.poll(JOIN_POLL_MS).values())
        assert seen == 30
        tp0 = TopicPartition(topic, 0)
        c.commit({tp0: OffsetAndMetadata(2, "two", -1)})
        assert c.committed(tp0) == 2
        c.seek(tp0, 1)
        again: list[int] = []
        deadline = time.monotonic() + 10
        while len(again) < 4 and time.monotonic() < deadline:
            for records in c.poll(200).values():
                again += [r.offset for r in records]
        assert again == [1, 2, 3, 4]
    finally:
        c.close()
    c = kp_consumer(bootstrap, group, topic, enable_auto_commit=False)
    resumed: list[int] = []
    try:
        deadline = time.monotonic() + 60  # joining included: slow on a loaded 2-core machine
        while len(resumed) < 3 and time.monotonic() < deadline:
            for tp, records in c.poll(JOIN_POLL_MS).items():
                if tp.partition == 0:
                    resumed += [r.offset for r in records]
    finally:
        c.close()
    assert resumed == [2, 3, 4]


def test_aiokafka_group_lifecycle_and_commits(bootstrap: str) -> None:
    topic = make_topic(bootstrap, records=60)
    group = f"aio-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        def make() -> Any:
            return aiokafka.AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            )

        async def settled(consumers: list[Any], n: int) -> list[set[int]]:
            deadline = time.monotonic() + 40
            while True:
                for c in consumers:
                    await c.getmany(timeout_ms=50)
                assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
                flat = sorted(p for a in assignments for p in a)
                if flat == list(range(PARTITIONS)) and all(assignments) and len(assignments) == n:
                    return assignments
                assert time.monotonic() < deadline, assignments

        first = make()
        await first.start()
        members = [first]
        try:
            await settled(members, 1)
            for _ in range(2):
                c = make()
                await c.start()
                members.append(c)
            assert sorted(len(a) for a in await settled(members, 3)) == [2, 2, 2]
            leaving = members.pop()
            await leaving.stop()
            await settled(members, 2)
            # Commit (OffsetCommit v2/v3 from aiokafka) and read back.
            mine = sorted(members[0].assignment())
            await members[0].commit({tp: 5 for tp in mine})
            for tp in mine:
                assert await members[0].committed(tp) == 5
        finally:
            for c in members:
                await c.stop()
        # Restart: the committed positions are where consumption resumes.
        c = make()
        await c.start()
        try:
            deadline = time.monotonic() + 20
            while len(c.assignment()) < PARTITIONS and time.monotonic() < deadline:
                await c.getmany(timeout_ms=100)
            for tp in mine:
                assert await c.position(tp) == 5
        finally:
            await c.stop()

    asyncio.run(scenario())
