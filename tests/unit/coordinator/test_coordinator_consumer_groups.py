"""KIP-848 consumer groups of one shard, driven with a hand-kept clock: epochs,
incremental reconciliation (revoke before reassign), fencing errors, static members,
session timeouts, and a shard rebuilt from its records."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from odradek.consumer_offsets import consumer_group_records as rec
from odradek.coordinator.assignors import AssignmentSpec, range_, uniform
from odradek.coordinator.consumer_groups import ConsumerHeartbeat, HeartbeatResult
from odradek.coordinator.shard import GroupConfig, GroupShard, StoreWrite
from odradek.coordinator.timers import ManualScheduler
from odradek.protocol.errors import ErrorCode as E

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class Harness:
    def __init__(
        self, topics: dict[str, tuple[uuid.UUID, int]] | None = None, **config: Any
    ) -> None:
        self.clock = ManualScheduler()
        self.writes: list[StoreWrite] = []
        self.log: dict[bytes, bytes] = {}  # what compaction keeps
        self.topics = topics if topics is not None else {"t1": (T1, 6)}
        self.shard = GroupShard(
            0, GroupConfig(**config), self.clock, self.writes.append, lambda: dict(self.topics)
        )

    def flush(self) -> None:
        while self.writes:
            w = self.writes.pop(0)
            for key, value in w.records or []:
                if value is None:
                    self.log.pop(key, None)
                else:
                    self.log[key] = value
            if w.records is None and w.value is None:
                for key in [k for k in self.log if rec.decode_key(k).group == w.group_id]:
                    del self.log[key]
            w.done(0)

    def hb(
        self, member: str, epoch: int, owned: dict[uuid.UUID, list[int]] | None = None, **kw: Any
    ) -> HeartbeatResult:
        fields: dict[str, Any] = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["t1"]}
        if epoch != 0:
            fields = {}
        fields.update(kw)
        req = ConsumerHeartbeat(
            group_id="g",
            member_id=member,
            member_epoch=epoch,
            topic_partitions=None if owned is None else {t: frozenset(p) for t, p in owned.items()},
            **fields,
        )
        out: list[HeartbeatResult] = []
        self.shard.consumer_group_heartbeat(req, out.append)
        self.flush()
        assert len(out) == 1
        return out[0]


def parts(result: HeartbeatResult) -> dict[uuid.UUID, list[int]]:
    assert result.assignment is not None
    return {t: sorted(p) for t, p in result.assignment.items()}


def test_first_member_gets_everything_then_second_member_incrementally() -> None:
    h = Harness()
    a = h.hb("a", 0)
    assert a.error == 0 and a.member_epoch == 1 and parts(a) == {T1: [0, 1, 2, 3, 4, 5]}
    assert a.heartbeat_interval_ms == 5000
    b = h.hb("b", 0)
    # b joins at epoch 2 but its partitions are still a's: nothing yet, and it is
    # asked back sooner than the configured interval.
    assert b.member_epoch == 2 and parts(b) == {}
    assert b.heartbeat_interval_ms == 100
    # a is told to revoke three partitions and keeps its epoch until it has.
    a2 = h.hb("a", 1, {T1: [0, 1, 2, 3, 4, 5]})
    assert a2.member_epoch == 1 and sum(len(p) for p in parts(a2).values()) == 3
    kept = parts(a2)[T1]
    # While a still owns them, b does not get them.
    assert h.hb("b", 2, {}).assignment is None
    a3 = h.hb("a", 1, {T1: kept})
    assert a3.member_epoch == 2
    b2 = h.hb("b", 2, {})
    assert sorted(parts(b2)[T1]) == sorted(set(range(6)) - set(kept))
    assert b2.heartbeat_interval_ms == 5000
    described = h.shard.consumer.describe("g")
    assert described.state == "Stable" and described.group_epoch == 2


def test_fencing_and_validation_errors() -> None:
    h = Harness()
    h.hb("a", 0)
    assert h.hb("a", 5).error == E.FENCED_MEMBER_EPOCH
    assert h.hb("nobody", 1).error == E.UNKNOWN_MEMBER_ID
    assert h.hb("c", 0, server_assignor="sticky").error == E.UNSUPPORTED_ASSIGNOR
    assert h.hb("c", 0, subscribed_topic_regex="(").error == E.INVALID_REGULAR_EXPRESSION
    assert h.hb("c", 0, rebalance_timeout_ms=-1).error == E.INVALID_REQUEST
    assert h.hb("c", 0, subscribed_topic_names=None).error == E.INVALID_REQUEST
    assert h.hb("c", 0, owned={T1: [0]}).error == E.INVALID_REQUEST
    # Offset commits: stale and future epochs, unknown members.
    assert h.shard.validate_offset_commit("g", "a", None, 1) == E.NONE
    assert h.shard.validate_offset_commit("g", "a", None, 0) == E.STALE_MEMBER_EPOCH
    assert h.shard.validate_offset_commit("g", "a", None, 2) == E.FENCED_MEMBER_EPOCH
    assert h.shard.validate_offset_commit("g", "zz", None, 1) == E.UNKNOWN_MEMBER_ID
    assert h.shard.validate_offset_commit("g", "", None, -1) == E.NONE
    consumer = h.shard.consumer
    assert consumer.validate_offset_fetch("g", "a", 1) == E.NONE
    assert consumer.validate_offset_fetch("g", "a", 0) == E.STALE_MEMBER_EPOCH
    assert consumer.validate_offset_fetch("g", "zz", 1) == E.UNKNOWN_MEMBER_ID
    assert consumer.validate_offset_fetch("g", "", -1) == E.NONE
    assert consumer.validate_offset_fetch("classic", "x", 3) == E.NONE


def test_leave_and_session_timeout_bump_the_epoch() -> None:
    h = Harness(consumer_session_timeout_ms=1000)
    h.hb("a", 0)
    h.hb("b", 0)
    assert h.hb("b", -1).member_epoch == -1
    a = h.hb("a", 1, {T1: [0, 1, 2, 3, 4, 5]})
    assert a.member_epoch == 3
    h.clock.advance(1001)
    h.flush()
    assert h.shard.consumer.describe("g").state == "Empty"


def test_static_member_returns_without_rebalance() -> None:
    h = Harness()
    h.hb("a", 0, instance_id="i1")
    h.hb("b", 0, instance_id="i2")
    h.hb("a", 1, {T1: list(range(6))})
    a = h.hb("a", 1, {T1: [0, 1, 2]})
    epoch = h.shard.consumer.groups["g"].group_epoch
    assert h.hb("a", -2, instance_id="i1").member_epoch == -2
    # Another process with the same instance id while a is still in: refused.
    assert h.hb("b2", 0, instance_id="i2").error == E.UNRELEASED_INSTANCE_ID
    back = h.hb("a-new", 0, instance_id="i1")
    assert back.error == 0 and back.member_epoch == a.member_epoch
    assert parts(back) == parts(a)
    assert h.shard.consumer.groups["g"].group_epoch == epoch


def test_topic_growth_and_regex_subscription() -> None:
    h = Harness()
    h.hb("a", 0, subscribed_topic_names=[], subscribed_topic_regex="t.*")
    h.topics["t2"] = (T2, 2)
    a = h.hb("a", 1, {T1: list(range(6))})
    assert parts(a) == {T1: list(range(6)), T2: [0, 1]}
    h.topics["t2"] = (T2, 3)
    h.shard.consumer.topics_changed()
    h.flush()
    a = h.hb("a", a.member_epoch, {T1: list(range(6)), T2: [0, 1]})
    assert parts(a)[T2] == [0, 1, 2]


def test_shard_rebuilt_from_records() -> None:
    h = Harness()
    h.hb("a", 0, instance_id="i1")
    h.hb("b", 0)
    h.hb("a", 1, {T1: list(range(6))})
    before = h.shard.consumer.describe("g")
    rebuilt = Harness()
    rebuilt.shard.consumer.load(list(h.log.items()))
    after = rebuilt.shard.consumer.describe("g")
    assert (after.group_epoch, after.assignment_epoch, after.state) == (
        before.group_epoch,
        before.assignment_epoch,
        before.state,
    )
    by_id = {m.member_id: m for m in after.members}
    for m in before.members:
        assert by_id[m.member_id].assignment == m.assignment
        assert by_id[m.member_id].member_epoch == m.member_epoch
    assert rebuilt.hb("b", 2, {}).error == 0
    # Deleting the group needs it empty.
    box: list[dict[str, int]] = []
    h.shard.delete_groups(["g"], box.append)
    assert box == [{"g": E.NON_EMPTY_GROUP}]


def test_classic_and_consumer_groups_keep_their_ids() -> None:
    h = Harness()
    h.hb("a", 0)
    assert ("g", "consumer", "Stable", "consumer") in h.shard.list_groups()
    described = h.shard.describe("g")
    assert (described.error, described.state) == (E.GROUP_ID_NOT_FOUND, "Dead")
    assert described.message == "Group g is not a classic group."


@pytest.mark.parametrize("assignor", [uniform, range_])
def test_assignors_balance_and_cover(assignor: Any) -> None:
    subs = {m: frozenset({T1, T2}) for m in ("a", "b", "c")}
    out = assignor(AssignmentSpec(subs, {T1: 7, T2: 2}, {}))
    counts = sorted(sum(len(p) for p in a.values()) for a in out.values())
    assert sum(counts) == 9
    seen = [(t, p) for a in out.values() for t, ps in a.items() for p in ps]
    assert len(seen) == len(set(seen))
    if assignor is uniform:
        assert counts == [3, 3, 3]


def test_uniform_is_sticky() -> None:
    subs = {m: frozenset({T1}) for m in ("a", "b")}
    first = uniform(AssignmentSpec(subs, {T1: 6}, {}))
    subs3 = {**subs, "c": frozenset({T1})}
    second = uniform(AssignmentSpec(subs3, {T1: 6}, first))
    for m in ("a", "b"):
        assert second[m][T1] <= first[m][T1] and len(second[m][T1]) == 2


def test_record_roundtrip() -> None:
    key = rec.ConsumerGroupKey(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    value = rec.CurrentAssignmentValue(3, 2, 1, {T1: frozenset({0, 1})}, {T2: frozenset({4})})
    raw = rec.encode_value(key.record_type, value)
    assert raw is not None and raw[:2] == b"\x00\x00"
    assert rec.decode_key(rec.encode_key(key)) == key
    assert rec.decode_value(key.record_type, raw) == value
    member = rec.MemberMetadataValue("i", None, "c", "/h", ["t"], "x.*", 5000, "range")
    raw = rec.encode_value(rec.CONSUMER_GROUP_MEMBER_METADATA, member)
    assert raw is not None
    assert rec.decode_value(rec.CONSUMER_GROUP_MEMBER_METADATA, raw) == member
    with pytest.raises(rec.CoordinatorRecordError):
        rec.decode_value(rec.CONSUMER_GROUP_MEMBER_METADATA, raw[:-3])
    # Key bytes as Kafka writes them: type 3, then the group as an INT16-length string.
    assert rec.encode_key(rec.ConsumerGroupKey(3, "g")) == b"\x00\x03\x00\x01g"


def _two_members_settled(h: Harness) -> tuple[list[int], list[int]]:
    """a and b share t1 (three partitions each), both Stable at epoch 2 and each has
    reported what it owns; returns (a's, b's) partitions."""
    h.hb("a", 0)
    h.hb("b", 0)
    a = h.hb("a", 1, {T1: list(range(6))})
    kept = parts(a)[T1]
    assert h.hb("a", 1, {T1: kept}).member_epoch == 2
    b = h.hb("b", 2, {})
    released = parts(b)[T1]
    assert h.hb("b", 2, {T1: released}).assignment is None  # acknowledged
    return kept, released


def test_a_retried_heartbeat_gets_the_assignment_its_lost_response_carried() -> None:
    """The rolling-migration stall: b waits for partitions a is releasing; the heartbeat
    that hands them over (same member epoch) times out on the client, which retries the
    very same request (librdkafka's heartbeat timeout is the heartbeat interval, 100 ms
    while waiting): same epoch, no TopicPartitions. The coordinator must answer the
    assignment again, or b stays Stable with partitions its client never took."""
    h = Harness()
    h.hb("a", 0)
    assert h.hb("b", 0).member_epoch == 2  # waiting for a's partitions
    a = h.hb("a", 1, {T1: list(range(6))})
    kept = parts(a)[T1]
    assert h.hb("b", 2, {}).assignment is None  # a still owns them
    assert h.hb("a", 1, {T1: kept}).member_epoch == 2  # a released them
    lost = h.hb("b", 2)  # b gets them: this response is lost
    wanted = sorted(set(range(6)) - set(kept))
    assert parts(lost) == {T1: wanted}
    retried = h.hb("b", 2)  # the same request again
    assert retried.member_epoch == 2 and parts(retried) == {T1: wanted}
    assert parts(h.hb("b", 2)) == {T1: wanted}  # until b says it owns them
    assert h.hb("b", 2, {T1: wanted}).assignment is None
    assert h.hb("b", 2).assignment is None


def test_a_heartbeat_at_the_previous_epoch_gets_the_assignment() -> None:
    """The response that moved b to a new epoch with more partitions was lost: the
    retried request still names the previous epoch and reports nothing. It is
    accepted (Odradek's deviation) and must carry the assignment."""
    h = Harness()
    kept, _mine = _two_members_settled(h)
    assert h.hb("a", 2, {T1: kept}).assignment is None
    assert h.hb("a", -1).member_epoch == -1  # a leaves: b gets everything at epoch 3
    lost = h.hb("b", 2)
    assert lost.member_epoch == 3 and parts(lost) == {T1: list(range(6))}
    retried = h.hb("b", 2)
    assert retried.error == 0 and retried.member_epoch == 3
    assert parts(retried) == {T1: list(range(6))}
    assert h.hb("b", 3, {T1: list(range(6))}).assignment is None


def test_stable_member_reporting_fewer_partitions_gets_its_assignment_again() -> None:
    """KIP-848: a member reports what it owns in TopicPartitions. A Stable member whose
    report differs from its assignment at the same epoch is sent the assignment."""
    h = Harness()
    _kept, mine = _two_members_settled(h)
    r = h.hb("b", 2, {T1: mine[1:]})
    assert r.member_epoch == 2 and parts(r) == {T1: mine}


def test_admin_removes_a_static_member_by_instance_id() -> None:
    """LeaveGroup v3+ naming members by group.instance.id alone (AdminClient
    removeMembersFromConsumerGroup; Kafka's classicGroupLeaveToConsumerGroup): the
    static member goes, with its records, in one new group epoch; an unknown instance
    id answers UNKNOWN_MEMBER_ID, a member id that is not the instance's
    FENCED_INSTANCE_ID, each member on its own."""
    h = Harness()
    h.hb("a", 0, instance_id="i1")
    h.hb("b", 0, instance_id="i2")
    h.hb("a", 1, {T1: list(range(6))})
    group = h.shard.consumer.groups["g"]
    epoch = group.group_epoch
    top, errors = h.shard.leave_group("g", [("", "i1"), ("", "i9"), ("not-b", "i2")])
    h.flush()
    assert (top, errors) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID])
    assert set(group.members) == {"b"} and group.static_members == {"i2": "b"}
    assert group.group_epoch == epoch + 1
    assert not [k for k in h.log if rec.decode_key(k).member_id == "a"]
    # The removed member's client is told it is unknown (it rejoins); b gets everything.
    assert h.hb("a", 2, {T1: [0, 1, 2]}).error == E.UNKNOWN_MEMBER_ID
    b = h.hb("b", 2, {})
    assert b.member_epoch == epoch + 1 and parts(b) == {T1: list(range(6))}
    # A new process with the removed instance id joins as a new member.
    back = h.hb("a2", 0, instance_id="i1")
    assert back.error == E.NONE and group.static_members["i1"] == "a2"


def test_admin_removal_of_a_departed_static_member_and_of_several_at_once() -> None:
    """A static member that closed (epoch -2) keeps its partitions until its session
    ends; an administrator removes it at once, and its partitions move. Several
    members removed together (a dynamic one by member id, KAFKA-18188) make one new
    group epoch."""
    h = Harness()
    h.hb("a", 0, instance_id="i1")
    h.hb("b", 0)
    h.hb("c", 0)
    group = h.shard.consumer.groups["g"]
    assert h.hb("a", -2, instance_id="i1").member_epoch == -2
    # Described as Kafka writes it: member epoch -2, its partitions kept.
    [departed] = [m for m in h.shard.consumer.describe("g").members if m.member_id == "a"]
    assert departed.member_epoch == -2 and departed.assignment
    epoch = group.group_epoch
    assert h.shard.leave_group("g", [("a", "i1"), ("b", None)]) == (E.NONE, [E.NONE, E.NONE])
    h.flush()
    assert set(group.members) == {"c"} and group.group_epoch == epoch + 1
    assert h.shard.leave_group("g", [("b", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    c = h.hb("c", 3, {})
    assert c.member_epoch == epoch + 1 and parts(c) == {T1: list(range(6))}


def test_group_with_a_departed_static_member_is_reconciling() -> None:
    """Kafka writes epoch -2 for a static member that left, so the group is not
    reconciled (Reconciling) until the instance returns."""
    h = Harness()
    h.hb("a", 0, instance_id="i1")
    h.hb("b", 0)
    a = h.hb("a", 1, {T1: list(range(6))})
    kept = parts(a)[T1]
    h.hb("a", 1, {T1: kept})
    b = h.hb("b", 2, {})
    h.hb("b", 2, {T1: parts(b)[T1]})
    assert h.shard.consumer.describe("g").state == "Stable"
    h.hb("a", -2, instance_id="i1")
    assert h.shard.consumer.describe("g").state == "Reconciling"
    back = h.hb("a2", 0, instance_id="i1")
    assert parts(back) == {T1: kept}
    assert h.shard.consumer.describe("g").state == "Stable"
