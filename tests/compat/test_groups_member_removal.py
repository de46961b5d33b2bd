"""Removing members of a KIP-848 consumer group with LeaveGroup, as
``AdminClient.removeMembersFromConsumerGroup`` of the Java client (kafka-clients 4.3.0)
and ``kafka-consumer-groups.sh --delete`` tooling do (Kafka 4's
``classicGroupLeaveToConsumerGroup``, KAFKA-18188): a static consumer-protocol member
named by ``group.instance.id`` alone is removed at once with a new group epoch (its
partitions move without waiting for its session to end), an unknown instance id
answers UNKNOWN_MEMBER_ID and a member id that is not the instance's
FENCED_INSTANCE_ID, per member; removing every member makes the running librdkafka
consumers rejoin. Members are librdkafka 2.16 consumers with ``group.protocol=consumer``.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from compat_clients import JavaClient
from compat_groups import describe_group, make_topic
from confluent_kafka import Consumer
from helpers.wire import WireClient

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import LeaveGroupRequest
from odradek.tools.launcher import Cluster

pytestmark = pytest.mark.compat

PARTITIONS = 6
# Long sessions: a departed static member keeps its partitions this long unless an
# administrator removes it.
SESSION_S = 60


@pytest.fixture(scope="module")
def bootstrap(module_cluster_factory: Callable[..., Cluster]) -> str:
    return module_cluster_factory(
        settings={
            "group.consumer.heartbeat.interval.ms": "300",
            "group.consumer.session.timeout.ms": str(SESSION_S * 1000),
        }
    ).bootstrap_servers


def member(bootstrap: str, group: str, topic: str, **extra: Any) -> Any:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            **extra,
        }
    )
    c.subscribe([topic])
    return c


def settle(consumers: list[Any], timeout: float = 60.0) -> list[set[int]]:
    """Polls until every consumer owns something and together they own every
    partition, checking that none is ever owned twice."""
    deadline = time.monotonic() + timeout
    while True:
        for c in consumers:
            c.poll(0.02)
        owned = [{tp.partition for tp in c.assignment()} for c in consumers]
        flat = [p for ps in owned for p in ps]
        assert len(flat) == len(set(flat)), f"a partition owned twice: {owned}"
        if all(owned) and sorted(flat) == list(range(PARTITIONS)):
            return owned
        assert time.monotonic() < deadline, f"assignments never settled: {owned}"


def poll(consumers: list[Any]) -> None:
    """Polls without the ownership check: a live member removed by an administrator
    keeps its partitions until its next heartbeat tells it it is unknown, while the
    coordinator may already have given them to another member (as Kafka does, as when
    it fences a member whose session ended)."""
    for c in consumers:
        c.poll(0.02)


def described(bootstrap: str, group: str) -> Any:
    group_state = describe_group(bootstrap, group)
    assert group_state.error_code == E.NONE
    return group_state


def groups_describe(bootstrap: str, group: str) -> str:
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
    return cli.stdout


def test_admin_removes_a_departed_static_member_by_instance_id(
    bootstrap: str, java_classpath: str
) -> None:
    """A static member closes (a temporary leave, epoch -2): its partitions stay
    reserved for its return. The Java admin client removes it by instance id and the
    other member gets them at once, long before the session would have ended."""
    topic = make_topic(bootstrap, "rm", PARTITIONS)
    group = f"rm-static-{uuid.uuid4().hex[:6]}"
    s = member(bootstrap, group, topic, **{"group.instance.id": "s1"})
    d = member(bootstrap, group, topic)
    try:
        settle([s, d])
        s.close()
        closed_at = time.monotonic()
        g = described(bootstrap, group)
        [gone] = [m for m in g.members if m.instance_id == "s1"]
        assert gone.member_epoch == -2  # as Kafka shows a static member that left
        assert gone.assignment.topic_partitions  # its partitions kept for its return
        epoch = g.group_epoch
        out = groups_describe(bootstrap, group)
        [row] = [line for line in out.splitlines() if " s1 " in line]
        assert row.split()[1:4] == ["consumer", "-2", "s1"], out
        rows = JavaClient(bootstrap, java_classpath).run(
            "remove-members", {"group": group, "instances": "s1,nobody"}
        )
        assert rows == [
            ["MEMBER", "s1", "NONE"],
            ["MEMBER", "nobody", "UnknownMemberIdException"],
            ["REMOVED", "UnknownMemberIdException"],
        ]
        assert settle([d]) == [set(range(PARTITIONS))]
        assert time.monotonic() - closed_at < SESSION_S
        g = described(bootstrap, group)
        assert [m.instance_id for m in g.members] == [None]
        assert g.group_epoch > epoch
    finally:
        d.close()


def test_leave_group_by_instance_id_errors_and_removal_of_a_running_member(
    bootstrap: str,
) -> None:
    """LeaveGroup v5 on the wire: per member, UNKNOWN_MEMBER_ID for an unknown instance
    id, FENCED_INSTANCE_ID for a member id that is not the instance's; the running
    static member named by its instance id is removed (one new group epoch), its client
    is told it is unknown on its next heartbeat and rejoins (another epoch)."""
    topic = make_topic(bootstrap, "rm", PARTITIONS)
    group = f"rm-wire-{uuid.uuid4().hex[:6]}"
    s = member(bootstrap, group, topic, **{"group.instance.id": "s1"})
    d = member(bootstrap, group, topic)
    try:
        settle([s, d])
        epoch = described(bootstrap, group).group_epoch
        M = LeaveGroupRequest.MemberIdentity
        with WireClient(bootstrap) as wire:
            r = wire.call(
                LeaveGroupRequest(
                    group_id=group,
                    members=[
                        M(member_id="", group_instance_id="nobody", reason=None),
                        M(member_id="not-s1", group_instance_id="s1", reason=None),
                    ],
                ),
                5,
            )
            assert r.error_code == E.NONE
            assert [(m.group_instance_id, m.error_code) for m in r.members] == [
                ("nobody", E.UNKNOWN_MEMBER_ID),
                ("s1", E.FENCED_INSTANCE_ID),
            ]
            assert described(bootstrap, group).group_epoch == epoch
            r = wire.call(
                LeaveGroupRequest(
                    group_id=group,
                    members=[M(member_id="", group_instance_id="s1", reason="admin")],
                ),
                5,
            )
            assert r.error_code == E.NONE
            assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
                ("", "s1", E.NONE)
            ]
        # Removed (one epoch), then back (librdkafka keeps its member id): one more.
        deadline = time.monotonic() + 60
        while True:
            poll([s, d])
            after = described(bootstrap, group)
            back = [m for m in after.members if m.instance_id == "s1"]
            if back and after.group_state == "Stable" and after.group_epoch >= epoch + 2:
                break
            assert time.monotonic() < deadline, after
        settle([s, d])
    finally:
        s.close()
        d.close()


def test_admin_removes_every_member_by_member_id(bootstrap: str, java_classpath: str) -> None:
    """removeMembersFromConsumerGroup without members (KAFKA-18188): the admin client
    describes the group and removes each consumer-protocol member by its member id;
    the running consumers rejoin and share the partitions again."""
    topic = make_topic(bootstrap, "rm", PARTITIONS)
    group = f"rm-all-{uuid.uuid4().hex[:6]}"
    consumers = [member(bootstrap, group, topic) for _ in range(2)]
    try:
        settle(consumers)
        epoch = described(bootstrap, group).group_epoch
        rows = JavaClient(bootstrap, java_classpath).run("remove-members", {"group": group})
        assert rows == [["REMOVED", "OK"]]
        # Both removed in one epoch, then each rejoins (one epoch each).
        deadline = time.monotonic() + 60
        while True:
            poll(consumers)
            after = described(bootstrap, group)
            if (
                len(after.members) == 2
                and after.group_state == "Stable"
                and after.group_epoch >= epoch + 3
            ):
                break
            assert time.monotonic() < deadline, after
        settle(consumers)
    finally:
        for c in consumers:
            c.close()
