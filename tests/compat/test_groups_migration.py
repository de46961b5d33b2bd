"""Online migration of a running group between the classic and the consumer protocol
(KIP-848, ``group.consumer.migration.policy``) with librdkafka 2.16 (confluent-kafka):
the members of a classic group are rolled one by one to ``group.protocol=consumer``
and back while a producer runs. At every step no partition is owned by two members,
no produced record is left unconsumed, and the group's committed offsets carry over
(members of the other protocol start where the group left off, not from the
beginning). A classic static member taking over the instance id of the last
consumer-protocol member turns the group classic without a rebalance. With the policy ``disabled`` a consumer-protocol member cannot join a
running classic group: its heartbeat answers GROUP_ID_NOT_FOUND, as Kafka's."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from compat_clients import JavaClient
from compat_groups import make_topic
from compat_wire import WireClient
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeGroupsRequest,
)
from odradek.tools.launcher import Cluster

pytestmark = pytest.mark.compat

PARTITIONS = 6
SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "6000",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def bootstrap(module_cluster_factory: Callable[..., Cluster]) -> str:
    return module_cluster_factory(settings=SETTINGS).bootstrap_servers


def member(bootstrap: str, group: str, protocol: str, topic: str, strategy: str = "range") -> Any:
    extra: dict[str, Any] = (
        {
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": strategy,
        }
        if protocol == "classic"
        else {}
    )
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "topic.metadata.refresh.interval.ms": 1000,
            **extra,
        }
    )
    c.subscribe([topic])
    return c


class RunningProducer:
    """Produces numbered records until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.acked: set[bytes] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.add(msg.value())

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(self.topic, f"r{i}".encode(), on_delivery=self._delivered)
            self.producer.poll(0)
            i += 1
            time.sleep(0.01)
        self.producer.flush(30)

    def finish(self) -> set[bytes]:
        self.stop.set()
        self.thread.join(60)
        return self.acked


class Group:
    """Polls every member in turn, checking that no partition is ever owned twice, and
    keeps what each protocol consumed (with the lowest offset seen per partition)."""

    def __init__(self, topic: str, strategy: str = "range") -> None:
        self.bootstrap = ""
        self.group_id = ""
        self.topic = topic
        self.strategy = strategy
        self.members: list[tuple[str, Any]] = []
        self.seen: set[bytes] = set()
        self.first_offset: dict[str, dict[int, int]] = {"classic": {}, "consumer": {}}

    def step(self) -> list[set[int]]:
        for protocol, c in self.members:
            msg = c.poll(0.02)
            if msg is not None and msg.error() is None:
                self.seen.add(msg.value())
                first = self.first_offset[protocol]
                first[msg.partition()] = min(first.get(msg.partition(), msg.offset()), msg.offset())
        owned = [{tp.partition for tp in c.assignment()} for _, c in self.members]
        flat = [p for ps in owned for p in ps]
        assert len(flat) == len(set(flat)), f"a partition owned twice: {owned}"
        return owned

    def until_covered(self, timeout: float = 60.0) -> None:
        """Every member owns something and together they own every partition."""
        deadline = time.monotonic() + timeout
        while True:
            owned = self.step()
            if all(owned) and sorted(p for ps in owned for p in ps) == list(range(PARTITIONS)):
                return
            assert time.monotonic() < deadline, (
                f"assignments never settled: {owned}; coordinator: {self.described()}"
            )

    def described(self) -> list[tuple[int, int, list[int], list[int]]]:
        """What the coordinator says, for a failure message: (member type, epoch,
        assigned, target) of each consumer group member."""
        if not self.bootstrap:
            return []
        with WireClient(self.bootstrap) as wire:
            r = wire.request(69, 1, ConsumerGroupDescribeRequest(group_ids=[self.group_id]))
        return [
            (
                m.member_type,
                m.member_epoch,
                sorted(p for t in m.assignment.topic_partitions for p in t.partitions),
                sorted(p for t in m.target_assignment.topic_partitions for p in t.partitions),
            )
            for m in r.groups[0].members
        ]

    def drain(self, wanted: set[bytes], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not wanted <= self.seen:
            self.step()
            assert time.monotonic() < deadline, f"{len(wanted - self.seen)} records never consumed"

    def roll(self, bootstrap: str, group: str, index: int, protocol: str) -> None:
        """Replace member ``index`` with one using ``protocol`` (close, then start)."""
        self.bootstrap, self.group_id = bootstrap, group
        _old_protocol, old = self.members.pop(index)
        old.close()
        self.members.insert(
            index, (protocol, member(bootstrap, group, protocol, self.topic, self.strategy))
        )
        self.until_covered()

    def close(self) -> None:
        for _, c in self.members:
            c.close()


def group_type(bootstrap: str, group: str) -> ConsumerGroupType:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(30)
    [found] = [g for g in listed.valid if g.group_id == group]
    return found.type


def member_types(bootstrap: str, group: str) -> list[int]:
    """ConsumerGroupDescribe v1's MemberType of each member, sorted."""
    with WireClient(bootstrap) as wire:
        r = wire.request(69, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    assert r.groups[0].error_code == 0
    return sorted(m.member_type for m in r.groups[0].members)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        c.close()


# Classic members with an eager assignor (they give everything up before rejoining)
# and with a cooperative one (they report what they own and revoke incrementally).
# In the slow suite (long). On a starved machine a member misses its session; the
# last consumer-protocol member fenced turned the group classic and its next heartbeat
# got GROUP_ID_NOT_FOUND, fatal in librdkafka: that member never owned anything again
# and the roll stalled (test_consumer_member_back_after_its_session_... below). A second
# stall under load (1 of 4 runs): the coordinator held a consumer-protocol member Stable
# with a partition its client never took. librdkafka times a heartbeat out after one
# heartbeat interval (100 ms while it waits for partitions being released) and retries
# the same request; the coordinator had handed the partition over in the response that
# was dropped and answered the retry without the assignment. It now answers the
# assignment until the member reports owning it (unit tests
# test_a_retried_heartbeat_gets_the_assignment_its_lost_response_carried and
# test_a_heartbeat_at_the_previous_epoch_gets_the_assignment).
@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_rolling_upgrade_to_consumer_protocol_and_back(bootstrap: str, strategy: str) -> None:
    topic = make_topic(bootstrap, "mig", PARTITIONS)
    group = f"mig-{uuid.uuid4().hex[:6]}"
    producer = RunningProducer(bootstrap, topic)
    g = Group(topic, strategy)
    try:
        g.members = [
            ("classic", member(bootstrap, group, "classic", topic, strategy)) for _ in range(3)
        ]
        g.until_covered()
        deadline = time.monotonic() + 30
        while min(committed(bootstrap, group, topic).values()) <= 0:
            for _ in range(20):
                g.step()
            assert time.monotonic() < deadline, "the classic group never committed"
        before_upgrade = committed(bootstrap, group, topic)
        assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        # Upgrade, one member at a time: the first consumer-protocol member converts
        # the group; the classic ones keep working inside it until they are rolled.
        g.roll(bootstrap, group, 0, "consumer")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        assert member_types(bootstrap, group) == [0, 0, 1]  # KIP-1099: classic, consumer
        g.roll(bootstrap, group, 1, "consumer")
        g.roll(bootstrap, group, 2, "consumer")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        # Offsets carried over: consumer-protocol members started where the group was.
        for p, offset in g.first_offset["consumer"].items():
            assert offset >= before_upgrade[p], (p, offset, before_upgrade)
        g.drain(set(producer.acked))
        before_downgrade = committed(bootstrap, group, topic)
        # Downgrade: classic members join the consumer group; when the last
        # consumer-protocol member leaves, the group is classic again.
        g.first_offset["classic"].clear()
        g.roll(bootstrap, group, 0, "classic")
        g.roll(bootstrap, group, 1, "classic")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        g.roll(bootstrap, group, 2, "classic")
        assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        for p, offset in g.first_offset["classic"].items():
            assert offset >= before_downgrade[p], (p, offset, before_downgrade)
        acked = producer.finish()
        assert len(acked) > 100
        g.drain(acked)
    finally:
        producer.finish()
        g.close()


def test_static_classic_member_takes_over_from_the_last_consumer_member(bootstrap: str) -> None:
    """Kafka 4 (``validateOnlineDowngradeWithReplacedMemberId``): the group's last
    consumer-protocol member is a static one; it closes (a static leave, epoch -2) and a
    classic member with its ``group.instance.id`` joins. The group is classic again at
    once, without a rebalance: the newcomer gets exactly its predecessor's partitions
    and the other classic member keeps its own, with no rebalance callback at all (it
    uses the eager range assignor, which gives everything up on any rebalance)."""
    topic = make_topic(bootstrap, "mig", PARTITIONS)
    group = f"mig-static-{uuid.uuid4().hex[:6]}"
    events: list[str] = []

    def settings(protocol: str, **extra: Any) -> dict[str, Any]:
        classic = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
        return {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            **(classic if protocol == "classic" else {}),
            **extra,
        }

    a = Consumer(settings("classic", **{"partition.assignment.strategy": "range"}))
    a.subscribe(
        [topic],
        on_assign=lambda _c, ps: events.append(f"assign {sorted(p.partition for p in ps)}"),
        on_revoke=lambda _c, ps: events.append(f"revoke {sorted(p.partition for p in ps)}"),
    )
    g = Group(topic)
    g.bootstrap, g.group_id = bootstrap, group
    g.members = [("classic", a)]
    try:
        g.until_covered()
        g.members.append(
            ("consumer", member_with(settings("consumer", **{"group.instance.id": "s"}), topic))
        )
        g.until_covered()
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        deadline = time.monotonic() + 30
        while not all(epoch == target for epoch, target in member_epochs(bootstrap, group)):
            g.step()  # the classic member's last rejoin may still be on its way
            assert time.monotonic() < deadline, member_epochs(bootstrap, group)
        mine = {tp.partition for tp in a.assignment()}
        theirs = {tp.partition for tp in g.members[1][1].assignment()}
        events.clear()
        g.members.pop()[1].close()
        newcomer = member_with(
            settings(
                "classic",
                **{"group.instance.id": "s", "partition.assignment.strategy": "range"},
            ),
            topic,
        )
        g.members.append(("classic", newcomer))
        g.until_covered()
        assert {tp.partition for tp in newcomer.assignment()} == theirs
        assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        with WireClient(bootstrap) as wire:
            d = wire.request(15, 5, DescribeGroupsRequest(groups=[group])).groups[0]
        assert d.group_state == "Stable" and len(d.members) == 2
        for _ in range(50):  # a rebalance would show within a few heartbeats
            g.step()
        assert {tp.partition for tp in a.assignment()} == mine
        assert events == [], events
    finally:
        g.close()


# A consumer-protocol member in its own process (so that it can be paused): prints its
# assignment whenever it changes, and any error.
PAUSABLE_MEMBER = """
import sys, time
from confluent_kafka import Consumer, KafkaException
bootstrap, group, topic = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest"})
c.subscribe([topic])
last = None
while sys.stdin.readline().strip() != "stop":
    for _ in range(5):
        try:
            m = c.poll(0.02)
            if m is not None and m.error() is not None:
                print("ERROR", m.error().str(), flush=True)
        except KafkaException as exc:
            print("ERROR", exc, flush=True)
    owned = sorted(tp.partition for tp in c.assignment())
    print("OWNED", ",".join(map(str, owned)), flush=True)
c.close()
"""


class PausableMember:
    """Drives PAUSABLE_MEMBER one step per ``owned()`` call (it waits for a line on its
    stdin before each step); SIGSTOP pauses it whole, librdkafka's threads included."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PAUSABLE_MEMBER, bootstrap, group, topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.errors: list[str] = []

    def owned(self) -> set[int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("step\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, f"the member process ended: {self.errors}"
            kind, _, rest = line.strip().partition(" ")
            if kind == "OWNED":
                return {int(p) for p in rest.split(",") if p}
            self.errors.append(rest)

    def close(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_consumer_member_back_after_its_session_rejoins_the_downgraded_group(
    bootstrap: str,
) -> None:
    """The group's only consumer-protocol member stops (a paused process, as on a
    starved machine) past group.consumer.session.timeout.ms: it is fenced and the group
    goes back to classic, its classic member taking everything. When the member comes
    back it must rejoin (UNKNOWN_MEMBER_ID), upgrading the group again, and own
    partitions again; answered Kafka's GROUP_ID_NOT_FOUND, librdkafka would stop it for
    good (a fatal error)."""
    topic = make_topic(bootstrap, "mig", PARTITIONS)
    group = f"mig-fenced-{uuid.uuid4().hex[:6]}"
    g = Group(topic)
    g.bootstrap, g.group_id = bootstrap, group
    g.members = [("classic", member(bootstrap, group, "classic", topic))]
    g.until_covered()
    paused = PausableMember(bootstrap, group, topic)  # polled only through shared()
    try:

        def shared() -> bool:
            a, b = g.step()[0], paused.owned()
            return bool(a and b and not a & b and a | b == set(range(PARTITIONS)))

        deadline = time.monotonic() + 60
        while not shared():
            assert time.monotonic() < deadline, (g.described(), paused.errors)
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        # Stopped (no heartbeat) until the classic member owns everything: the
        # session timed out and the classic group rebalanced.
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            session_s = int(SETTINGS["group.consumer.session.timeout.ms"]) / 1000
            deadline = time.monotonic() + session_s + 30
            while g.step()[0] != set(range(PARTITIONS)):
                assert time.monotonic() < deadline, "the classic member never took over"
            assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        # Back: it rejoins, the group is a consumer group again, both share the topic.
        deadline = time.monotonic() + 60
        while not shared():
            assert time.monotonic() < deadline, (g.described(), paused.errors)
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        assert not [e for e in paused.errors if "fatal" in e.lower()], paused.errors
    finally:
        paused.close()
        g.close()


def member_with(config: dict[str, Any], topic: str) -> Any:
    c = Consumer(config)
    c.subscribe([topic])
    return c


def member_epochs(bootstrap: str, group: str) -> list[tuple[int, int]]:
    """(member epoch, group epoch) of each member, through ConsumerGroupDescribe."""
    with WireClient(bootstrap) as wire:
        r = wire.request(69, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    described = r.groups[0]
    return [(int(m.member_epoch), int(described.group_epoch)) for m in described.members]


@pytest.fixture(scope="module")
def disabled_bootstrap(module_cluster_factory: Callable[..., Cluster]) -> str:
    settings = {**SETTINGS, "group.consumer.migration.policy": "disabled"}
    return module_cluster_factory(settings=settings).bootstrap_servers


def test_disabled_policy_refuses_a_consumer_member_in_a_classic_group(
    disabled_bootstrap: str,
) -> None:
    bootstrap = disabled_bootstrap
    topic = make_topic(bootstrap, "mig", PARTITIONS)
    group = f"mig-{uuid.uuid4().hex[:6]}"
    g = Group(topic)
    try:
        g.members = [("classic", member(bootstrap, group, "classic", topic)) for _ in range(2)]
        g.until_covered()
        # On the wire: Kafka's answer to a heartbeat joining a classic group.
        with WireClient(bootstrap) as wire:
            r = wire.request(
                68,
                0,
                ConsumerGroupHeartbeatRequest(
                    group_id=group,
                    member_id=str(uuid.uuid4()),
                    member_epoch=0,
                    rebalance_timeout_ms=30_000,
                    subscribed_topic_names=[topic],
                    topic_partitions=[],
                ),
            )
        assert r.error_code == E.GROUP_ID_NOT_FOUND
        assert r.error_message == f"Group {group} is not a consumer group."
        # With librdkafka: the consumer-protocol member never gets a partition and
        # the classic members keep theirs.
        newcomer = member(bootstrap, group, "consumer", topic)
        errors: list[Any] = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                msg = newcomer.poll(0.1)
                if msg is not None and msg.error() is not None:
                    errors.append(msg.error())
            except KafkaException as exc:
                errors.append(exc.args[0])
            assert not newcomer.assignment()
            g.step()
        newcomer.close()
        g.until_covered()
        assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
    finally:
        g.close()


def test_java_classic_member_shares_with_a_consumer_member_and_back(
    bootstrap: str, java_classpath: str
) -> None:
    """kafka-clients 4.3.0: a classic member alone in its group; a member with
    group.protocol=consumer joins (the group is upgraded) and the two share the
    partitions (disjoint, 3 and 3); when it leaves, the group is classic again and the
    classic member owns everything."""
    topic = make_topic(bootstrap, "mig", PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(60):
        producer.produce(topic, f"v{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)
    group = f"mig-java-{uuid.uuid4().hex[:6]}"
    java = JavaClient(bootstrap, java_classpath)
    rows: dict[str, list[list[str]]] = {}

    def run(name: str, protocol: str, **stop: int) -> None:
        rows[name] = java.run(
            "group-consume",
            {
                "topic": topic,
                "duration.ms": 150_000,
                **{k.replace("_", "."): v for k, v in stop.items()},
                "consumer.group.id": group,
                "consumer.group.protocol": protocol,
                "consumer.auto.offset.reset": "earliest",
                **({"consumer.session.timeout.ms": 6000} if protocol == "classic" else {}),
            },
            timeout=200,
        )

    first = threading.Thread(target=run, args=("a", "classic"), kwargs={"regain_size": PARTITIONS})
    first.start()
    deadline = time.monotonic() + 60
    while True:  # its JVM starts and the classic group forms
        with WireClient(bootstrap) as wire:
            d = wire.request(15, 5, DescribeGroupsRequest(groups=[group])).groups[0]
        if d.group_state == "Stable" and d.members:
            break
        assert time.monotonic() < deadline, "the classic Java member never joined"
        time.sleep(0.5)
    types: list[ConsumerGroupType] = []
    watching = threading.Event()

    def watch_type() -> None:
        while not watching.is_set():
            types.append(group_type(bootstrap, group))
            time.sleep(0.5)

    watcher = threading.Thread(target=watch_type, daemon=True)
    watcher.start()
    run("b", "consumer", stable_ms=3000)
    first.join()
    watching.set()
    watcher.join(10)

    def timeline(name: str) -> list[tuple[int, set[int]]]:
        return [
            (int(r[1]), {int(p) for p in r[2].split(",")} if len(r) > 2 and r[2] else set())
            for r in rows[name]
            if r[0] == "ASSIGNMENT"
        ]

    def state_at(line: list[tuple[int, set[int]]], when: int) -> set[int]:
        before = [owned for t, owned in line if t <= when]
        return before[-1] if before else set()

    a, b = timeline("a"), timeline("b")
    # b holds its final share from its last change for at least stable.ms (then it
    # leaves); meanwhile a (eager: it gives everything up while rejoining) never
    # owns any of it, and then owns the rest.
    b_end_time, b_final = b[-1]
    window_end = b_end_time + 3000
    # Each JVM prints its assignment after poll returns: a (eager) gives everything up
    # when it rejoins inside a poll, so the coordinator may hand b its share before a's
    # poll returns and prints (a default run saw b print 43 ms before a did). a's view
    # 1 s into b's 3 s window is the settled split.
    settled = b_end_time + 1000
    a_during = [state_at(a, settled)] + [s for t, s in a if settled < t <= window_end]
    assert b_final and not any(s & b_final for s in a_during), (a, b)
    a_then = state_at(a, window_end)
    assert a_then | b_final == set(range(PARTITIONS)), (a, b)
    assert sorted([len(a_then), len(b_final)]) == [3, 3]
    assert a[-1][1] == set(range(PARTITIONS)), (a, b)  # b left: a owns everything again
    assert ConsumerGroupType.CONSUMER in types, types  # upgraded while b was a member
    assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC  # and back
