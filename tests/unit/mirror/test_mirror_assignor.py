"""How mirror instances split the partitions (sans-io): balanced, sticky, and never
handing a partition from one owner to another in one generation (KIP-429)."""

from __future__ import annotations

from odradek.mirror.assignor import Member, TopicPartition, assign

TOPICS = frozenset({"a", "b"})
COUNTS = {"a": 4, "b": 2}
EVERY = {(t, p) for t, n in COUNTS.items() for p in range(n)}


def owned(*tps: TopicPartition, generation: int = 1) -> Member:
    return Member(TOPICS, frozenset(tps), generation)


def test_new_members_share_every_partition_evenly_and_disjointly() -> None:
    plan = assign({m: Member(TOPICS) for m in ("m1", "m2", "m3")}, COUNTS)
    assert sorted(len(p) for p in plan.values()) == [2, 2, 2]
    assert set().union(*plan.values()) == EVERY
    assert sum(len(p) for p in plan.values()) == len(EVERY)


def test_a_joining_member_gets_partitions_only_after_the_owner_gave_them_up() -> None:
    everything = owned(*sorted(EVERY))
    first = assign({"m1": everything, "m2": Member(TOPICS)}, COUNTS)
    # Generation 1: m1 keeps its quota, the rest is revoked and given to nobody yet.
    assert len(first["m1"]) == 3 and first["m2"] == set()
    # m1 rejoins owning what it kept; generation 2 hands the freed ones to m2.
    second = assign({"m1": owned(*first["m1"], generation=2), "m2": Member(TOPICS)}, COUNTS)
    assert second["m1"] == first["m1"]
    assert second["m2"] == EVERY - first["m1"]


def test_the_partitions_of_a_member_that_died_go_to_the_others_at_once() -> None:
    plan = assign({m: Member(TOPICS) for m in ("m1", "m2", "m3")}, COUNTS)
    survivors = {m: owned(*plan[m]) for m in ("m1", "m2")}
    after = assign(survivors, COUNTS)
    assert after["m1"] >= plan["m1"] and after["m2"] >= plan["m2"]  # sticky
    assert after["m1"] | after["m2"] == EVERY
    assert sorted(len(p) for p in after.values()) == [3, 3]


def test_a_double_claim_stays_with_the_newer_generation() -> None:
    tp = ("a", 0)
    plan = assign({"old": owned(tp, generation=3), "new": owned(tp, generation=4)}, COUNTS)
    assert tp in plan["new"] and tp not in plan["old"]


def test_members_only_get_topics_they_subscribe_to() -> None:
    plan = assign({"m1": Member(frozenset({"a"})), "m2": Member(TOPICS)}, COUNTS)
    assert all(t == "a" for t, _ in plan["m1"])
    assert {tp for tp in EVERY if tp[0] == "b"} <= plan["m2"]
    assert plan["m1"] | plan["m2"] == EVERY


def test_no_members_no_assignment() -> None:
    assert assign({}, COUNTS) == {}
