"""The reassignment tools' pure parts: kafka-reassign-partitions.sh's JSON files, the
throttle lists, and the balance planner behind ``odradek cluster``."""

from __future__ import annotations

import json
import random

import pytest

from odradek.tools.balance import PartitionLoad, plan, spread
from odradek.tools.reassign_files import (
    ReassignFileError,
    check_for_execute,
    format_reassignment,
    move_map,
    parse_broker_list,
    parse_reassignment,
    parse_topics,
    throttled_replicas,
)


def test_reassignment_json_round_trips_in_kafkas_format() -> None:
    text = format_reassignment({("foo", 1): [2, 3], ("bar", 0): [1]}, {("foo", 1, 3): "/d2"})
    assert text == (
        '{"version":1,"partitions":['
        '{"topic":"bar","partition":0,"replicas":[1],"log_dirs":["any"]},'
        '{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","/d2"]}]}'
    )
    parsed = parse_reassignment(text)
    assert parsed.targets == {("bar", 0): [1], ("foo", 1): [2, 3]}
    assert parsed.log_dirs == {("foo", 1, 3): "/d2"}
    no_dirs = parse_reassignment('{"partitions":[{"topic":"t","partition":0,"replicas":[5]}]}')
    assert no_dirs.targets == {("t", 0): [5]} and not no_dirs.log_dirs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "The input string is not a valid JSON"),
        ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            "Size of replicas list List(1, 2) is different from size of log dirs list "
            "List(any) for partition t-0",
        ),
    ],
)
def test_bad_reassignment_files(text: str, message: str) -> None:
    with pytest.raises(ReassignFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_reassignment(text)


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ([], "Partition reassignment list cannot be empty"),
        (
            [{"topic": "t", "partition": 0, "replicas": []}],
            "Partition replica list cannot be empty",
        ),
        (
            [
                {"topic": "t", "partition": 0, "replicas": [1]},
                {"topic": "t", "partition": 0, "replicas": [2]},
            ],
            "Partition reassignment contains duplicate topic partitions: t-0",
        ),
        (
            [{"topic": "t", "partition": 0, "replicas": [1, 1, 2]}],
            "Partition replica lists may not contain duplicate entries: t-0 contains "
            "multiple entries for 1",
        ),
    ],
)
def test_execute_checks(partitions: list[dict[str, object]], message: str) -> None:
    with pytest.raises(ReassignFileError) as info:
        check_for_execute(parse_reassignment(json.dumps({"partitions": partitions})))
    assert str(info.value) == message


def test_topics_and_broker_lists() -> None:
    assert parse_topics('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == ["a", "b"]
    with pytest.raises(ReassignFileError, match="duplicate entries: a"):
        parse_topics('{"topics":[{"topic":"a"},{"topic":"a"}]}')
    assert parse_broker_list("1, 2,3") == [1, 2, 3]
    with pytest.raises(ReassignFileError, match="Broker list contains duplicate entries: 2"):
        parse_broker_list("1,2,2")


def test_throttle_lists_name_sources_as_leaders_and_destinations_as_followers() -> None:
    moves = move_map(
        {("t", 1): ([4, 1, 2], [4])},  # an ongoing move: 4 is being added to [1, 2]
        {("t", 0): [3, 4], ("u", 0): [1, 5]},
        {("t", 0): [1, 2], ("u", 0): [1, 2], ("t", 1): [4, 1, 2]},
    )
    leader, follower = throttled_replicas(moves)
    assert leader == {"t": "0:1,0:2,1:1,1:2", "u": "0:1,0:2"}
    assert follower == {"t": "0:3,0:4,1:4", "u": "0:5"}


def _loads(seed: int, n: int, brokers: range, rf: int = 3) -> list[PartitionLoad]:
    rng = random.Random(seed)
    return [
        PartitionLoad(
            f"t{i % 7}", i, tuple(rng.sample(list(brokers), rf)), rng.randint(1, 100) * 1000
        )
        for i in range(n)
    ]


def test_rebalance_fills_new_brokers_evenly_in_count_and_bytes() -> None:
    loads = _loads(1, 300, range(100, 106))
    targets = plan(loads, list(range(100, 110)))
    per_broker = spread(loads, targets)
    counts = [c for c, _b, _l in per_broker.values()]
    sizes = [b for _c, b, _l in per_broker.values()]
    leaders = [le for _c, _b, le in per_broker.values()]
    assert sorted(per_broker) == list(range(100, 110))
    assert max(counts) - min(counts) <= 1
    mean = sum(sizes) / len(sizes)
    assert max(sizes) - min(sizes) <= 0.1 * mean + 100_000  # within tolerance (+ one partition)
    assert max(leaders) - min(leaders) <= 2
    for replicas in targets.values():
        assert len(set(replicas)) == 3 == len(replicas)
    moved = sum(len(set(targets[p.tp]) - set(p.replicas)) for p in loads if p.tp in targets)
    assert moved <= 400  # 360 replicas must reach the 4 new brokers; few extra moves


def test_balanced_cluster_needs_no_moves() -> None:
    loads = [PartitionLoad("t", i, (100 + i % 3, 100 + (i + 1) % 3), 1000) for i in range(9)]
    assert plan(loads, [100, 101, 102]) == {}


def test_drain_moves_only_the_drained_nodes_replicas() -> None:
    loads = _loads(2, 60, range(100, 104), rf=2)
    targets = plan(loads, [100, 101, 102], max_moves=0, leaders="moved")
    assert all(103 not in r for r in targets.values())
    held = {p.tp for p in loads if 103 in p.replicas}
    assert set(targets) == held
    for p in loads:
        if p.tp in targets:
            kept = [r for r in p.replicas if r != 103]
            assert all(r in targets[p.tp] for r in kept)


def test_impossible_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="only 2 target broker"):
        plan([PartitionLoad("t", 0, (1, 2, 3), 10)], [1, 2])
