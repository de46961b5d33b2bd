"""The controller's reassignment rules (KIP-455), elections around them, and failed log dirs."""

from __future__ import annotations

import random

import pytest

from odradek.controller.cluster_state import NO_LEADER, NodeInfo, NodeKind, PartitionState
from odradek.controller.errors import ControllerError
from odradek.controller.model import ClusterModel, TopicSpec
from odradek.controller.snapshot import partition_proto
from odradek.protocol.errors import ErrorCode


def make_model(storage: int = 6, **configs: str) -> ClusterModel:
    model = ClusterModel({k.replace("_", "."): v for k, v in configs.items()}, rng=random.Random(3))
    model.bootstrap()
    for i in range(storage):
        model.register_node(NodeInfo(100 + i, NodeKind.STORAGE, "127.0.0.1", grpc_port=5000 + i))
    model.take_changes()
    return model


def inc(model: ClusterModel, node_id: int) -> int:
    return model.nodes[node_id].incarnation


def expand(model: ClusterModel, name: str, index: int, isr: list[int]) -> PartitionState:
    """The leader asks for ``isr`` (AlterPartition), as its ISR manager would."""
    p = model.topics[name].partitions[index]
    return model.alter_partition(
        p.leader, inc(model, p.leader), name, index, p.leader_epoch, p.partition_epoch, isr
    )


def code_of(fn: object, *args: object, **kwargs: object) -> ErrorCode:
    with pytest.raises(ControllerError) as info:
        fn(*args, **kwargs)  # type: ignore[operator]
    return info.value.code


def test_move_all_replicas_completes_once_targets_join_the_isr() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101, 102]}))
    p = model.topics["t"].partitions[0]
    epoch = p.leader_epoch
    model.alter_partition_reassignment("t", 0, [103, 104, 105])
    assert p.replicas == [103, 104, 105, 100, 101, 102]
    assert (p.adding_replicas, p.removing_replicas) == ([103, 104, 105], [100, 101, 102])
    assert p.leader == 100 and p.leader_epoch == epoch  # leadership stays until completion
    assert model.under_replicated_partitions() == 0  # Kafka counts the original replicas

    expand(model, "t", 0, [100, 101, 102, 103, 104])
    assert p.adding_replicas  # 105 not in sync yet
    expand(model, "t", 0, [100, 101, 102, 103, 104, 105])
    assert p.replicas == [103, 104, 105]
    assert p.isr == [103, 104, 105]
    assert (p.adding_replicas, p.removing_replicas) == ([], [])
    assert p.leader == 103 and p.leader_epoch == epoch + 1
    assert model.partition_reassignments() == []


def test_leader_kept_when_it_stays_but_epoch_bumps_when_a_replica_goes() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101, 102]}))
    p = model.topics["t"].partitions[0]
    epoch = p.leader_epoch
    model.alter_partition_reassignment("t", 0, [103, 100, 101])
    assert p.replicas == [103, 100, 101, 102] and p.removing_replicas == [102]
    expand(model, "t", 0, [100, 101, 102, 103])
    assert p.replicas == [103, 100, 101] and p.isr == [100, 101, 103]
    assert p.leader == 100  # still in sync: not moved to the preferred replica
    assert p.leader_epoch == epoch + 1  # a replica was removed


def test_reorder_or_shrink_in_sync_completes_at_once() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101, 102], 1: [100, 101, 102]}))
    p0, p1 = model.topics["t"].partitions
    model.alter_partition_reassignment("t", 0, [102, 101, 100])
    assert (p0.replicas, p0.adding_replicas, p0.leader) == ([102, 101, 100], [], 100)
    model.alter_partition_reassignment("t", 1, [101])
    assert (p1.replicas, p1.isr, p1.leader, p1.removing_replicas) == ([101], [101], 101, [])


def test_cancel_reverts_and_a_second_cancel_answers_no_reassignment() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    p = model.topics["t"].partitions[0]
    model.alter_partition_reassignment("t", 0, [102, 103])
    expand(model, "t", 0, [100, 101, 102])
    assert model.partition_reassignments([("t", 0), ("nope", 0), ("t", 7)])[0][1].replicas == [
        102,
        103,
        100,
        101,
    ]
    model.alter_partition_reassignment("t", 0, None)
    assert (p.replicas, p.isr, p.leader) == ([100, 101], [100, 101], 100)
    assert (p.adding_replicas, p.removing_replicas) == ([], [])
    assert (
        code_of(model.alter_partition_reassignment, "t", 0, None)
        is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    )


def test_cancel_that_needs_an_unclean_election_is_refused_unless_enabled() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    model.alter_partition_reassignment("t", 0, [100, 101, 102])
    expand(model, "t", 0, [100, 101, 102])  # completes: 102 is an ordinary replica now
    model.alter_partition_reassignment("t", 0, [103, 104])
    p = model.topics["t"].partitions[0]
    expand(model, "t", 0, [100, 101, 102, 103])
    # 100, 101, 102 die; only 103 (adding) remains in the ISR
    for node in (100, 101, 102):
        model.node_offline(node)
    assert p.isr == [103] and p.leader == 103
    assert (
        code_of(model.alter_partition_reassignment, "t", 0, None)
        is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    )
    model.alter_configs(
        *_topic_set("t", "unclean.leader.election.enable", "true"), incremental=True
    )
    model.alter_partition_reassignment("t", 0, None)
    assert p.replicas == [100, 101, 102] and p.isr == [100]


def _topic_set(name: str, key: str, value: str) -> tuple[object, ...]:
    from odradek.controller.model import ConfigChange, ResourceType

    return ResourceType.TOPIC, name, [ConfigChange(key, value=value)]


def test_second_reassignment_starts_from_the_full_replica_list() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    p = model.topics["t"].partitions[0]
    model.alter_partition_reassignment("t", 0, [102, 103])
    model.alter_partition_reassignment("t", 0, [103, 104])
    assert p.replicas == [103, 104, 100, 101, 102]
    assert p.adding_replicas == [104] and p.removing_replicas == [100, 101, 102]


@pytest.mark.parametrize(
    ("target", "code", "fragment"),
    [
        ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "empty replica list"),
        ([100, 100], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 100 more than once"),
        ([100, 999], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 999, but no such broker"),
        ([-1, 100], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker -1, but no such broker"),
        ([7, 5, 5], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "broker 5, but no such broker"),
    ],
)
def test_bad_targets(target: list[int], code: ErrorCode, fragment: str) -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    model.take_changes()
    with pytest.raises(ControllerError) as info:
        model.alter_partition_reassignment("t", 0, target)
    assert info.value.code is code and fragment in info.value.message
    assert not model.has_changes


def test_unknown_or_deleted_topic_and_partition() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    assert (
        code_of(model.alter_partition_reassignment, "t", 1, [100])
        is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    model.delete_topic("t")
    assert (
        code_of(model.alter_partition_reassignment, "t", 0, [100])
        is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_replication_factor_change_refused_when_not_allowed() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101, 102]}))
    with pytest.raises(ControllerError) as info:
        model.alter_partition_reassignment(
            "t", 0, [100, 101], allow_replication_factor_change=False
        )
    assert info.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert info.value.message == "The replication factor is changed from 3 to 2"
    model.alter_partition_reassignment(
        "t", 0, [103, 104, 105], allow_replication_factor_change=False
    )


def test_state_survives_persistence_and_a_new_controller_completes_it() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    model.alter_partition_reassignment("t", 0, [102, 103])
    model.take_changes()
    p = model.topics["t"].partitions[0]
    # the ISR already holds the targets when the controller fails over
    p.isr = [100, 101, 102, 103]
    records = {k: model.record(k) for k in ("cluster", "topics/t")}
    records.update({f"nodes/{n}": model.record(f"nodes/{n}") for n in model.nodes})
    fresh = ClusterModel(rng=random.Random(1))
    fresh.load(records)
    q = fresh.topics["t"].partitions[0]
    assert (q.adding_replicas, q.removing_replicas) == ([102, 103], [100, 101])
    fresh.complete_reassignments()
    assert q.replicas == [102, 103] and q.leader == 102


def test_snapshot_shows_adding_removing_and_offline() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101]}))
    model.alter_partition_reassignment("t", 0, [101, 102])
    proto = partition_proto(model.topics["t"].partitions[0], model)
    assert list(proto.adding_replicas) == [102] and list(proto.removing_replicas) == [100]


def test_failed_log_dir_takes_only_its_replicas_offline_and_moves_leadership() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", assignments={0: [100, 101], 1: [100, 101]}))
    model.create_topic(TopicSpec("u", assignments={0: [100]}))
    p0, p1 = model.topics["t"].partitions
    p2 = model.topics["u"].partitions[0]
    epoch = p0.leader_epoch
    assert model.report_offline_replicas(100, inc(model, 100), [("t", 0), ("u", 0)]) == 2
    assert (p0.leader, p0.isr, p0.leader_epoch) == (101, [101], epoch + 1)
    assert p1.leader == 100  # another directory: untouched
    assert (p2.leader, p2.isr) == (NO_LEADER, [100])  # its only copy is in the failed dir
    assert list(partition_proto(p0, model).offline_replicas) == [100]
    # the replica cannot lead or rejoin the ISR while its directory is offline
    assert (
        code_of(
            model.alter_partition,
            101,
            inc(model, 101),
            "t",
            0,
            p0.leader_epoch,
            p0.partition_epoch,
            [101, 100],
        )
        is ErrorCode.INELIGIBLE_REPLICA
    )
    model.register_node(NodeInfo(100, NodeKind.STORAGE))  # restarted with the disk replaced
    assert p0.offline == [] and p2.leader == 100
    assert (
        code_of(model.report_offline_replicas, 100, 12345, [("t", 1)])
        is ErrorCode.STALE_BROKER_EPOCH
    )
