"""The classic group protocol of one shard, driven with a hand-kept clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from odradek.consumer_offsets.records import GroupValue, MemberValue
from odradek.coordinator.group import GroupState, JoinResult, SyncResult
from odradek.coordinator.shard import (
    GroupConfig,
    GroupShard,
    JoinRequest,
    StoreWrite,
    SyncRequest,
)
from odradek.coordinator.timers import ManualScheduler
from odradek.protocol.errors import ErrorCode as E

RANGE = [("range", b"sub-range")]


@dataclass
class Box:
    results: list[Any] = field(default_factory=list)

    def __call__(self, result: Any) -> None:
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def value(self) -> Any:
        assert len(self.results) == 1, self.results
        return self.results[0]


class Harness:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualScheduler()
        self.writes: list[StoreWrite] = []
        self.stored: dict[str, GroupValue | None] = {}
        cfg = {"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 1000, **config}
        self.shard = GroupShard(0, GroupConfig(**cfg), self.clock, self.writes.append)

    def flush(self, error: int = 0) -> None:
        while self.writes:
            w = self.writes.pop(0)
            if not error:
                self.stored[w.group_id] = w.value
            w.done(error)

    def tick(self, ms: int = 0) -> None:
        self.clock.advance(ms)
        self.flush()

    def join(
        self,
        member_id: str = "",
        group: str = "g",
        protocols: list[tuple[str, bytes]] | None = None,
        *,
        instance: str | None = None,
        session: int = 10_000,
        rebalance: int = 30_000,
        require: bool = True,
        ptype: str = "consumer",
        client: str = "client",
        skip: bool = False,
    ) -> Box:
        box = Box()
        self.shard.join_group(
            JoinRequest(
                group_id=group,
                member_id=member_id,
                protocol_type=ptype,
                protocols=protocols if protocols is not None else RANGE,
                session_timeout_ms=session,
                rebalance_timeout_ms=rebalance,
                group_instance_id=instance,
                client_id=client,
                client_host="/127.0.0.1",
                require_known_member_id=require,
                supports_skip_assignment=skip,
            ),
            box,
        )
        return box

    def new_member(self, group: str = "g", **kw: Any) -> tuple[str, Box]:
        """MEMBER_ID_REQUIRED round trip, then the real join (still waiting)."""
        first = self.join(group=group, **kw)
        assert first.value.error == E.MEMBER_ID_REQUIRED
        member_id = first.value.member_id
        assert member_id.startswith(kw.get("client", "client") + "-")
        return member_id, self.join(member_id, group=group, **kw)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        group: str = "g",
        instance: str | None = None,
        protocol_name: str | None = None,
    ) -> Box:
        box = Box()
        self.shard.sync_group(
            SyncRequest(
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                assignments=assignments or {},
                group_instance_id=instance,
                protocol_name=protocol_name,
            ),
            box,
        )
        return box

    def heartbeat(
        self, member_id: str, generation: int, group: str = "g", instance: str | None = None
    ) -> int:
        return self.shard.heartbeat(group, generation, member_id, instance)

    def state(self, group: str = "g") -> GroupState:
        g = self.shard.group(group)
        assert g is not None
        return g.state

    def stable_group(self, n: int, **kw: Any) -> list[str]:
        """n members join one fresh group together and sync (the first one leads)."""
        joined = [self.new_member(client=f"c{i}", **kw) for i in range(n)]
        self.tick()
        ids = [mid for mid, _ in joined]
        results = [box.value for _, box in joined]
        assert all(r.error == E.NONE for r in results), results
        gen = results[0].generation_id
        leader = results[0].leader_id
        assert leader == ids[0]
        syncs = [
            self.sync(mid, gen, {m: m.encode() for m in ids} if mid == leader else {})
            for mid in ids
        ]
        self.flush()
        assert all(s.value.error == E.NONE for s in syncs)
        assert self.state() is GroupState.STABLE
        return ids


def test_member_id_required_then_join_sync_stable() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    first = h.join()
    assert first.value.error == E.MEMBER_ID_REQUIRED
    member = first.value.member_id
    box = h.join(member)
    assert not box.done and h.state() is GroupState.PREPARING_REBALANCE
    h.tick(2999)
    assert not box.done  # group.initial.rebalance.delay.ms
    h.tick(1)
    r: JoinResult = box.value
    assert (r.error, r.generation_id, r.leader_id, r.member_id) == (E.NONE, 1, member, member)
    assert r.protocol_type == "consumer" and r.protocol_name == "range"
    assert r.members == [(member, None, b"sub-range")]
    assert h.state() is GroupState.COMPLETING_REBALANCE
    s = h.sync(member, 1, {member: b"assigned"})
    assert not s.done  # waits for the durable write
    assert h.stored == {}
    h.flush()
    assert s.value == SyncResult(E.NONE, b"assigned", "consumer", "range")
    assert h.state() is GroupState.STABLE
    stored = h.stored["g"]
    assert stored is not None and stored.generation == 1 and stored.leader == member
    assert stored.members[0].assignment == b"assigned"
    assert h.heartbeat(member, 1) == E.NONE


def test_join_without_known_member_id_for_old_versions() -> None:
    h = Harness()
    box = h.join(require=False)
    h.tick()
    assert box.value.error == E.NONE and box.value.generation_id == 1


def test_initial_delay_extends_while_members_keep_arriving() -> None:
    h = Harness(initial_rebalance_delay_ms=1000)
    _a, box_a = h.new_member(rebalance=2500)
    h.tick(900)
    _b, box_b = h.new_member(rebalance=2500)
    h.tick(100)  # first window ends, a member was added: wait again
    assert not box_a.done
    h.tick(1000)
    assert box_a.value.generation_id == box_b.value.generation_id == 1
    assert len(box_a.value.members) == 2 and box_b.value.members == []


def test_pending_member_expires_quickly_instead_of_stalling_the_rebalance() -> None:
    # docs/compatibility.md C15: a client that sent JoinGroup twice leaves one id pending.
    h = Harness(pending_member_timeout_ms=500)
    [a] = h.stable_group(1, session=30_000)
    p1 = h.join(client="x").value.member_id
    p2 = h.join(client="x").value.member_id
    box_x = h.join(p2, client="x", session=30_000)
    assert h.state() is GroupState.PREPARING_REBALANCE
    box_a = h.join(a, session=30_000)
    h.tick(499)
    assert not box_a.done  # waiting for p1 to rejoin
    h.tick(1)
    assert box_a.value.error == E.NONE and box_x.value.error == E.NONE
    group = h.shard.group("g")
    assert group is not None and p1 not in group.members and set(group.members) == {a, p2}
    assert box_a.value.generation_id == 2


def test_follower_waits_for_leader_and_gets_empty_assignment_when_left_out() -> None:
    h = Harness()
    a, box_a = h.new_member(client="a")
    h.tick()
    b, box_b = h.new_member(client="b")
    box_a = h.join(a, client="a")
    h.tick()
    gen = box_a.value.generation_id
    assert box_a.value.leader_id == a and box_b.value.leader_id == a
    follower = h.sync(b, gen)
    assert not follower.done
    leader = h.sync(a, gen, {a: b"for-a", "not-a-member": b"x"})
    h.flush()
    assert leader.value.assignment == b"for-a"
    # docs/compatibility.md C16: every member gets an assignment, empty if the leader gave none.
    assert follower.value.error == E.NONE and follower.value.assignment == b""


def test_fencing_errors() -> None:
    h = Harness(max_size=3)
    a, b = h.stable_group(2)
    assert h.heartbeat(a, 0) == E.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", 1) == E.UNKNOWN_MEMBER_ID
    assert h.shard.heartbeat("no-such-group", 1, a, None) == E.UNKNOWN_MEMBER_ID
    assert h.sync(a, 7).value.error == E.ILLEGAL_GENERATION
    assert h.sync("nobody", 1).value.error == E.UNKNOWN_MEMBER_ID
    assert h.sync(a, 1, protocol_name="roundrobin").value.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("nobody").value.error == E.UNKNOWN_MEMBER_ID
    assert h.join("nobody", group="other").value.error == E.UNKNOWN_MEMBER_ID
    assert h.join(session=10).value.error == E.INVALID_SESSION_TIMEOUT
    assert h.join(group="").value.error == E.INVALID_GROUP_ID
    assert h.join(ptype="connect").value.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=[("roundrobin", b"")]).value.error == E.INCONSISTENT_GROUP_PROTOCOL
    # Stable group: commits need a matching member and generation.
    assert h.shard.validate_offset_commit("g", a, None, 1) == E.NONE
    assert h.shard.validate_offset_commit("g", a, None, 2) == E.ILLEGAL_GENERATION
    assert h.shard.validate_offset_commit("g", "x", None, 1) == E.UNKNOWN_MEMBER_ID
    assert h.shard.validate_offset_commit("g", "", None, -1) == E.UNKNOWN_MEMBER_ID
    assert h.shard.validate_offset_commit("unknown", "m", None, 3) == E.ILLEGAL_GENERATION
    assert h.shard.validate_offset_commit("simple", "", None, -1) == E.NONE
    # A member joining again starts a rebalance: heartbeats say so, syncs are refused.
    box_a = h.join(a, protocols=[("range", b"changed")])
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(b, 1) == E.REBALANCE_IN_PROGRESS
    assert h.sync(b, 1).value.error == E.REBALANCE_IN_PROGRESS
    assert h.shard.validate_offset_commit("g", b, None, 1) == E.NONE  # allowed while preparing
    box_b = h.join(b)
    h.tick()
    assert box_a.value.generation_id == box_b.value.generation_id == 2
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert h.shard.validate_offset_commit("g", b, None, 2) == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, 2) == E.NONE  # heartbeats after JoinGroup are fine
    # Dead groups (being deleted) are not available.
    h.shard.groups["g"].state = GroupState.DEAD
    assert h.heartbeat(b, 2) == E.COORDINATOR_NOT_AVAILABLE


def test_sync_during_completing_rebalance_is_cut_short_by_a_new_rebalance() -> None:
    h = Harness()
    a, _box_a = h.new_member(client="a")
    h.tick()
    b, _box_b = h.new_member(client="b")
    h.join(a)
    h.tick()
    waiting = h.sync(b, 2)
    assert not waiting.done
    _c, box_c = h.new_member(client="c")  # a third member arrives before the leader syncs
    assert waiting.value.error == E.REBALANCE_IN_PROGRESS
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert not box_c.done


@pytest.mark.parametrize(
    ("protocols", "expected"),
    [
        # only roundrobin is supported by everyone
        (
            [
                [("range", b""), ("roundrobin", b"")],
                [("roundrobin", b""), ("range", b"")],
                [("roundrobin", b"")],
            ],
            "roundrobin",
        ),
        # range wins the vote 2:1
        (
            [
                [("range", b""), ("roundrobin", b"")],
                [("range", b""), ("roundrobin", b"")],
                [("roundrobin", b""), ("range", b"")],
            ],
            "range",
        ),
        # tie: the leader's preference
        (
            [
                [("cooperative-sticky", b""), ("range", b"")],
                [("range", b""), ("cooperative-sticky", b"")],
            ],
            "cooperative-sticky",
        ),
    ],
)
def test_protocol_selection_by_vote(
    protocols: list[list[tuple[str, bytes]]], expected: str
) -> None:
    h = Harness(initial_rebalance_delay_ms=100)
    boxes = [h.new_member(protocols=p, client=f"c{i}")[1] for i, p in enumerate(protocols)]
    h.tick(100)  # members kept arriving in the first window: one more
    h.tick(100)
    assert {b.value.protocol_name for b in boxes} == {expected}


def test_member_failure_by_session_timeout_triggers_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group(2, session=6000)
    h.tick(5000)
    assert h.heartbeat(a, 1) == E.NONE
    h.tick(1000)  # b silent for 6 s
    group = h.shard.group("g")
    assert group is not None and b not in group.members
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, 1) == E.REBALANCE_IN_PROGRESS
    box = h.join(a, session=6000)
    h.tick()
    assert box.value.generation_id == 2 and box.value.members == [(a, None, b"sub-range")]
    assert h.shard.stats.expired_members == 1


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    a, b = h.stable_group(2, rebalance=5000, session=60_000)
    box_a = h.join(a, protocols=[("range", b"new")], rebalance=5000, session=60_000)
    h.tick(4999)
    assert not box_a.done
    assert h.heartbeat(b, 1) == E.REBALANCE_IN_PROGRESS
    h.tick(1)
    assert box_a.value.error == E.NONE and box_a.value.generation_id == 2
    assert [m[0] for m in box_a.value.members] == [a]


def test_leader_that_does_not_rejoin_is_replaced() -> None:
    h = Harness()
    _a, b = h.stable_group(2, rebalance=5000, session=60_000)
    box_b = h.join(b, protocols=[("range", b"new")], rebalance=5000, session=60_000)
    h.tick(5000)
    assert box_b.value.leader_id == b and box_b.value.members


def test_pending_sync_expiry_removes_silent_members() -> None:
    h = Harness()
    a, _box_a = h.new_member(client="a", rebalance=4000)
    h.tick()
    b, _box_b = h.new_member(client="b", rebalance=4000)
    h.join(a, rebalance=4000)
    h.tick()
    leader = h.sync(a, 2, {a: b"x", b: b"y"})
    h.flush()
    assert leader.value.error == E.NONE and h.state() is GroupState.STABLE
    h.tick(4000)  # b never sent SyncGroup
    group = h.shard.group("g")
    assert group is not None and b not in group.members
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_store_failure_on_leader_sync_propagates_and_rebalances() -> None:
    h = Harness()
    a, _box = h.new_member()
    h.tick()
    s = h.sync(a, 1, {a: b"x"})
    h.flush(error=E.NOT_COORDINATOR)
    assert s.value.error == E.NOT_COORDINATOR
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_static_member_rejoin_with_same_protocol_does_not_rebalance() -> None:
    h = Harness()
    box = h.join(instance="i1", client="c1")
    # Static members get their id at once (no MEMBER_ID_REQUIRED).
    h.tick()
    first = box.value
    assert first.error == E.NONE and first.member_id.startswith("i1-")
    s = h.sync(first.member_id, 1, {first.member_id: b"p0-p5"}, instance="i1")
    h.flush()
    assert s.value.assignment == b"p0-p5"
    # The process restarts: same instance id, no member id.
    again = h.join(instance="i1", client="c1")
    assert not again.done  # the new member id is stored first
    h.flush()
    r = again.value
    assert r.error == E.NONE and r.member_id != first.member_id and r.generation_id == 1
    assert h.state() is GroupState.STABLE and h.shard.stats.rebalances == 1
    # Old clients are told the old leader id so they do not reassign.
    assert r.leader_id == first.member_id and r.members == [] and not r.skip_assignment
    # The old incarnation is fenced; the new one carries on with its old assignment.
    assert h.heartbeat(first.member_id, 1, instance="i1") == E.FENCED_INSTANCE_ID
    assert h.heartbeat(r.member_id, 1, instance="i1") == E.NONE
    assert h.sync(r.member_id, 1, instance="i1").value.assignment == b"p0-p5"
    stored = h.stored["g"]
    assert stored is not None and stored.members[0].member_id == r.member_id
    assert stored.members[0].group_instance_id == "i1"


def test_static_leader_rejoin_v9_skips_assignment() -> None:
    h = Harness()
    box = h.join(instance="i1")
    h.tick()
    old = box.value.member_id
    h.sync(old, 1, {old: b"a"}, instance="i1")
    h.flush()
    again = h.join(instance="i1", skip=True)
    h.flush()
    r = again.value
    assert r.skip_assignment and r.leader_id == r.member_id and r.members[0][1] == "i1"
    assert h.shard.stats.rebalances == 1


def test_static_member_rejoin_with_other_protocol_rebalances() -> None:
    h = Harness()
    box = h.join(instance="i1")
    h.tick()
    old = box.value.member_id
    h.sync(old, 1, {old: b"a"}, instance="i1")
    h.flush()
    # Only protocols the group can agree on are accepted at all.
    refused = h.join(instance="i1", protocols=[("roundrobin", b"")])
    assert refused.value.error == E.INCONSISTENT_GROUP_PROTOCOL
    again = h.join(instance="i1", protocols=[("roundrobin", b""), ("range", b"")])
    # The selected protocol changes: a rebalance, complete at once (its only member joined).
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert again.value.generation_id == 2 and again.value.protocol_name == "roundrobin"


def test_static_member_missing_during_rebalance_keeps_its_place_until_session_timeout() -> None:
    h = Harness()
    s1 = h.join(instance="i1", client="a", session=20_000, rebalance=3000)
    h.tick()
    m1 = s1.value.member_id
    s2 = h.join(instance="i2", client="b", session=20_000, rebalance=3000)
    s1 = h.join(m1, instance="i1", client="a", session=20_000, rebalance=3000)
    h.tick()
    m2 = s2.value.member_id
    h.sync(m1, 2, {m1: b"1", m2: b"2"}, instance="i1")
    h.sync(m2, 2, instance="i2")
    h.flush()
    # A dynamic member joins; i2 is slow and does not rejoin within the rebalance timeout.
    d, _box_d = h.new_member(client="d", session=20_000, rebalance=3000)
    s1 = h.join(m1, instance="i1", client="a", session=20_000, rebalance=3000)
    h.tick(3000)
    assert s1.value.generation_id == 3
    assert {m[0] for m in s1.value.members} == {m1, m2, d}  # i2 kept


def test_admin_leave_by_instance_id_and_batched_leave() -> None:
    h = Harness()
    box = h.join(instance="i1")
    h.tick()
    m1 = box.value.member_id
    h.sync(m1, 1, {}, instance="i1")
    h.flush()
    top, errors = h.shard.leave_group("g", [("", "i1"), ("", "i9")])
    assert (top, errors) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
    h.tick()
    assert h.state() is GroupState.EMPTY
    assert h.stored["g"] is not None and h.stored["g"].members == []  # type: ignore[union-attr]


def test_batched_leave_of_several_members() -> None:
    h = Harness()
    a, b, c = h.stable_group(3)
    top, errors = h.shard.leave_group(
        "g", [(a, None), (b, None), ("ghost", None), (c, "wrong-instance")]
    )
    assert top == E.NONE
    assert errors == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.shard.leave_group("nope", [(a, None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    top, errors = h.shard.leave_group("g", [(c, None)])
    assert errors == [E.NONE]
    h.tick()
    assert h.state() is GroupState.EMPTY


def test_pending_member_can_leave() -> None:
    h = Harness()
    pending = h.join().value.member_id
    assert h.shard.leave_group("g", [(pending, None)]) == (E.NONE, [E.NONE])
    assert h.shard.group("g") is None


def test_describe_list_and_delete() -> None:
    h = Harness()
    [a] = h.stable_group(1)
    d = h.shard.describe("g")
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert d.members[0].member_id == a and d.members[0].assignment == a.encode()
    assert d.members[0].metadata == b"sub-range" and d.members[0].client_id == "c0"
    missing = h.shard.describe("nope")
    assert (missing.error, missing.state, missing.members) == (E.GROUP_ID_NOT_FOUND, "Dead", [])
    h.shard.validate_offset_commit("simple", "", None, -1)
    assert sorted(h.shard.list_groups()) == [
        ("g", "consumer", "Stable", "classic"),
        ("simple", "", "Empty", "classic"),
    ]
    assert h.shard.list_groups(["empty"]) == [("simple", "", "Empty", "classic")]
    results = Box()
    h.shard.delete_groups(["g", "nope", "simple"], results)
    assert not results.done
    h.flush()
    assert results.value == {"g": E.NON_EMPTY_GROUP, "nope": E.GROUP_ID_NOT_FOUND, "simple": E.NONE}
    assert h.stored["simple"] is None and h.shard.group("simple") is None
    h.shard.leave_group("g", [(a, None)])
    h.tick()
    assert h.shard.describe("g").state == "Empty"


def test_group_max_size() -> None:
    h = Harness(max_size=2)
    a, b = h.stable_group(2)
    assert h.join().value.error == E.GROUP_MAX_SIZE_REACHED
    assert h.heartbeat(a, 1) == E.NONE  # members already in are fine
    # A follower rejoining with unchanged metadata just gets the current generation.
    assert h.join(b).value.generation_id == 1
    assert h.state() is GroupState.STABLE


def test_offset_delete_checks() -> None:
    h = Harness()
    assert h.shard.validate_offset_delete("nope")[0] == E.GROUP_ID_NOT_FOUND
    h.stable_group(1, ptype="connect")
    assert h.shard.validate_offset_delete("g")[0] == E.NON_EMPTY_GROUP


def test_loaded_group_is_stable_and_expires_silent_members() -> None:
    h = Harness()
    value = GroupValue(
        "consumer",
        5,
        "range",
        "m1",
        100,
        [
            MemberValue("m1", "c", "/h", 30000, 6000, b"s1", b"a1"),
            MemberValue("m2", "c", "/h", 30000, 6000, b"s2", b"a2", "inst-2"),
        ],
    )
    h.shard.load_group("g", value)
    assert h.state() is GroupState.STABLE
    assert h.heartbeat("m1", 5) == E.NONE
    assert h.heartbeat("m2", 5, instance="inst-2") == E.NONE
    assert h.sync("m2", 5, instance="inst-2").value.assignment == b"a2"
    d = h.shard.describe("g")
    assert [m.metadata for m in d.members] == [b"s1", b"s2"]
    h.tick(5000)
    assert h.heartbeat("m1", 5) == E.NONE
    h.tick(1500)  # m2 silent for 6.5 s
    assert h.heartbeat("m1", 5) == E.REBALANCE_IN_PROGRESS
    empty = GroupValue("consumer", 9, None, None, 42, [])
    h.shard.load_group("e", empty)
    group = h.shard.group("e")
    assert group is not None and group.state is GroupState.EMPTY and group.state_timestamp == 42


def test_unload_answers_everyone_waiting_with_not_coordinator() -> None:
    h = Harness(initial_rebalance_delay_ms=1000)
    _, box = h.new_member()
    h.shard.unload()
    assert box.value.error == E.NOT_COORDINATOR
    assert h.shard.groups == {}
    h.tick(5000)  # timers were cancelled: nothing fires


def test_duplicate_join_answers_the_stale_request() -> None:
    h = Harness(initial_rebalance_delay_ms=1000)
    mid, first = h.new_member()
    second = h.join(mid)
    assert first.value.error == E.REBALANCE_IN_PROGRESS
    h.tick(1000)
    assert second.value.error == E.NONE


def test_join_of_an_existing_member_while_completing_returns_current_generation() -> None:
    h = Harness()
    a, _box = h.new_member()
    h.tick()
    again = h.join(a)
    assert again.value.generation_id == 1 and again.value.members  # leader gets members again
    assert h.state() is GroupState.COMPLETING_REBALANCE
