"""Online migration between classic and consumer groups (KIP-848), one shard driven
with a hand-kept clock: a classic group upgraded by a ConsumerGroupHeartbeat keeps its
members' partitions, its classic members rejoin and sync inside the consumer group
(never a partition owned twice), the group goes back to classic when the last
consumer-protocol member leaves, each as ``group.consumer.migration.policy`` allows, and
a shard rebuilt from the records keeps the classic members."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from odradek.consumer_offsets import consumer_group_records as rec
from odradek.consumer_offsets.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    decode_group_value,
    decode_key,
)
from odradek.coordinator.consumer_groups import ConsumerHeartbeat, HeartbeatResult
from odradek.coordinator.group import GroupState, JoinResult, SyncResult
from odradek.coordinator.shard import (
    GroupConfig,
    GroupShard,
    JoinRequest,
    StoreWrite,
    SyncRequest,
)
from odradek.coordinator.timers import ManualScheduler
from odradek.protocol.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from odradek.protocol.errors import ErrorCode as E

T1 = uuid.UUID(int=1)
SUB = encode_subscription(["t1"], version=1)


class Harness:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualScheduler()
        self.writes: list[StoreWrite] = []
        self.log: dict[bytes, bytes] = {}  # raw records, as compaction keeps them
        self.classic_values: dict[str, Any] = {}
        cfg = {"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 1000, **config}
        self.shard = self.make_shard(cfg)
        self.cfg = cfg

    def make_shard(self, cfg: dict[str, Any]) -> GroupShard:
        return GroupShard(
            0, GroupConfig(**cfg), self.clock, self.writes.append, lambda: {"t1": (T1, 6)}
        )

    def flush(self) -> None:
        while self.writes:
            w = self.writes.pop(0)
            for key, value in w.records or []:
                if value is None:
                    self.log.pop(key, None)
                else:
                    self.log[key] = value
            if w.records is None:
                self.classic_values[w.group_id] = w.value
            w.done(0)

    # -- classic requests ---------------------------------------------------------------
    def join(
        self, member_id: str, owned: list[int] | None = None, instance_id: str | None = None
    ) -> JoinResult:
        meta = SUB if owned is None else encode_subscription(["t1"], owned_partitions={"t1": owned})
        out: list[JoinResult] = []
        self.shard.join_group(
            JoinRequest(
                group_id="g",
                member_id=member_id,
                protocol_type="consumer",
                protocols=[("range", meta)],
                session_timeout_ms=10_000,
                rebalance_timeout_ms=30_000,
                group_instance_id=instance_id,
                client_id="classic",
                require_known_member_id=True,
            ),
            out.append,
        )
        self.flush()
        assert len(out) <= 1
        return out[0] if out else JoinResult(-1)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes]) -> SyncResult:
        out: list[SyncResult] = []
        self.shard.sync_group(
            SyncRequest("g", generation, member_id, assignments, protocol_type="consumer"),
            out.append,
        )
        self.flush()
        return out[0] if out else SyncResult(-1)

    def classic_group(self) -> tuple[str, str, int]:
        """A Stable classic group of generation 3 (as a shard rebuilds it from its
        record): a owns p0-2, b owns p3-5."""
        members = [
            MemberValue(m, "classic", "/127.0.0.1", 30_000, 10_000, SUB, encode_assignment(ps))
            for m, ps in (("a", {"t1": [0, 1, 2]}), ("b", {"t1": [3, 4, 5]}))
        ]
        self.shard.load_group("g", GroupValue("consumer", 3, "range", "a", 0, members))
        return "a", "b", 3

    def classic_owned(self, member_id: str, generation: int) -> set[int]:
        result = self.sync(member_id, generation, {})
        assert result.error == E.NONE, result
        return {
            p
            for tp in decode_assignment(result.assignment).assigned_partitions
            for p in tp.partitions
        }

    # -- consumer heartbeats ------------------------------------------------------------
    def hb(
        self,
        member: str,
        epoch: int,
        owned: list[int] | None = None,
        instance_id: str | None = None,
    ) -> HeartbeatResult:
        fields: dict[str, Any] = (
            {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["t1"]} if epoch == 0 else {}
        )
        req = ConsumerHeartbeat(
            group_id="g",
            member_id=member,
            member_epoch=epoch,
            instance_id=instance_id,
            topic_partitions=None if owned is None else {T1: frozenset(owned)},
            **fields,
        )
        out: list[HeartbeatResult] = []
        self.shard.consumer_group_heartbeat(req, out.append)
        self.flush()
        assert len(out) == 1
        return out[0]


def owned_of(result: HeartbeatResult, before: set[int]) -> set[int]:
    if result.assignment is None:
        return before
    return set(result.assignment.get(T1, frozenset()))


def test_upgrade_keeps_assignments_and_classic_members_rejoin_inside() -> None:
    h = Harness()
    a, b, generation = h.classic_group()
    c = h.hb("c", 0)
    assert c.error == E.NONE and c.member_epoch == generation + 1
    group = h.shard.consumer.groups["g"]
    assert "g" not in h.shard.groups
    assert {m.member_id for m in group.members.values() if m.uses_classic_protocol} == {a, b}
    assert group.members[a].assigned == {T1: frozenset({0, 1, 2})}
    # Nothing for c while the classic members still own everything.
    owned = {a: {0, 1, 2}, b: {3, 4, 5}, "c": owned_of(c, set())}
    assert owned["c"] == set()
    # The classic members learn of the new epoch through their heartbeats.
    assert h.shard.heartbeat("g", generation, a, None) == E.REBALANCE_IN_PROGRESS
    # The classic group's stored record is gone; the consumer group's records are there.
    assert all(not isinstance(decode_key(k), GroupKey) for k in h.log)
    # a rejoins (eager: it gave everything up first) and gets its share.
    ja = h.join(a)
    assert ja.error == E.NONE and ja.generation_id == generation + 1
    owned[a] = h.classic_owned(a, ja.generation_id)
    jb = h.join(b)
    owned[b] = h.classic_owned(b, jb.generation_id)
    c2 = h.hb("c", c.member_epoch, sorted(owned["c"]))
    owned["c"] = owned_of(c2, owned["c"])
    flat = [p for ps in owned.values() for p in ps]
    assert sorted(flat) == list(range(6)), owned
    assert all(len(ps) == 2 for ps in owned.values()), owned
    assert h.shard.heartbeat("g", jb.generation_id, b, None) == E.NONE
    # Offsets: a classic member commits with its generation, checked as Kafka does.
    assert h.shard.validate_offset_commit("g", a, None, ja.generation_id) == E.NONE
    assert h.shard.validate_offset_commit("g", a, None, generation) == E.ILLEGAL_GENERATION
    # DescribeGroups (classic API) says the group is not a classic group.
    assert h.shard.describe("g").error == E.GROUP_ID_NOT_FOUND
    described = h.shard.consumer.describe("g")
    assert sorted(m.classic for m in described.members) == [False, True, True]


def test_disabled_policy_refuses_the_upgrade() -> None:
    h = Harness(consumer_migration_policy="disabled")
    h.classic_group()
    refused = h.hb("c", 0)
    assert refused.error == E.GROUP_ID_NOT_FOUND
    assert refused.message == "Group g is not a consumer group."
    assert "g" in h.shard.groups and "g" not in h.shard.consumer.groups


def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    h = Harness()
    a, b, _ = h.classic_group()
    c = h.hb("c", 0)
    left = h.hb("c", -1)
    assert left.error == E.NONE and left.member_epoch == -1
    classic = h.shard.groups["g"]
    assert "g" not in h.shard.consumer.groups
    assert classic.is_(GroupState.PREPARING_REBALANCE)
    assert classic.generation_id == c.member_epoch  # the group epoch, as Kafka converts it
    assert set(classic.members) == {a, b}
    # Records: no consumer group record left, the classic group stored.
    assert not [k for k in h.log if not isinstance(decode_key(k), GroupKey)]
    stored = decode_group_value(h.log[next(iter(h.log))])
    assert {m.member_id for m in stored.members} == {a, b}
    # The classic members rejoin and the classic rebalance completes.
    assert h.shard.heartbeat("g", classic.generation_id, a, None) == E.REBALANCE_IN_PROGRESS
    first: list[JoinResult] = []
    h.shard.join_group(
        JoinRequest("g", a, "consumer", [("range", SUB)], 10_000, 30_000), first.append
    )
    jb = h.join(b)
    h.flush()
    assert jb.error == E.NONE and first[0].error == E.NONE
    assert h.shard.groups["g"].is_(GroupState.COMPLETING_REBALANCE)


def settled_with_static_consumer_member(h: Harness) -> tuple[str, str, dict[str, set[int]]]:
    """Classic members a and b share the partitions with the static consumer-protocol
    member c (instance i1), everything reconciled."""
    a, b, _ = h.classic_group()
    c = h.hb("c", 0, instance_id="i1")
    owned: dict[str, set[int]] = {}
    generations: dict[str, int] = {}
    for m in (a, b):
        joined = h.join(m)
        assert joined.error == E.NONE, joined
        owned[m], generations[m] = h.classic_owned(m, joined.generation_id), joined.generation_id
    c2 = h.hb("c", c.member_epoch, [])
    owned["c"] = owned_of(c2, set())
    for m in (a, b):  # released by c's predecessors: the classic members rejoin for the rest
        if h.shard.heartbeat("g", generations[m], m, None) == E.REBALANCE_IN_PROGRESS:
            joined = h.join(m, sorted(owned[m]))
            owned[m] = h.classic_owned(m, joined.generation_id)
    c3 = h.hb("c", c2.member_epoch, sorted(owned["c"]))
    owned["c"] = owned_of(c3, owned["c"])
    group = h.shard.consumer.groups["g"]
    assert group.state() == "Stable", h.shard.consumer.describe("g")
    assert sorted(p for ps in owned.values() for p in ps) == list(range(6)), owned
    return a, b, owned


def test_downgrade_when_a_classic_static_member_replaces_the_last_consumer_member() -> None:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId: the classic newcomer with
    c's instance id converts the group to a Stable classic group, no rebalance, and
    takes over c's partitions; a and b carry on at their generation."""
    h = Harness()
    a, b, owned = settled_with_static_consumer_member(h)
    epoch = h.shard.consumer.groups["g"].group_epoch
    assert h.hb("c", -2, instance_id="i1").member_epoch == -2  # static member closes
    joined = h.join("", instance_id="i1")
    assert joined.error == E.NONE and joined.member_id not in ("", "c")
    assert joined.generation_id == epoch
    assert "g" not in h.shard.consumer.groups
    classic = h.shard.groups["g"]
    assert classic.is_(GroupState.STABLE) and classic.generation_id == epoch
    assert set(classic.members) == {a, b, joined.member_id}
    assert classic.static_member_id("i1") == joined.member_id
    # No rebalance: everyone's heartbeat is fine and the newcomer gets c's partitions.
    for m in (a, b, joined.member_id):
        assert h.shard.heartbeat("g", epoch, m, None) == E.NONE
    assert h.classic_owned(joined.member_id, epoch) == owned["c"]
    assert h.classic_owned(a, epoch) == owned[a]
    # Records: only the classic group's is left.
    assert h.log and all(isinstance(decode_key(k), GroupKey) for k in h.log)
    stored = decode_group_value(h.log[next(iter(h.log))])
    assert {m.member_id for m in stored.members} == {a, b, joined.member_id}
    # Its session timer runs on the classic side now.
    h.clock.advance(10_001)
    h.flush()
    assert "g" in h.shard.groups and not h.shard.groups["g"].members


def test_static_replacement_keeps_a_consumer_group_when_downgrade_is_not_allowed() -> None:
    h = Harness(consumer_migration_policy="upgrade")
    a, b, owned = settled_with_static_consumer_member(h)
    h.hb("c", -2, instance_id="i1")
    joined = h.join("", instance_id="i1")
    assert joined.error == E.NONE
    group = h.shard.consumer.groups["g"]
    assert "g" not in h.shard.groups
    assert set(group.members) == {a, b, joined.member_id}
    assert group.members[joined.member_id].uses_classic_protocol
    assert h.classic_owned(joined.member_id, joined.generation_id) == owned["c"]


def test_consumer_member_replaces_a_classic_static_member_that_did_not_leave() -> None:
    """Kafka checks UNRELEASED_INSTANCE_ID only between two consumer-protocol members:
    a classic static member sends no LeaveGroup when it closes, and the instance rolled
    to the consumer protocol takes its place and partitions."""
    h = Harness()
    h.classic_group()
    h.hb("c", 0)
    joined = h.join("", instance_id="i2")
    assert joined.error == E.NONE
    mine = h.classic_owned(joined.member_id, joined.generation_id)
    group = h.shard.consumer.groups["g"]
    before = group.members[joined.member_id]
    rolled = h.hb("d", 0, instance_id="i2")
    assert rolled.error == E.NONE, rolled
    assert group.static_members["i2"] == "d" and joined.member_id not in group.members
    assert not group.members["d"].uses_classic_protocol
    assert group.members["d"] is before and owned_of(rolled, set()) == mine
    # And two consumer-protocol members still may not share an instance id.
    assert h.hb("e", 0, instance_id="i2").error == E.UNRELEASED_INSTANCE_ID


def test_member_fenced_by_a_downgrade_rejoins_and_upgrades_again() -> None:
    """The last consumer-protocol member misses its session (a paused client) and the
    group goes back to classic. Its next heartbeat, with its old epoch, must make it
    rejoin: UNKNOWN_MEMBER_ID. (Kafka answers GROUP_ID_NOT_FOUND here, which librdkafka
    2.16 and the Java client take as fatal: the consumer would never consume again.)"""
    h = Harness(consumer_session_timeout_ms=6_000)
    a, b, generation = h.classic_group()
    c = h.hb("c", 0)
    for m in (a, b):
        h.join(m)
    h.clock.advance(5_000)
    for m in (a, b):  # the classic members keep heartbeating
        assert h.shard.heartbeat("g", generation + 1, m, None) == E.NONE
    h.clock.advance(1_001)
    h.flush()
    assert "g" not in h.shard.consumer.groups
    assert set(h.shard.groups["g"].members) == {a, b}
    late = h.hb("c", c.member_epoch)
    assert late.error == E.UNKNOWN_MEMBER_ID, late
    assert late.message == "Member c is not a member of group g."
    again = h.hb("c", 0)
    assert again.error == E.NONE
    group = h.shard.consumer.groups["g"]
    assert "g" not in h.shard.groups and set(group.members) == {a, b, "c"}
    # A heartbeat into a classic group that cannot be upgraded still answers Kafka's
    # GROUP_ID_NOT_FOUND when the member joins (epoch 0).
    h2 = Harness(consumer_migration_policy="downgrade")
    h2.classic_group()
    assert h2.hb("c", 0).error == E.GROUP_ID_NOT_FOUND
    assert h2.hb("c", 3).error == E.UNKNOWN_MEMBER_ID


def test_upgrade_only_policy_keeps_a_consumer_group() -> None:
    h = Harness(consumer_migration_policy="upgrade")
    a, b, _ = h.classic_group()
    h.hb("c", 0)
    h.hb("c", -1)
    group = h.shard.consumer.groups["g"]
    assert set(group.members) == {a, b} and "g" not in h.shard.groups
    # Classic members leave with LeaveGroup.
    assert h.shard.leave_group("g", [(a, None)]) == (E.NONE, [E.NONE])
    assert h.shard.leave_group("g", [("nobody", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    assert set(group.members) == {b}


def test_classic_member_session_timeout_and_records_rebuild() -> None:
    h = Harness()
    a, _b, _ = h.classic_group()
    h.hb("c", 0)
    # A shard rebuilt from the records keeps the classic members' metadata.
    copy = GroupShard(
        0, GroupConfig(**h.cfg), ManualScheduler(), [].append, lambda: {"t1": (T1, 6)}
    )
    copy.consumer.load(h.log.items())
    rebuilt = copy.consumer.groups["g"]
    assert rebuilt.members[a].classic is not None
    assert rebuilt.members[a].classic.session_timeout_ms == 10_000
    assert rebuilt.members["c"].classic is None
    # A classic member that stops heartbeating is gone after its own session timeout.
    h.clock.advance(10_001)
    h.flush()
    group = h.shard.consumer.groups.get("g")
    assert group is not None and a not in group.members


@pytest.mark.parametrize("name", ["BIDIRECTIONAL", "upgrade", "Downgrade", "disabled"])
def test_policy_names_parse_case_insensitively(name: str) -> None:
    from odradek.coordinator.migration import MigrationPolicy

    assert MigrationPolicy.parse(name).value == name.lower()
    with pytest.raises(ValueError):
        MigrationPolicy.parse("sideways")


def test_member_metadata_record_round_trips_classic_metadata() -> None:
    value = rec.MemberMetadataValue(
        client_id="c",
        subscribed_topic_names=["t1"],
        classic=rec.ClassicMemberMetadata(45_000, [("range", SUB), ("roundrobin", SUB)]),
    )
    raw = rec.encode_value(rec.CONSUMER_GROUP_MEMBER_METADATA, value)
    assert raw is not None
    assert rec.decode_value(rec.CONSUMER_GROUP_MEMBER_METADATA, raw) == value


def test_admin_removal_of_the_last_consumer_member_by_instance_id_downgrades() -> None:
    """LeaveGroup by group.instance.id (an administrator, KAFKA-18188) removing the
    static consumer-protocol member of a mixed group: only classic members remain, so
    the group goes back to classic and rebalances (Kafka's
    validateOnlineDowngradeWithFencedMembers)."""
    h = Harness()
    a, b, _owned = settled_with_static_consumer_member(h)
    assert h.shard.leave_group("g", [("", "i9"), ("", "i1")]) == (
        E.NONE,
        [E.UNKNOWN_MEMBER_ID, E.NONE],
    )
    h.flush()
    assert "g" not in h.shard.consumer.groups
    classic = h.shard.groups["g"]
    assert set(classic.members) == {a, b} and classic.is_(GroupState.PREPARING_REBALANCE)
    assert not [k for k in h.log if not isinstance(decode_key(k), GroupKey)]
    assert h.hb("c", 5, instance_id="i1").error == E.UNKNOWN_MEMBER_ID
