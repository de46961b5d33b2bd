"""KIP-848 consumer groups with librdkafka 2.16 (confluent-kafka,
``group.protocol=consumer``) against a real cluster: server-side assignment,
incremental reassignment as members come and go (never a partition owned by two
members at once), static members restarting without a rebalance, regex subscription
picking up a new topic, a member killed with -9 fenced after the session timeout,
committed offsets with member epochs, and ConsumerGroupDescribe through the admin
client."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from compat_clients import JavaClient
from compat_groups import describe_group, make_topic
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions
from helpers.wire import WireClient

from odradek.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DescribeGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from odradek.tools.launcher import Cluster

pytestmark = pytest.mark.compat

PARTITIONS = 6
HEARTBEAT_MS = 300
SESSION_MS = 3000


@pytest.fixture(scope="module")
def bootstrap(module_cluster_factory: Callable[..., Cluster]) -> str:
    return module_cluster_factory(
        settings={
            "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
            "group.consumer.session.timeout.ms": str(SESSION_MS),
        }
    ).bootstrap_servers


def consumer(bootstrap: str, group: str, **extra: Any) -> Any:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
            **extra,
        }
    )


def owned(c: Any) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


class Watch:
    """Polls consumers and checks, at every step, that no partition is owned by two
    of them at once."""

    def __init__(self, consumers: list[Any]) -> None:
        self.consumers = consumers

    def until(
        self, done: Callable[[list[set[tuple[str, int]]]], bool], timeout: float = 30.0
    ) -> list[set[tuple[str, int]]]:
        deadline = time.monotonic() + timeout
        while True:
            for c in self.consumers:
                c.poll(0.02)
            assignments = [owned(c) for c in self.consumers]
            flat = [p for a in assignments for p in a]
            assert len(flat) == len(set(flat)), f"a partition owned twice: {assignments}"
            if done(assignments):
                return assignments
            assert time.monotonic() < deadline, f"assignments never settled: {assignments}"


def covers(
    topic: str, n: int, partitions: int = PARTITIONS
) -> Callable[[list[set[tuple[str, int]]]], bool]:
    def check(assignments: list[set[tuple[str, int]]]) -> bool:
        flat = sorted(p for a in assignments for p in a)
        return (
            len(assignments) == n
            and flat == [(topic, p) for p in range(partitions)]
            and all(assignments)
        )

    return check


def balanced(topic: str, sizes: list[int]) -> Callable[[list[set[tuple[str, int]]]], bool]:
    """Every partition owned, split in ``sizes`` (Watch.until fails if never reached)."""
    owned_all = covers(topic, len(sizes))
    return lambda a: owned_all(a) and sorted(len(x) for x in a) == sizes


def test_join_then_members_come_and_go(bootstrap: str) -> None:
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    members = [consumer(bootstrap, group)]
    members[0].subscribe([topic])
    try:
        watch = Watch(members)
        assert watch.until(covers(topic, 1)) == [{(topic, p) for p in range(PARTITIONS)}]
        for _ in range(2):
            c = consumer(bootstrap, group)
            c.subscribe([topic])
            members.append(c)
        # Reconciliation is incremental: every partition can be owned while one member
        # still hands a partition over ([1, 2, 3]); the target is the balanced split.
        watch.until(balanced(topic, [2, 2, 2]))
        leaving = members.pop()
        leaving.close()
        watch.until(balanced(topic, [3, 3]))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.state == ConsumerGroupState.STABLE
        assert len(described.members) == 2
        assigned = sorted(
            tp.partition for m in described.members for tp in m.assignment.topic_partitions
        )
        assert assigned == list(range(PARTITIONS))
        # ListGroups v5 reports the group's type; the types filter selects it.
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
        assert group not in {g.group_id for g in classic.valid}
        # odradek groups describe shows epochs and assignments.
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek",
                "groups",
                "describe",
                group,
                "--bootstrap-server",
                bootstrap,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cli.returncode == 0, cli.stderr
        assert f"GROUP {group}  type consumer  state Stable" in cli.stdout
        assert cli.stdout.count(f"{topic}:") == 4  # two members: assignment and target
    finally:
        for c in members:
            c.close()


def test_records_consumed_once_and_offsets_committed_with_member_epochs(bootstrap: str) -> None:
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    c = consumer(bootstrap, group, **{"enable.auto.commit": False})
    c.subscribe([topic])
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(seen) < 60 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        assert sorted(seen) == sorted(f"v{i}".encode() for i in range(60))
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS
    finally:
        c.close()
    # A new member of the group starts from the committed offsets: nothing left.
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    try:
        Watch([c]).until(covers(topic, 1))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            assert msg is None or msg.error() is not None, msg.value()
    finally:
        c.close()


def test_static_member_restart_keeps_its_partitions(bootstrap: str) -> None:
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    a = consumer(bootstrap, group, **{"group.instance.id": "a"})
    b = consumer(bootstrap, group, **{"group.instance.id": "b"})
    for c in (a, b):
        c.subscribe([topic])
    try:
        before = Watch([a, b]).until(covers(topic, 2))
        epoch_before = _group_epoch(bootstrap, group)
        b.close()
        b = consumer(bootstrap, group, **{"group.instance.id": "b"})
        b.subscribe([topic])
        after = Watch([a, b]).until(covers(topic, 2))
        assert after == before
        assert _group_epoch(bootstrap, group) == epoch_before
    finally:
        a.close()
        b.close()


def _group_epoch(bootstrap: str, group: str) -> int:
    """The group epoch through ConsumerGroupDescribe on the wire (confluent-kafka's
    admin client does not show epochs)."""
    with WireClient(bootstrap) as wire:
        r = wire.request(69, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    described = r.groups[0]
    assert described.error_code == 0 and described.group_state == "Stable"
    assert all(m.member_type == 1 for m in described.members)
    return int(described.group_epoch)


def test_bad_heartbeats_get_kafkas_errors(bootstrap: str) -> None:
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"

    def heartbeat(version: int = 1, **fields: Any) -> Any:
        base: dict[str, Any] = {
            "group_id": group,
            "member_id": "m1",
            "member_epoch": 0,
            "rebalance_timeout_ms": 30_000,
            "subscribed_topic_names": [topic],
        }
        base.update(fields)
        with WireClient(bootstrap) as wire:
            return wire.request(68, version, ConsumerGroupHeartbeatRequest(**base))

    joined = heartbeat()
    deadline = time.monotonic() + 30
    while joined.error_code in (14, 15) and time.monotonic() < deadline:
        # COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE on a cluster just started.
        time.sleep(0.2)
        joined = heartbeat()
    assert joined.error_code == 0 and joined.member_epoch == 1
    assert joined.heartbeat_interval_ms == HEARTBEAT_MS
    assert sorted(joined.assignment.topic_partitions[0].partitions) == list(range(PARTITIONS))
    assert heartbeat(member_epoch=7, subscribed_topic_names=None).error_code == 110
    assert heartbeat(member_id="ghost", member_epoch=1).error_code == 25
    bad_regex = heartbeat(member_id="m2", subscribed_topic_regex="([")
    assert bad_regex.error_code == 128 and bad_regex.error_message
    assert heartbeat(member_id="m2", server_assignor="sticky").error_code == 112
    # v0 has no regex field: a v0 join without topics is an invalid request.
    assert heartbeat(0, member_id="m3", subscribed_topic_names=None).error_code == 42
    # Offset commits carry member epochs (OffsetCommit v9).
    with WireClient(bootstrap) as wire:
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition

        def commit(epoch: int) -> int:
            r = wire.request(
                8,
                9,
                OffsetCommitRequest(
                    group_id=group,
                    generation_id_or_member_epoch=epoch,
                    member_id="m1",
                    topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=3)])],
                ),
            )
            return int(r.topics[0].partitions[0].error_code)

        assert commit(1) == 0
        assert commit(0) == 113  # STALE_MEMBER_EPOCH
        assert commit(2) == 110  # FENCED_MEMBER_EPOCH
        G = OffsetFetchRequest.OffsetFetchRequestGroup

        def fetch(member: str, epoch: int) -> Any:
            request = OffsetFetchRequest(
                groups=[G(group_id=group, member_id=member, member_epoch=epoch, topics=None)],
                require_stable=False,
            )
            return wire.request(9, 9, request).groups[0]

        current = fetch("m1", 1)
        assert current.error_code == 0
        assert current.topics[0].partitions[0].committed_offset == 3
        assert fetch("m1", 0).error_code == 113  # STALE_MEMBER_EPOCH
        assert fetch("ghost", 1).error_code == 25  # UNKNOWN_MEMBER_ID
        assert fetch("", -1).error_code == 0  # an admin read
        # v10 names topics by id (KIP-848); an unknown id is UNKNOWN_TOPIC_ID (100).
        topic_id = joined.assignment.topic_partitions[0].topic_id
        ghost = uuid.uuid4()
        r10 = wire.request(
            8,
            10,
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=1,
                member_id="m1",
                topics=[
                    T(topic_id=topic_id, partitions=[P(partition_index=1, committed_offset=5)]),
                    T(topic_id=ghost, partitions=[P(partition_index=0, committed_offset=1)]),
                ],
            ),
        )
        assert [t.topic_id for t in r10.topics] == [topic_id, ghost]
        assert [t.partitions[0].error_code for t in r10.topics] == [0, 100]
        F = G.OffsetFetchRequestTopics
        by_id = wire.request(
            9,
            10,
            OffsetFetchRequest(
                groups=[
                    G(
                        group_id=group,
                        member_id="m1",
                        member_epoch=1,
                        topics=[
                            F(topic_id=topic_id, partition_indexes=[0, 1]),
                            F(topic_id=ghost, partition_indexes=[0]),
                        ],
                    )
                ],
                require_stable=False,
            ),
        ).groups[0]
        assert [t.topic_id for t in by_id.topics] == [topic_id, ghost]
        assert [p.committed_offset for p in by_id.topics[0].partitions] == [3, 5]
        assert by_id.topics[1].partitions[0].error_code == 100
        every = wire.request(
            9, 10, OffsetFetchRequest(groups=[G(group_id=group, topics=None)], require_stable=False)
        ).groups[0]
        assert [t.topic_id for t in every.topics] == [topic_id]
        # DescribeGroups v6 (KIP-1043): a consumer group is not a classic group.
        names = [group, "no-such-group"]
        d6 = wire.request(15, 6, DescribeGroupsRequest(groups=names))
        assert [(d.error_code, d.group_state) for d in d6.groups] == [(69, "Dead")] * 2
        assert [d.error_message for d in d6.groups] == [
            f"Group {group} is not a classic group.",
            "Group no-such-group not found.",
        ]
        d5 = wire.request(15, 5, DescribeGroupsRequest(groups=names))
        assert [(d.error_code, d.group_state) for d in d5.groups] == [(0, "Dead")] * 2
    left = heartbeat(member_epoch=-1, subscribed_topic_names=None)
    assert left.error_code == 0 and left.member_epoch == -1


def test_a_heartbeat_retried_after_a_lost_response_gets_the_assignment(bootstrap: str) -> None:
    """librdkafka times a heartbeat out after one heartbeat interval (100 ms while it
    waits for partitions being released) and sends the very same request again: same
    member epoch, no TopicPartitions. When the lost response was the one handing over
    the released partitions, the retry must carry them again; answered without an
    assignment, the member stayed Stable on the coordinator with partitions its client
    never took (the rolling-migration test's stall)."""
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    Owned = ConsumerGroupHeartbeatRequest.TopicPartitions

    def heartbeat(member: str, epoch: int, owned: list[int] | None = None, **fields: Any) -> Any:
        request = ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            topic_partitions=None if owned is None else [Owned(topic_id=tid, partitions=owned)],
            **fields,
        )
        with WireClient(bootstrap) as wire:
            r = wire.request(68, 1, request)
        assert r.error_code == 0, r
        return r

    def partitions(r: Any) -> list[int]:
        assert r.assignment is not None, r
        return sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions)

    join = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": [topic]}
    deadline = time.monotonic() + 30
    while True:
        with WireClient(bootstrap) as wire:
            a = wire.request(
                68,
                1,
                ConsumerGroupHeartbeatRequest(
                    group_id=group, member_id="a", member_epoch=0, **join
                ),
            )
        if a.error_code not in (14, 15) or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE: just started
    assert a.error_code == 0 and partitions(a) == list(range(PARTITIONS))
    tid = a.assignment.topic_partitions[0].topic_id
    b = heartbeat("b", 0, **join)
    assert b.member_epoch == a.member_epoch + 1 and partitions(b) == []
    revoke = heartbeat("a", a.member_epoch, list(range(PARTITIONS)))
    kept = partitions(revoke)
    assert len(kept) == PARTITIONS // 2
    assert heartbeat("a", a.member_epoch, kept).member_epoch == b.member_epoch
    released = sorted(set(range(PARTITIONS)) - set(kept))
    lost = heartbeat("b", b.member_epoch)  # this response never reaches the client
    assert partitions(lost) == released
    retried = heartbeat("b", b.member_epoch)  # librdkafka's retry: the same request
    assert retried.member_epoch == b.member_epoch and partitions(retried) == released
    assert heartbeat("b", b.member_epoch, released).assignment is None  # acknowledged
    assert heartbeat("b", b.member_epoch).assignment is None


def test_a_revoked_partition_is_owned_again_within_a_few_heartbeats(bootstrap: str) -> None:
    """A member joins: each partition it takes over is unowned (revoked by its old
    owner, not yet assigned to it) for at most three heartbeat intervals, measured
    from the two clients' rebalance callbacks."""
    topic = make_topic(bootstrap, "kip848", PARTITIONS)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    events: list[tuple[float, str, str, int]] = []  # (time, member, what, partition)
    lock = threading.Lock()
    stop = threading.Event()

    def start(name: str) -> tuple[Any, threading.Thread]:
        def record(what: str) -> Callable[[Any, list[TopicPartition]], None]:
            def callback(_c: Any, partitions: list[TopicPartition]) -> None:
                now = time.monotonic()
                with lock:
                    events.extend((now, name, what, tp.partition) for tp in partitions)

            return callback

        c = consumer(bootstrap, group)
        c.subscribe([topic], on_assign=record("assign"), on_revoke=record("revoke"))

        def run() -> None:
            while not stop.is_set():
                c.poll(0.02)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return c, thread

    def owned_by(name: str) -> set[int]:
        out: set[int] = set()
        with lock:
            for _t, who, what, p in events:
                if who == name:
                    (out.add if what == "assign" else out.discard)(p)
        return out

    def wait_for(check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline, f"{what}: {events}"
            time.sleep(0.05)

    a, a_thread = start("a")
    b: Any = None
    b_thread: threading.Thread | None = None
    try:
        wait_for(lambda: owned_by("a") == set(range(PARTITIONS)), "a never got every partition")
        b, b_thread = start("b")
        wait_for(lambda: len(owned_by("b")) == PARTITIONS // 2, "b never got its share")
        moved = owned_by("b")
        with lock:
            settled = list(events)  # before closing (which revokes everything)
    finally:
        stop.set()
        for thread in (a_thread, b_thread):
            if thread is not None:
                thread.join(10)
        a.close()
        if b is not None:
            b.close()
    revoked = {p: t for t, who, what, p in settled if who == "a" and what == "revoke"}
    assigned = {p: t for t, who, what, p in settled if who == "b" and what == "assign"}
    assert set(assigned) == moved and moved <= set(revoked)
    gaps = {p: assigned[p] - revoked[p] for p in assigned}
    assert all(gap >= 0 for gap in gaps.values()), gaps  # never owned twice
    bound = 3 * HEARTBEAT_MS / 1000
    assert max(gaps.values()) <= bound, f"unowned for {gaps} s (bound {bound} s)"
    print(f"unowned time per moved partition (s): {sorted(round(g, 3) for g in gaps.values())}")


def test_regex_subscription_picks_up_a_new_topic(bootstrap: str) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first = make_topic(bootstrap, prefix, PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    c = consumer(bootstrap, group)
    c.subscribe([f"^{prefix}-.*"])
    try:
        watch = Watch([c])
        watch.until(covers(first, 1))
        second = make_topic(bootstrap, prefix, PARTITIONS, records=60)
        watch.until(lambda a: {t for t, _ in a[0]} == {first, second} and len(a[0]) == 12)
        # Partition growth reaches the member too.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_partitions([NewPartitions(first, PARTITIONS + 2)]).values():
            future.result(90)  # generous: a cluster just started on a busy machine
        watch.until(lambda a: len(a[0]) == 14, timeout=30)
    finally:
        c.close()


KILLABLE = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(0.1)
        if c.assignment():
            print("assigned", flush=True)
            break
    while True:
        c.poll(0.1)
    """
)


def test_member_killed_is_fenced_after_the_session_timeout(bootstrap: str) -> None:
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    victim = subprocess.Popen(
        [sys.executable, "-c", KILLABLE, bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    survivor = consumer(bootstrap, group)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().strip() == "assigned"
        survivor.subscribe([topic])
        watch = Watch([survivor])
        watch.until(lambda a: 0 < len(a[0]) < PARTITIONS)
        victim.kill()
        victim.wait(10)
        started = time.monotonic()
        watch.until(covers(topic, 1), timeout=SESSION_MS / 1000 + 20)
        assert time.monotonic() - started >= SESSION_MS / 1000 * 0.5
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        survivor.close()


def test_coordinator_killed_rebuilds_the_group_from_its_records(
    cluster_factory: Callable[..., Cluster],
) -> None:
    """kill -9 of the coordinator owning the group's shard, then a restart: the shard
    reloads from __consumer_offsets with the same group epoch, members, epochs and
    assignments, and the members carry on without a rebalance."""
    cluster = cluster_factory(
        settings={
            "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
            "group.consumer.session.timeout.ms": "20000",
        }
    )
    bootstrap = cluster.bootstrap_servers
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-{uuid.uuid4().hex[:6]}"
    members = [consumer(bootstrap, group), consumer(bootstrap, group)]
    for c in members:
        c.subscribe([topic])
    try:
        watch = Watch(members)
        before = watch.until(covers(topic, 2))
        described = describe_group(bootstrap, group)
        assert described.group_state == "Stable"
        name = next(s.spec.name for s in cluster.services if s.spec.kind == "coordinator")
        victim = cluster.service(name)
        victim.process.kill()
        victim.process.wait(10)
        cluster.restart(name)

        def reloaded() -> Any:
            try:
                d = describe_group(bootstrap, group)
            except OSError:
                return None
            return d if d.error_code == 0 else None

        deadline = time.monotonic() + 30
        while (after := reloaded()) is None:
            for c in members:
                c.poll(0.05)
            assert time.monotonic() < deadline, "the group never came back"
        assert after.group_epoch == described.group_epoch
        assert after.assignment_epoch == described.assignment_epoch

        def by_member(d: Any) -> dict[str, tuple[int, list[int]]]:
            return {
                m.member_id: (
                    m.member_epoch,
                    sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
                )
                for m in d.members
            }

        assert by_member(after) == by_member(described)
        # The members keep heartbeating with their epochs: no fencing, no rebalance.
        end = time.monotonic() + 3 * HEARTBEAT_MS / 1000 + 2
        while time.monotonic() < end:
            for c in members:
                c.poll(0.05)
        assert [owned(c) for c in members] == before
        final = describe_group(bootstrap, group)
        assert final.group_state == "Stable" and final.group_epoch == described.group_epoch
    finally:
        for c in members:
            c.close()


@pytest.mark.slow  # two JVMs in turn: minutes on a loaded machine
def test_java_client_consumer_protocol(bootstrap: str, java_classpath: str) -> None:
    """kafka-clients 4.3.0 with group.protocol=consumer: two members share the topic
    (disjoint, covering, 3 and 3), and when one leaves the other gets everything."""
    topic = make_topic(bootstrap, "kip848", PARTITIONS, records=60)
    group = f"cg-java-{uuid.uuid4().hex[:6]}"
    java = JavaClient(bootstrap, java_classpath)
    rows: dict[str, list[list[str]]] = {}

    def run(name: str, **stop: int) -> None:
        rows[name] = java.run(
            "group-consume",
            {
                "topic": topic,
                "duration.ms": 90_000,
                **{k.replace("_", "."): v for k, v in stop.items()},
                "consumer.group.id": group,
                "consumer.group.protocol": "consumer",
                "consumer.auto.offset.reset": "earliest",
            },
            timeout=150,
        )

    # a runs until it owns all partitions again after sharing them; b until its share
    # has been stable for 3 s, then leaves.
    first = threading.Thread(target=run, args=("a",), kwargs={"regain_size": PARTITIONS})
    first.start()
    deadline = time.monotonic() + 60

    def a_owns_partitions() -> bool:
        d = describe_group(bootstrap, group)
        return d.error_code == 0 and any(m.assignment.topic_partitions for m in d.members)

    while not a_owns_partitions():  # its JVM starts and joins
        assert time.monotonic() < deadline, "the first Java member never got partitions"
        time.sleep(0.5)
    run("b", stable_ms=3000)
    first.join()

    def timeline(name: str) -> list[tuple[int, set[int]]]:
        return [
            (int(r[1]), {int(p) for p in r[2].split(",")} if len(r) > 2 and r[2] else set())
            for r in rows[name]
            if r[0] == "ASSIGNMENT"
        ]

    a, b = timeline("a"), timeline("b")
    b_end_time, b_final = b[-1]
    # Each JVM prints what its poll loop sees after poll(100 ms) returns: a's
    # background thread may have revoked and acknowledged (so the coordinator handed
    # the partitions to b) while a's application thread still sat in its poll. b then
    # held its share for 3 s; a's view 1 s into that window is the settled split.
    settled = b_end_time + 1000
    a_then = [s for t, s in a if t <= settled][-1]
    assert b_final and a_then and not (a_then & b_final), (a, b)
    assert a_then | b_final == set(range(PARTITIONS))
    assert sorted([len(a_then), len(b_final)]) == [3, 3]
    assert a[-1][1] == set(range(PARTITIONS)), (a, b)  # b left: a owns everything again
    counts = {name: int(next(r[1] for r in rows[name] if r[0] == "COUNT")) for name in rows}
    assert counts["a"] + counts["b"] >= 60
