"""Consumer-group APIs on the wire against a real cluster (controller, storage node,
offset store, coordinator and gateway as processes): exact versions with a raw
client, the admin operations with kafka-python, durability across a restart of the
whole cluster, lag metrics, and the ``odradek groups`` tool."""

from __future__ import annotations

import argparse
import io
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.kafka_python import JOIN_POLL_MS
from helpers.waiting import wait_until
from helpers.wire import WireClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from odradek.protocol.consumer_protocol import encode_assignment, encode_subscription
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from odradek.tools import groups as groups_tool
from odradek.tools.launcher import Cluster

SETTINGS = {"offsets.lag.refresh.interval.ms": "200"}


@pytest.fixture(scope="module")
def group_cluster(module_cluster_factory: Callable[..., Cluster]) -> Cluster:
    return module_cluster_factory(settings=SETTINGS)


@pytest.fixture(scope="module")
def bootstrap(group_cluster: Cluster) -> str:
    return group_cluster.bootstrap_servers


def make_topic(bootstrap: str, partitions: int = 6, records: int = 0) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()
    if records:
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(records):
            producer.send(name, f"v{i}".encode(), partition=i % partitions)
        producer.flush()
        producer.close()
    return name


def wait_coordinator(bootstrap: str, group: str, timeout: float = 20.0) -> None:
    with WireClient(bootstrap) as c:

        def loaded() -> bool:
            r = c.call(FindCoordinatorRequest(key=group, key_type=0), 3)
            if r.error_code != E.NONE:
                return False
            # ... and its shard is loaded (a probe heartbeat stops saying 14).
            hb = c.call(HeartbeatRequest(group_id=group, generation_id=-1, member_id="probe"), 0)
            return hb.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR)

        wait_until(loaded, f"a loaded coordinator for {group}", timeout=timeout, interval=0.1)


def join(c: WireClient, group: str, member_id: str, version: int = 5, **kw: Any) -> Any:
    P = JoinGroupRequest.JoinGroupRequestProtocol
    req = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=kw.get("session", 10_000),
        rebalance_timeout_ms=kw.get("rebalance", 10_000),
        member_id=member_id,
        group_instance_id=kw.get("instance"),
        protocol_type="consumer",
        protocols=[P(name="range", metadata=encode_subscription(["t"]))],
        reason=None,
    )
    return c.call(req, version)


def sync(c: WireClient, group: str, gen: int, member: str, assignments: dict[str, bytes]) -> Any:
    A = SyncGroupRequest.SyncGroupRequestAssignment
    req = SyncGroupRequest(
        group_id=group,
        generation_id=gen,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[A(member_id=m, assignment=a) for m, a in assignments.items()],
    )
    return c.call(req, 5)


# -- FindCoordinator ---------------------------------------------------------------------------


def test_find_coordinator_every_version(bootstrap: str, group_cluster: Cluster) -> None:
    wait_coordinator(bootstrap, "fc-group")
    # The coordinator is the broker (storage node 100, the only one) leading the group's
    # __consumer_offsets partition, at the gateway's broker port for it.
    gateway = group_cluster.service("gateway-0")
    port = gateway.ports["broker-100"]
    assert port != gateway.ports["kafka"]
    with WireClient(bootstrap) as c:
        for version in range(4):
            r = c.call(FindCoordinatorRequest(key="fc-group", key_type=0), version)
            assert (r.error_code, r.node_id, r.port) == (E.NONE, 100, port)
        for version in (4, 5, 6):
            r = c.call(
                FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", "ü-群"]), version
            )
            assert [(x.key, x.error_code, x.node_id, x.port) for x in r.coordinators] == [
                ("a", E.NONE, 100, port),
                ("b", E.NONE, 100, port),
                ("ü-群", E.NONE, 100, port),
            ]
        # Key type 1 (TRANSACTION): tests/integration/test_transactions_wire.py.


# -- membership on the wire ---------------------------------------------------------------------


def test_join_sync_heartbeat_leave_exact_versions(bootstrap: str) -> None:
    group = f"wire-{uuid.uuid4().hex[:6]}"
    wait_coordinator(bootstrap, group)
    with WireClient(bootstrap) as a, WireClient(bootstrap) as b:
        # v4+: a first join gets MEMBER_ID_REQUIRED and the id to come back with.
        first = join(a, group, "")
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
        ra = join(a, group, first.member_id)
        assert ra.error_code == E.NONE and ra.generation_id == 1 and ra.leader == first.member_id
        # A second member: its join is a long-poll held until the leader rejoins.
        mid_b = join(b, group, "").member_id
        b.send(
            JoinGroupRequest(
                group_id=group,
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                member_id=mid_b,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[
                    JoinGroupRequest.JoinGroupRequestProtocol(
                        name="range", metadata=encode_subscription(["t"])
                    )
                ],
                reason="second member",
            ),
            8,
        )
        # b's join travels on another connection: heartbeat until it has landed.
        beat = HeartbeatRequest(
            group_id=group, generation_id=1, member_id=ra.member_id, group_instance_id=None
        )
        code = wait_until(
            lambda: a.call(beat, 4).error_code, "a heartbeat to see b's join", timeout=10
        )
        assert code == E.REBALANCE_IN_PROGRESS
        ra2 = join(a, group, ra.member_id)
        rb = b.receive()
        assert ra2.generation_id == rb.generation_id == 2
        assert {m.member_id for m in ra2.members} == {ra.member_id, mid_b}
        assert rb.members == [] and rb.protocol_name == "range"
        # The follower's SyncGroup waits for the leader's; the leader assigns only
        # itself, and the follower still gets an (empty) assignment (docs/compatibility.md C16).
        sa = encode_assignment({"t": [0, 1]})
        b.send(
            SyncGroupRequest(
                group_id=group,
                generation_id=2,
                member_id=mid_b,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[],
            ),
            5,
        )
        assert sync(a, group, 2, ra.member_id, {ra.member_id: sa}).assignment == sa
        follower = b.receive()
        assert follower.error_code == E.NONE and follower.assignment == b""
        # Fencing.
        stale = a.call(
            HeartbeatRequest(
                group_id=group, generation_id=1, member_id=ra.member_id, group_instance_id=None
            ),
            4,
        )
        assert stale.error_code == E.ILLEGAL_GENERATION
        unknown = a.call(
            HeartbeatRequest(
                group_id=group, generation_id=2, member_id="nobody", group_instance_id=None
            ),
            2,
        )
        assert unknown.error_code == E.UNKNOWN_MEMBER_ID
        assert sync(a, group, 9, ra.member_id, {}).error_code == E.ILLEGAL_GENERATION
        # LeaveGroup v3+: both members in one request, one error each.
        M = LeaveGroupRequest.MemberIdentity
        leave = a.call(
            LeaveGroupRequest(
                group_id=group,
                members=[
                    M(member_id=ra.member_id, group_instance_id=None, reason=None),
                    M(member_id=mid_b, group_instance_id=None, reason="bye"),
                    M(member_id="ghost", group_instance_id=None, reason=None),
                ],
            ),
            5,
        )
        assert leave.error_code == E.NONE
        assert [m.error_code for m in leave.members] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    assert admin.describe_groups([group])[group]["group_state"] == "Empty"
    admin.close()


def test_join_v0_and_v3_need_no_member_id_round_trip(bootstrap: str) -> None:
    group = f"old-{uuid.uuid4().hex[:6]}"
    wait_coordinator(bootstrap, group)
    with WireClient(bootstrap) as c:
        r = join(c, group, "", version=0)
        assert r.error_code == E.NONE and r.generation_id == 1 and r.member_id
        assert r.protocol_name == "range"
        leave = c.call(LeaveGroupRequest(group_id=group, member_id=r.member_id), 0)
        assert leave.error_code == E.NONE
        r = join(c, group, "", version=3)
        assert r.error_code == E.NONE and r.generation_id == 3


def test_static_member_rejoin_keeps_generation(bootstrap: str) -> None:
    group = f"static-{uuid.uuid4().hex[:6]}"
    wait_coordinator(bootstrap, group)
    with WireClient(bootstrap) as c:
        r = join(c, group, "", instance="host-1")
        assert r.error_code == E.NONE and r.generation_id == 1
        assert sync(c, group, 1, r.member_id, {r.member_id: b"x"}).assignment == b"x"
    with WireClient(bootstrap) as c:  # "restarted" process: no member id
        again = join(c, group, "", instance="host-1")
        assert again.error_code == E.NONE and again.generation_id == 1
        assert again.member_id != r.member_id
        hb = c.call(
            HeartbeatRequest(
                group_id=group, generation_id=1, member_id=r.member_id, group_instance_id="host-1"
            ),
            4,
        )
        assert hb.error_code == E.FENCED_INSTANCE_ID


# -- offsets ------------------------------------------------------------------------------------


def commit(
    c: WireClient,
    group: str,
    topic: str,
    offsets: dict[int, tuple[int, int, str | None]],
    version: int = 8,
    gen: int = -1,
    member: str = "",
) -> Any:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member,
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            T(
                name=topic,
                partitions=[
                    P(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=e,
                        committed_metadata=m,
                    )
                    for p, (o, e, m) in offsets.items()
                ],
            )
        ],
    )
    return c.call(req, version)


def test_offset_commit_fetch_round_trip(bootstrap: str) -> None:
    topic = make_topic(bootstrap, 3)
    group, other = f"oc-{uuid.uuid4().hex[:6]}", f"oc2-{uuid.uuid4().hex[:6]}"
    wait_coordinator(bootstrap, group)
    wait_coordinator(bootstrap, other)
    with WireClient(bootstrap) as c:
        r = commit(c, group, topic, {0: (42, 7, "hello"), 1: (5, -1, None), 2: (9, 3, "")})
        assert [p.error_code for p in r.topics[0].partitions] == [E.NONE] * 3
        assert (
            commit(c, other, topic, {0: (1, 0, "x")}, version=2).topics[0].partitions[0].error_code
            == 0
        )
        # v5-7: one group; metadata string and leader epoch come back (docs/compatibility.md C18).
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        f = c.call(
            OffsetFetchRequest(
                group_id=group,
                topics=[T(name=topic, partition_indexes=[0, 1, 2])],
                require_stable=True,
            ),
            7,
        )
        got = {
            p.partition_index: (p.committed_offset, p.committed_leader_epoch, p.metadata)
            for p in f.topics[0].partitions
        }
        assert got == {0: (42, 7, "hello"), 1: (5, -1, ""), 2: (9, 3, "")}
        # v1 (no epoch field) and "all topics" (v2+).
        f1 = c.call(
            OffsetFetchRequest(group_id=group, topics=[T(name=topic, partition_indexes=[0])]), 1
        )
        assert f1.topics[0].partitions[0].committed_offset == 42
        fall = c.call(OffsetFetchRequest(group_id=group, topics=None), 3)
        assert fall.error_code == 0 and sorted(
            p.partition_index for p in fall.topics[0].partitions
        ) == [0, 1, 2]
        # v8+: several groups, errors per group; a group without commits gives -1.
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        TT = G.OffsetFetchRequestTopics
        f8 = c.call(
            OffsetFetchRequest(
                groups=[
                    G(
                        group_id=group,
                        member_id=None,
                        member_epoch=-1,
                        topics=[TT(name=topic, partition_indexes=[0])],
                    ),
                    G(group_id=other, member_id=None, member_epoch=-1, topics=None),
                    G(
                        group_id="never-committed",
                        member_id=None,
                        member_epoch=-1,
                        topics=[TT(name=topic, partition_indexes=[2])],
                    ),
                ],
                require_stable=False,
            ),
            9,
        )
        answers = {
            g.group_id: (
                g.error_code,
                [
                    (
                        t.name,
                        [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions],
                    )
                    for t in g.topics
                ],
            )
            for g in f8.groups
        }
        assert answers == {
            group: (0, [(topic, [(0, 42, "hello")])]),
            other: (0, [(topic, [(0, 1, "x")])]),
            "never-committed": (0, [(topic, [(2, -1, "")])]),
        }
        # Unknown topics and oversized metadata are refused per partition.
        bad = commit(c, group, "no-such-topic", {0: (1, -1, None)})
        assert bad.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        big = commit(c, group, topic, {0: (1, -1, "m" * 5000)})
        assert big.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE
        # Generation-checked commits need a member the coordinator knows.
        fenced = commit(c, group, topic, {0: (1, -1, None)}, gen=3, member="nobody")
        assert fenced.topics[0].partitions[0].error_code in (
            E.UNKNOWN_MEMBER_ID,
            E.ILLEGAL_GENERATION,
        )
        # OffsetDelete: the group is empty, so any partition may go.
        DT = OffsetDeleteRequest.OffsetDeleteRequestTopic
        d = c.call(
            OffsetDeleteRequest(
                group_id=group,
                topics=[
                    DT(name=topic, partitions=[DT.OffsetDeleteRequestPartition(partition_index=1)])
                ],
            ),
            0,
        )
        assert d.error_code == 0 and d.topics[0].partitions[0].error_code == 0
        f = c.call(
            OffsetFetchRequest(group_id=group, topics=[T(name=topic, partition_indexes=[1])]), 7
        )
        assert f.topics[0].partitions[0].committed_offset == -1
        missing = c.call(OffsetDeleteRequest(group_id="no-such-group", topics=[]), 0)
        assert missing.error_code == E.GROUP_ID_NOT_FOUND


def test_offset_delete_refused_while_subscribed(bootstrap: str) -> None:
    topic = make_topic(bootstrap, 2, records=4)
    group = f"od-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest"
    )
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(JOIN_POLL_MS)
        consumer.commit()
        with WireClient(bootstrap) as c:
            DT = OffsetDeleteRequest.OffsetDeleteRequestTopic
            d = c.call(
                OffsetDeleteRequest(
                    group_id=group,
                    topics=[
                        DT(
                            name=topic,
                            partitions=[DT.OffsetDeleteRequestPartition(partition_index=0)],
                        )
                    ],
                ),
                0,
            )
            assert d.error_code == 0
            assert d.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC
    finally:
        consumer.close()


# -- admin with kafka-python ---------------------------------------------------------------------


def test_list_describe_delete_with_admin_client(bootstrap: str) -> None:
    topic = make_topic(bootstrap, 2, records=10)
    group = f"adm-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        client_id="adm-client",
    )
    # The topic's metadata first: kafka-python's group leader assigns from what its
    # metadata holds when the JoinGroup answer arrives (on the coordinator's own
    # connection), and with group.initial.rebalance.delay.ms=0 that can come first.
    assert consumer.partitions_for_topic(topic) == {0, 1}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        got = 0
        deadline = time.monotonic() + 20
        while got < 10 and time.monotonic() < deadline:
            got += sum(len(v) for v in consumer.poll(JOIN_POLL_MS).values())
        consumer.commit()
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (
            listed[group]["group_state"] == "Stable"
            and listed[group]["protocol_type"] == "consumer"
        )
        assert group in {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
        d = admin.describe_groups([group])[group]
        assert d["group_state"] == "Stable" and d["protocol_data"] == "range"
        assert [m["client_id"] for m in d["members"]] == ["adm-client"]
        assert d["members"][0]["client_host"].startswith("/127.0.0.1")
        assert admin.delete_groups([group])[group] != "OK"  # NON_EMPTY_GROUP
        consumer.close()
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
        offsets = admin.list_group_offsets({group: None})[group]
        assert offsets[TopicPartition(topic, 0)].offset == 5
        assert admin.delete_groups([group, "never-existed"]) == {
            group: "OK",
            "never-existed": "GroupIdNotFoundError",
        }
        assert admin.list_group_offsets({group: None})[group] == {}
        assert group not in {g["group_id"] for g in admin.list_groups()}
    finally:
        consumer.close()
        admin.close()


def test_lag_metrics_and_groups_tool(bootstrap: str, group_cluster: Cluster) -> None:
    topic = make_topic(bootstrap, 2, records=20)
    group = f"lag-{uuid.uuid4().hex[:6]}"
    wait_coordinator(bootstrap, group)
    with WireClient(bootstrap) as c:
        commit(c, group, topic, {0: (4, -1, None), 1: (10, -1, None)})
    port = group_cluster.service("offsets-300").ports["metrics"]
    pattern = re.compile(
        rf'kafka_consumergroup_lag\{{consumergroup="{group}",partition="0",topic="{topic}"\}} (\S+)'
    )

    def scrape() -> str:
        """The offset store's /metrics once it shows the group's lag, else ""."""
        url = f"http://127.0.0.1:{port}/metrics"
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        return text if pattern.search(text) else ""

    text = wait_until(scrape, f"the lag of {group} in /metrics", interval=0.2)
    m = pattern.search(text)
    assert m is not None and float(m.group(1)) == 6.0
    assert (
        f'kafka_consumergroup_current_offset{{consumergroup="{group}",partition="1",topic="{topic}"}} 10.0'
        in text
    )

    def tool(*argv: str) -> tuple[int, str]:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        groups_tool.register(sub)
        args = parser.parse_args(["groups", "--bootstrap-server", bootstrap, *argv])
        out = io.StringIO()
        from kafka import KafkaAdminClient as Admin

        admin = Admin(bootstrap_servers=bootstrap)
        try:
            action = args.groups_command
            if action == "list":
                code = groups_tool.list_groups(admin, args.state, out)
            elif action == "describe":
                code = groups_tool.describe_groups(admin, args.groups, out)
            elif action == "delete":
                code = groups_tool.delete_groups(admin, args.groups, out)
            else:
                code = groups_tool.reset_offsets(admin, args, out)
        finally:
            admin.close()
        return code, out.getvalue()

    code, text = tool("list")
    assert code == 0 and re.search(rf"^{group}\s+Empty", text, re.M)
    code, text = tool("describe", group)
    assert code == 0
    assert re.search(rf"^{topic}\s+0\s+4\s+10\s+6\s+-", text, re.M), text
    assert re.search(rf"^{topic}\s+1\s+10\s+10\s+0\s+-", text, re.M), text
    code, text = tool("reset-offsets", group, "--topic", f"{topic}:0", "--to-earliest")
    assert code == 0 and "dry run" in text and re.search(rf"{topic}\s+0\s+0$", text, re.M)
    code, text = tool("reset-offsets", group, "--topic", topic, "--shift-by", "-2", "--execute")
    assert code == 0, text
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    offsets = admin.list_group_offsets({group: None})[group]
    admin.close()
    assert (offsets[TopicPartition(topic, 0)].offset, offsets[TopicPartition(topic, 1)].offset) == (
        2,
        8,
    )
    code, text = tool("delete", group, "ghost-group")
    assert code == 1 and f"{group}: deleted" in text
    code, text = tool("describe", group)
    assert code == 1 and "does not exist" in text


# -- durability ------------------------------------------------------------------------------------


def test_offsets_and_groups_survive_a_whole_cluster_restart(
    tmp_path: Path, cluster_factory: Callable[..., Cluster]
) -> None:
    data_dir = tmp_path / "restart"
    cluster = cluster_factory(data_dir=data_dir, settings=SETTINGS)
    try:
        bs = cluster.bootstrap_servers
        topic = make_topic(bs, 3, records=30)
        group = f"durable-{uuid.uuid4().hex[:6]}"
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bs,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        got = 0
        deadline = time.monotonic() + 20
        while got < 30 and time.monotonic() < deadline:
            got += sum(len(v) for v in consumer.poll(JOIN_POLL_MS).values())
        consumer.commit()
        consumer.close()
        with WireClient(bs) as c:
            commit(c, "simple-" + group, topic, {1: (7, 2, "meta")})
    finally:
        cluster.stop()
    cluster = cluster_factory(data_dir=data_dir, settings=SETTINGS)
    try:
        bs = cluster.bootstrap_servers
        wait_coordinator(bs, group)
        admin = KafkaAdminClient(bootstrap_servers=bs)
        offsets = wait_until(
            lambda: admin.list_group_offsets({group: None, "simple-" + group: None}),
            "the committed offsets after the restart",
            timeout=20,
            ignoring=(KafkaError,),
        )
        assert {tp.partition: o.offset for tp, o in offsets[group].items()} == {0: 10, 1: 10, 2: 10}
        simple = offsets["simple-" + group][TopicPartition(topic, 1)]
        assert (simple.offset, simple.metadata, simple.leader_epoch) == (7, "meta", 2)
        d = admin.describe_groups([group])[group]
        assert d["group_state"] == "Empty" and d["protocol_type"] == "consumer"
        admin.close()
        # A consumer of the same group resumes where the group left off.
        producer = KafkaProducer(bootstrap_servers=bs)
        producer.send(topic, b"after-restart", partition=0)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest"
        )
        seen: list[bytes] = []
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            for records in consumer.poll(JOIN_POLL_MS).values():
                seen += [r.value for r in records]
        consumer.close()
        assert seen == [b"after-restart"]
    finally:
        cluster.stop()


def test_concurrent_commits_from_many_groups(bootstrap: str) -> None:
    topic = make_topic(bootstrap, 1)
    groups = [f"many-{i}-{uuid.uuid4().hex[:4]}" for i in range(20)]
    for g in groups:
        wait_coordinator(bootstrap, g)
    errors: list[Any] = []

    def run(g: str) -> None:
        try:
            with WireClient(bootstrap) as c:
                for i in range(10):
                    r = commit(c, g, topic, {0: (i, -1, None)})
                    assert r.topics[0].partitions[0].error_code == 0
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    offsets = admin.list_group_offsets({g: None for g in groups})
    admin.close()
    assert {g: offsets[g][TopicPartition(topic, 0)].offset for g in groups} == dict.fromkeys(
        groups, 9
    )
