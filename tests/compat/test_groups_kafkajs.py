"""Consumer groups with kafkajs (node), each consumer its own node process.

One consumer then three on a 6-partition topic, each partition owned by exactly one
member after every rebalance; a member leaving hands its partitions over; offsets
kafkajs commits survive a restart of every consumer. The kafkajs package comes from
``tests/compat/js`` (``npm ci`` through the ``kafkajs_driver`` fixture).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import wait_until
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from odradek.process import terminate
from odradek.tools.launcher import Cluster

pytestmark = pytest.mark.compat

PARTITIONS = 6

MEMBER_JS = r"""
const { Kafka, logLevel } = require('kafkajs');
const [brokers, topic, group, id] = process.argv.slice(2);
const kafka = new Kafka({ clientId: id, brokers: brokers.split(','), logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 300,
                                  rebalanceTimeout: 10000, maxWaitTimeInMs: 300 });
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
consumer.on(consumer.events.GROUP_JOIN, (e) => out({ event: 'join', member: e.payload.memberId,
  assignment: (e.payload.memberAssignment[topic] || []) }));
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  try { await consumer.disconnect(); } finally { out({ event: 'stopped' }); process.exit(0); }
};
process.on('SIGTERM', stop);
(async () => {
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ eachMessage: async ({ partition, message }) =>
    out({ event: 'message', partition, offset: Number(message.offset) }) });
})().catch((e) => { out({ event: 'error', message: String(e) }); process.exit(1); });
"""


@pytest.fixture(scope="module")
def bootstrap(module_cluster_factory: Callable[..., Cluster]) -> str:
    """A cluster of this module's own, so its rebalances meet no other test's groups."""
    return module_cluster_factory().bootstrap_servers


class Member:
    """One kafkajs consumer process and what it reports."""

    def __init__(
        self, script: Path, node_path: Path, bootstrap: str, topic: str, group: str, name: str
    ) -> None:
        self.proc = subprocess.Popen(
            ["node", str(script), bootstrap, topic, group, name],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "NODE_PATH": str(node_path)},
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.assignment: set[int] | None = None
        self.messages: list[tuple[int, int]] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                continue

    def pump(self) -> None:
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return
            if event["event"] == "join":
                self.assignment = set(event["assignment"])
            elif event["event"] == "message":
                self.messages.append((event["partition"], event["offset"]))
            elif event["event"] == "error":
                self.errors.append(event["message"])

    def stop(self) -> None:
        terminate(self.proc, 20)


def wait(members: list[Member], check: Callable[[], bool], what: str) -> None:
    """Read every member's events until ``check`` holds (a member's error fails at once)."""

    def pumped() -> bool:
        for m in members:
            m.pump()
            assert not m.errors, m.errors
        return check()

    wait_until(pumped, f"{what}; assignments {[m.assignment for m in members]}", timeout=60)


def exactly_once(members: list[Member]) -> bool:
    assignments = [m.assignment for m in members]
    if any(not a for a in assignments):
        return False
    flat = sorted(p for a in assignments for p in a)  # type: ignore[union-attr]
    return flat == list(range(PARTITIONS))


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(start, start + n):
        producer.send(topic, f"v{i}".encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def test_kafkajs_group_one_then_three_leave_and_resume(
    bootstrap: str, kafkajs_driver: Path, tmp_path: Path
) -> None:
    node_path = kafkajs_driver.parent / "node_modules"
    script = tmp_path / "member.js"
    script.write_text(MEMBER_JS)
    topic = f"js-{uuid.uuid4().hex[:8]}"
    group = f"jsg-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    produce(bootstrap, topic, 60)
    members = [Member(script, node_path, bootstrap, topic, group, "js-0")]
    try:
        wait(members, lambda: members[0].assignment == set(range(PARTITIONS)), "every partition")
        wait(members, lambda: len(members[0].messages) >= 60, "60 records")
        members += [Member(script, node_path, bootstrap, topic, group, f"js-{i}") for i in (1, 2)]
        wait(members, lambda: exactly_once(members), "three members sharing the partitions")
        assert sorted(len(m.assignment or ()) for m in members) == [2, 2, 2]
        leaving = members.pop()
        leaving.stop()
        wait(members, lambda: exactly_once(members), "two members sharing the partitions")
        for m in members:
            m.stop()
        consumed = {(p, o) for m in [*members, leaving] for (p, o) in m.messages}
        assert len(consumed) == 60
        # Every consumer is gone; new records, then a new consumer of the same group
        # starts from the committed offsets: exactly the new records.
        produce(bootstrap, topic, 6, start=60)
        again = Member(script, node_path, bootstrap, topic, group, "js-3")
        members = [again]
        wait(members, lambda: len(again.messages) >= 6, "the 6 new records")
        time.sleep(1.0)  # a quiet second: a record read again from a stale offset shows now
        again.pump()
        assert sorted(again.messages) == [(p, 10) for p in range(PARTITIONS)]
    finally:
        for m in members:
            m.stop()
