"""The controller's pure rules: names, placement, configs, ids, shards, elections."""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter

import pytest

from odradek.controller.assignment import assign_replicas
from odradek.controller.cluster_state import (
    NO_LEADER,
    NodeInfo,
    NodeKind,
    NodeState,
    PartitionState,
    ShardState,
)
from odradek.controller.errors import ControllerError
from odradek.controller.model import (
    ClusterModel,
    ConfigChange,
    ConfigOp,
    ElectionResult,
    ElectionType,
    ResourceType,
    TopicSpec,
    new_cluster_id,
)
from odradek.controller.names import validate_topic_name
from odradek.controller.shards import balance_shards
from odradek.protocol.errors import ErrorCode


def make_model(storage: int = 3, **configs: str) -> ClusterModel:
    model = ClusterModel({k.replace("_", "."): v for k, v in configs.items()}, rng=random.Random(7))
    model.bootstrap()
    for i in range(storage):
        model.register_node(NodeInfo(100 + i, NodeKind.STORAGE, "127.0.0.1", grpc_port=5000 + i))
    model.take_changes()
    return model


def error_of(fn: object, *args: object, **kwargs: object) -> ControllerError:
    with pytest.raises(ControllerError) as info:
        fn(*args, **kwargs)  # type: ignore[operator]
    return info.value


def incarnation(model: ClusterModel, node_id: int) -> int:
    return model.nodes[node_id].incarnation


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "can't be empty"),
        (".", 'cannot be "." or ".."'),
        ("..", 'cannot be "." or ".."'),
        ("a" * 250, "can't be longer than 249 characters"),
        ("bad name", "contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
        ("ünïcode", "contains a character other than"),
        ("__internal", "reserved for internal topics"),
    ],
)
def test_illegal_topic_names(name: str, fragment: str) -> None:
    error = error_of(validate_topic_name, name)
    assert error.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert fragment in error.message


def test_legal_names_and_internal_prefix() -> None:
    validate_topic_name("a" * 249)
    validate_topic_name("orders.v1_final-2")
    validate_topic_name("__consumer_offsets", internal=True)


def test_dot_underscore_collision() -> None:
    model = make_model()
    model.create_topic(TopicSpec("metrics.cpu", 1, 1))
    error = error_of(model.create_topic, TopicSpec("metrics_cpu", 1, 1))
    assert error.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert error.message == "Topic 'metrics_cpu' collides with existing topics: metrics.cpu"
    error = error_of(model.create_topic, TopicSpec("metrics.cpu", 1, 1))
    assert error.code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert error.message == "Topic 'metrics.cpu' already exists."


# ---------------------------------------------------------------- placement


def test_assignment_spreads_leaders_and_followers() -> None:
    brokers = [100, 101, 102, 103]
    lists = assign_replicas(brokers, 8, 3, start_index=0, replica_shift=0)
    assert all(len(set(r)) == 3 for r in lists)
    assert Counter(r[0] for r in lists) == Counter({b: 2 for b in brokers})
    assert Counter(b for r in lists for b in r) == Counter({b: 6 for b in brokers})
    # the shift grows every len(brokers) partitions: followers of one leader differ
    assert lists[0] != lists[4] and lists[0][0] == lists[4][0]
    # random start: not always the same first broker
    starts = {assign_replicas(brokers, 1, 1, rng=random.Random(seed))[0][0] for seed in range(40)}
    assert len(starts) > 1


def test_replication_factor_errors_use_kafka_messages() -> None:
    model = make_model(storage=1)
    error = error_of(model.create_topic, TopicSpec("t", 3, 3))
    assert error.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert error.message == "Replication factor: 3 larger than available brokers: 1."
    error = error_of(model.create_topic, TopicSpec("t", 3, 0))
    assert error.code is ErrorCode.INVALID_REPLICATION_FACTOR
    error = error_of(model.create_topic, TopicSpec("t", 0, 1))
    assert error.code is ErrorCode.INVALID_PARTITIONS
    assert error.message == "Number of partitions was set to an invalid non-positive value."


def test_defaults_from_cluster_configs() -> None:
    model = make_model(storage=3, num_partitions="4", default_replication_factor="2")
    result = model.create_topic(TopicSpec("t"))
    assert (result.num_partitions, result.replication_factor) == (4, 2)
    topic = model.topics["t"]
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in topic.partitions)
    assert len(result.topic_id) == 16 and result.configs["retention.ms"] == "604800000"


def test_offline_and_shutting_down_nodes_get_no_new_replicas() -> None:
    model = make_model(storage=3)
    model.node_offline(102)
    model.begin_shutdown(101, incarnation(model, 101))
    error = error_of(model.create_topic, TopicSpec("t", 1, 2))
    assert error.message == "Replication factor: 2 larger than available brokers: 1."
    model.create_topic(TopicSpec("t", 5, 1))
    assert {p.replicas[0] for p in model.topics["t"].partitions} == {100}


def test_manual_assignment_validation() -> None:
    model = make_model(storage=3)
    ok = model.create_topic(TopicSpec("m", assignments={0: [101, 100], 1: [102, 101]}))
    assert ok.num_partitions == 2 and model.topics["m"].partitions[1].leader == 102
    cases = [
        (TopicSpec("x", 2, -1, assignments={0: [100]}), ErrorCode.INVALID_REQUEST),
        (TopicSpec("x", assignments={0: [100, 100]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TopicSpec("x", assignments={0: [999]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TopicSpec("x", assignments={0: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TopicSpec("x", assignments={1: [100]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (
            TopicSpec("x", assignments={0: [100], 1: [100, 101]}),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    ]
    for spec, code in cases:
        assert error_of(model.create_topic, spec).code is code, spec
    assert "x" not in model.topics


def test_validate_only_changes_nothing() -> None:
    model = make_model()
    result = model.create_topic(TopicSpec("t", 3, 2), validate_only=True)
    assert result.error_code == 0 and result.num_partitions == 3
    assert "t" not in model.topics and not model.has_changes


# ---------------------------------------------------------------- partitions


def test_partition_count_only_grows() -> None:
    model = make_model(storage=3)
    model.create_topic(TopicSpec("t", 3, 2))
    error = error_of(model.create_partitions, "t", 2)
    assert error.code is ErrorCode.INVALID_PARTITIONS
    assert (
        error.message == "Topic currently has 3 partitions, which is higher than the requested 2."
    )
    assert error_of(model.create_partitions, "t", 3).message == "Topic already has 3 partition(s)."
    assert error_of(model.create_partitions, "nope", 5).code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error = error_of(model.create_partitions, "t", 5, [[100, 101]])
    assert error.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    error = error_of(model.create_partitions, "t", 4, [[100]])
    assert error.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT  # RF must match the topic
    result = model.create_partitions("t", 6)
    topic = model.topics["t"]
    assert result.num_partitions == 6 and [p.partition for p in topic.partitions] == list(range(6))
    assert all(len(p.replicas) == 2 and p.leader in p.replicas for p in topic.partitions)
    model.create_partitions("t", 7, [[102, 100]])
    assert topic.partitions[6].replicas == [102, 100]


# ---------------------------------------------------------------- configs


def test_topic_config_validation_errors() -> None:
    model = make_model()
    error = error_of(model.create_topic, TopicSpec("t", 1, 1, configs={"retention.ms": "soon"}))
    assert error.code is ErrorCode.INVALID_CONFIG and "retention.ms" in error.message
    error = error_of(model.create_topic, TopicSpec("t", 1, 1, configs={"no.such.config": "1"}))
    assert error.code is ErrorCode.INVALID_CONFIG
    error = error_of(model.create_topic, TopicSpec("t", 1, 1, configs={"cleanup.policy": "shred"}))
    assert error.code is ErrorCode.INVALID_CONFIG
    assert "t" not in model.topics


def test_alter_configs_replace_and_incremental() -> None:
    model = make_model()
    model.create_topic(
        TopicSpec("t", 1, 1, configs={"retention.ms": "1000", "segment.bytes": "1048576"})
    )
    model.alter_configs(
        ResourceType.TOPIC,
        "t",
        [ConfigChange("max.message.bytes", value="2048")],
        incremental=False,
    )
    assert model.topics["t"].configs == {"max.message.bytes": "2048"}  # replaced, not merged
    changes = [
        ConfigChange("retention.ms", ConfigOp.SET, "5000"),
        ConfigChange("max.message.bytes", ConfigOp.DELETE),
        ConfigChange("cleanup.policy", ConfigOp.APPEND, "compact"),
    ]
    model.alter_configs(ResourceType.TOPIC, "t", changes, incremental=True)
    assert model.topics["t"].configs == {"retention.ms": "5000", "cleanup.policy": "delete,compact"}
    model.alter_configs(
        ResourceType.TOPIC,
        "t",
        [ConfigChange("cleanup.policy", ConfigOp.SUBTRACT, "delete")],
        incremental=True,
    )
    assert model.topics["t"].configs["cleanup.policy"] == "compact"
    error = error_of(
        model.alter_configs,
        ResourceType.TOPIC,
        "t",
        [ConfigChange("retention.ms", ConfigOp.APPEND, "1")],
        incremental=True,
    )
    assert error.code is ErrorCode.INVALID_CONFIG
    assert error.message == "Config value append is not allowed for config key: retention.ms"
    error = error_of(
        model.alter_configs,
        ResourceType.TOPIC,
        "t",
        [ConfigChange("retention.ms", value="x")],
        incremental=True,
    )
    assert (
        error.code is ErrorCode.INVALID_CONFIG
        and model.topics["t"].configs["retention.ms"] == "5000"
    )
    model.alter_configs(
        ResourceType.TOPIC,
        "t",
        [ConfigChange("retention.ms", value="7")],
        incremental=True,
        validate_only=True,
    )
    assert model.topics["t"].configs["retention.ms"] == "5000"


def test_cluster_dynamic_configs() -> None:
    model = make_model()
    model.alter_configs(
        ResourceType.BROKER,
        "",
        [ConfigChange("log.retention.ms", ConfigOp.SET, "60000")],
        incremental=True,
    )
    assert model.effective_configs()["log.retention.ms"] == "60000"
    error = error_of(
        model.alter_configs,
        ResourceType.BROKER,
        "",
        [ConfigChange("num.partitions", value="3")],
        incremental=True,
    )
    assert error.code is ErrorCode.INVALID_CONFIG and "dynamically" in error.message
    error = error_of(
        model.alter_configs,
        ResourceType.BROKER,
        "",
        [ConfigChange("min.insync.replicas", value="0")],
        incremental=True,
    )
    assert error.code is ErrorCode.INVALID_CONFIG


# ---------------------------------------------------------------- ids


def test_producer_id_blocks_never_overlap_across_reloads() -> None:
    model = make_model(storage=2)
    blocks = [model.allocate_producer_ids(100, incarnation(model, 100)) for _ in range(3)]
    saved = model.take_changes()
    reloaded = ClusterModel(rng=random.Random(1))
    reloaded.load({k: v for k, v in saved.items() if v is not None} | _all_records(model))
    blocks.append(reloaded.allocate_producer_ids(101, incarnation(model, 101)))
    ranges = sorted((first, first + count) for first, count in blocks)
    assert all(count == 1000 for _, count in blocks)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(ranges))
    error = error_of(model.allocate_producer_ids, 100, 12345)
    assert error.code is ErrorCode.STALE_BROKER_EPOCH


def _all_records(model: ClusterModel) -> dict[str, object]:
    keys = ["cluster", "producer_ids", "shards", "transaction_shards", "cluster_configs"]
    keys += [f"nodes/{n}" for n in model.nodes] + [f"topics/{t}" for t in model.topics]
    return {k: model.record(k) for k in keys}


def test_cluster_id_format() -> None:
    for seed in range(50):
        cluster_id = new_cluster_id(random.Random(seed))
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    model = ClusterModel()
    assert model.bootstrap() and not model.bootstrap()
    assert len(model.cluster_id) == 22


def test_metadata_version_bumps_per_change_and_survives_reload() -> None:
    model = make_model()
    v = model.metadata_version
    model.create_topic(TopicSpec("t", 1, 1))
    model.take_changes()
    assert model.metadata_version == v + 1
    model.allocate_producer_ids(100, incarnation(model, 100))
    model.take_changes()
    assert model.metadata_version == v + 1  # producer ids are not in the snapshot
    reloaded = ClusterModel()
    reloaded.load(_all_records(model))
    assert (
        reloaded.metadata_version == v + 1
        and reloaded.topics["t"].topic_id == model.topics["t"].topic_id
    )


# ---------------------------------------------------------------- shards


def test_shards_balance_with_minimal_movement() -> None:
    shards = [ShardState(i) for i in range(50)]
    one = balance_shards(shards, [200])
    assert {s.coordinator_id for s in one} == {200} and all(s.epoch == 1 for s in one)
    two = balance_shards(one, [200, 201])
    assert Counter(s.coordinator_id for s in two) == Counter({200: 25, 201: 25})
    assert sum(a.coordinator_id != b.coordinator_id for a, b in zip(one, two, strict=True)) == 25
    three = balance_shards(two, [200, 201, 202])
    counts = Counter(s.coordinator_id for s in three)
    assert max(counts.values()) - min(counts.values()) <= 1
    moved = [
        (a, b) for a, b in zip(two, three, strict=True) if a.coordinator_id != b.coordinator_id
    ]
    assert len(moved) == 16 and {b.coordinator_id for _, b in moved} == {202}
    assert all(b.epoch == a.epoch + 1 for a, b in moved)
    # 201 leaves: only its shards move, and the rest stay balanced
    after = balance_shards(three, [200, 202])
    for a, b in zip(three, after, strict=True):
        if a.coordinator_id != 201:
            assert b.coordinator_id == a.coordinator_id and b.epoch == a.epoch
    assert Counter(s.coordinator_id for s in after) == Counter({200: 25, 202: 25})
    assert all(s.coordinator_id == NO_LEADER for s in balance_shards(after, []))
    assert balance_shards(after, [200, 202]) == after  # stable


def test_coordinator_registration_moves_shards() -> None:
    model = make_model(storage=1)
    assert all(s.coordinator_id == NO_LEADER for s in model.shards) and len(model.shards) == 50
    model.register_node(NodeInfo(200, NodeKind.COORDINATOR))
    model.register_node(NodeInfo(201, NodeKind.COORDINATOR))
    assert Counter(s.coordinator_id for s in model.shards) == Counter({200: 25, 201: 25})
    model.node_offline(201)
    assert {s.coordinator_id for s in model.shards} == {200}


def test_transaction_coordinators_own_the_transaction_shards_only() -> None:
    model = make_model(storage=1, **{"transaction.state.log.num.partitions": "10"})
    assert len(model.transaction_shards) == 10
    assert all(s.coordinator_id == NO_LEADER for s in model.transaction_shards)
    model.register_node(NodeInfo(200, NodeKind.COORDINATOR))
    model.register_node(NodeInfo(400, NodeKind.TRANSACTION_COORDINATOR))
    model.register_node(NodeInfo(401, NodeKind.TRANSACTION_COORDINATOR))
    assert {s.coordinator_id for s in model.shards} == {200}
    assert Counter(s.coordinator_id for s in model.transaction_shards) == Counter({400: 5, 401: 5})
    before = list(model.transaction_shards)
    group_shards = list(model.shards)
    model.node_offline(401)
    assert model.shards == group_shards  # a transaction coordinator leaving moves no group shard
    for a, b in zip(before, model.transaction_shards, strict=True):
        assert b.coordinator_id == 400
        assert b.epoch == (a.epoch if a.coordinator_id == 400 else a.epoch + 1)
    # The table survives a reload; a cluster made before transactions gets one at bootstrap.
    model.take_changes()
    reloaded = ClusterModel(rng=random.Random(1))
    reloaded.load(_all_records(model))
    assert reloaded.transaction_shards == model.transaction_shards
    old = _all_records(model)
    del old["transaction_shards"]
    upgraded = ClusterModel(rng=random.Random(1))
    upgraded.load(old)
    assert not upgraded.bootstrap()
    assert [s.coordinator_id for s in upgraded.transaction_shards] == [400] * 50
    assert "transaction_shards" in upgraded.take_changes()


# ---------------------------------------------------------------- elections


def test_leader_failover_prefers_isr_in_replica_order_and_bumps_epochs() -> None:
    model = make_model(storage=3)
    model.create_topic(TopicSpec("t", assignments={0: [100, 101, 102]}))
    p = model.topics["t"].partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (100, 0, 0)
    model.node_offline(100)
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (101, [101, 102], 1, 1)
    model.node_offline(102)  # follower leaves: ISR shrinks, leader stays
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (101, [101], 1, 2)
    model.node_offline(101)  # the last ISR member stays in the ISR, partition offline
    assert (p.leader, p.isr, p.leader_epoch) == (NO_LEADER, [101], 2)
    assert model.offline_partitions() == 1
    model.register_node(NodeInfo(100, NodeKind.STORAGE))  # not in the ISR: no unclean election
    assert p.leader == NO_LEADER
    model.register_node(NodeInfo(101, NodeKind.STORAGE))  # the last ISR member returns
    assert (p.leader, p.isr, p.leader_epoch) == (101, [101], 3)
    assert model.stats.leader_elections == 2


def test_unclean_election_only_when_enabled() -> None:
    for enabled in (False, True):
        model = make_model(storage=2)
        configs = {"unclean.leader.election.enable": "true"} if enabled else {}
        model.create_topic(TopicSpec("t", configs=configs, assignments={0: [100, 101]}))
        p = model.topics["t"].partitions[0]
        model.node_offline(101)
        model.node_offline(100)
        assert (p.leader, p.isr) == (NO_LEADER, [100])
        model.register_node(NodeInfo(101, NodeKind.STORAGE))
        assert (p.leader, p.isr) == ((101, [101]) if enabled else (NO_LEADER, [100]))


def test_cluster_wide_unclean_setting() -> None:
    model = make_model(storage=2, unclean_leader_election_enable="true")
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    model.node_offline(101)
    model.node_offline(100)
    model.register_node(NodeInfo(101, NodeKind.STORAGE))
    assert model.topics["t"].partitions[0].leader == 101


def test_restart_with_new_incarnation_fences_the_old_session() -> None:
    model = make_model(storage=2)
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    model.create_topic(TopicSpec("solo", assignments={0: [101]}))
    p0, p1 = model.topics["t"].partitions[0], model.topics["solo"].partitions[0]
    old = incarnation(model, 100)
    again = model.register_node(NodeInfo(100, NodeKind.STORAGE))
    assert again.incarnation > old
    assert (p0.leader, p0.isr, p0.leader_epoch) == (101, [101], 1)  # it must catch up again
    assert error_of(model.check_session, 100, old).code is ErrorCode.STALE_BROKER_EPOCH
    model.register_node(NodeInfo(101, NodeKind.STORAGE))  # sole replica: offline, then back
    assert (p1.leader, p1.leader_epoch) == (101, 2)
    error = error_of(model.register_node, NodeInfo(101, NodeKind.GATEWAY))
    assert error.code is ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_alter_partition_fencing_and_rules() -> None:
    model = make_model(storage=3)
    model.create_topic(TopicSpec("t", assignments={0: [100, 101, 102]}))
    p = model.topics["t"].partitions[0]
    inc = incarnation(model, 100)

    def alter(
        node: int,
        isr: list[int],
        le: int | None = None,
        pe: int | None = None,
        inc_: int | None = None,
    ) -> PartitionState:
        return model.alter_partition(
            node,
            incarnation(model, node) if inc_ is None else inc_,
            "t",
            0,
            p.leader_epoch if le is None else le,
            p.partition_epoch if pe is None else pe,
            isr,
        )

    assert alter(100, [100, 101]).isr == [100, 101] and p.partition_epoch == 1
    assert model.stats.isr_shrinks == 1
    assert error_of(alter, 100, [100], pe=0).code is ErrorCode.INVALID_UPDATE_VERSION
    assert error_of(alter, 100, [100], le=5).code is ErrorCode.FENCED_LEADER_EPOCH
    assert error_of(alter, 101, [101]).code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert error_of(alter, 100, [101]).code is ErrorCode.INVALID_REQUEST  # leader missing
    assert error_of(alter, 100, [100, 100]).code is ErrorCode.INVALID_REQUEST
    assert error_of(alter, 100, [100, 999]).code is ErrorCode.INVALID_REQUEST
    assert error_of(alter, 100, [100], inc_=inc + 99).code is ErrorCode.STALE_BROKER_EPOCH
    model.node_offline(102)
    assert error_of(alter, 100, [100, 101, 102]).code is ErrorCode.INELIGIBLE_REPLICA
    model.register_node(NodeInfo(102, NodeKind.STORAGE))
    assert alter(100, [100, 101, 102]).isr == [100, 101, 102]
    assert model.stats.isr_expands == 1


def test_controlled_shutdown_moves_leadership() -> None:
    model = make_model(storage=2)
    model.create_topic(TopicSpec("t", assignments={0: [100, 101], 1: [101, 100]}))
    model.create_topic(TopicSpec("solo", assignments={0: [100]}))
    p0, p1 = model.topics["t"].partitions
    p2 = model.topics["solo"].partitions[0]
    remaining = model.begin_shutdown(100, incarnation(model, 100))
    assert remaining == [("solo", 0)]  # the sole replica cannot move
    assert (p0.leader, p0.isr, p0.leader_epoch) == (101, [101], 1)
    assert (p1.leader, p1.isr) == (101, [101])
    assert (p2.leader, p2.isr) == (100, [100])
    assert model.nodes[100].state is NodeState.SHUTTING_DOWN
    assert model.shutdown_ready(100)
    assert not model.shutdown_ready(101)
    # a shutting-down node is not a candidate for anything
    assert (
        error_of(
            model.alter_partition,
            101,
            incarnation(model, 101),
            "t",
            0,
            p0.leader_epoch,
            p0.partition_epoch,
            [101, 100],
        ).code
        is ErrorCode.INELIGIBLE_REPLICA
    )
    model.node_offline(100)
    assert (p2.leader, p2.isr) == (NO_LEADER, [100])


def test_shutting_down_leader_hands_over_once_a_follower_rejoins() -> None:
    model = make_model(storage=2)
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    p = model.topics["t"].partitions[0]
    model.alter_partition(100, incarnation(model, 100), "t", 0, 0, 0, [100])  # 101 lagging
    model.begin_shutdown(100, incarnation(model, 100))
    assert p.leader == 100 and model.shutdown_ready(100)
    model.alter_partition(
        100, incarnation(model, 100), "t", 0, p.leader_epoch, p.partition_epoch, [100, 101]
    )
    assert (p.leader, p.isr) == (101, [101])


def test_elect_leaders_preferred_and_unclean() -> None:
    model = make_model(storage=2)
    model.create_topic(TopicSpec("t", assignments={0: [100, 101], 1: [101, 100]}))
    p0 = model.topics["t"].partitions[0]
    results = model.elect_leaders(ElectionType.PREFERRED, [("t", 0), ("t", 9)])
    assert [r.error_code for r in results] == [
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    model.register_node(NodeInfo(100, NodeKind.STORAGE))  # restart: 101 leads p0, 100 out of ISR
    assert p0.leader == 101
    results = model.elect_leaders(ElectionType.PREFERRED, [("t", 0)])
    assert results[0].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    model.alter_partition(
        101, incarnation(model, 101), "t", 0, p0.leader_epoch, p0.partition_epoch, [101, 100]
    )
    assert model.elect_leaders(ElectionType.PREFERRED, None) == [ElectionResult("t", 0)]
    assert p0.leader == 100
    assert model.elect_leaders(ElectionType.PREFERRED, None) == []  # nothing needed: omitted
    model.alter_partition(
        100, incarnation(model, 100), "t", 0, p0.leader_epoch, p0.partition_epoch, [100]
    )
    model.node_offline(100)
    assert p0.leader == NO_LEADER
    results = model.elect_leaders(ElectionType.UNCLEAN, [("t", 0), ("t", 1)])
    assert [r.error_code for r in results] == [0, ErrorCode.ELECTION_NOT_NEEDED]
    assert (p0.leader, p0.isr) == (101, [101])


def test_auto_rebalance_moves_leadership_home() -> None:
    model = make_model(storage=2)
    model.create_topic(TopicSpec("t", assignments={i: [100, 101] for i in range(4)}))
    model.register_node(NodeInfo(100, NodeKind.STORAGE))  # restart: everything moves to 101
    parts = model.topics["t"].partitions
    assert all(p.leader == 101 for p in parts)
    for p in parts:  # 100 catches up
        model.alter_partition(
            101,
            incarnation(model, 101),
            "t",
            p.partition,
            p.leader_epoch,
            p.partition_epoch,
            [101, 100],
        )
    assert model.rebalance_preferred_leaders(10) == 4
    assert all(p.leader == 100 for p in parts)
    assert model.rebalance_preferred_leaders(10) == 0
