"""The transaction coordinator as a real process, driven over its gRPC API against real
storage nodes and offset stores: transactions through commit and abort (markers land,
read_committed sees exactly the committed data, ``dump-log`` decodes the state log),
Kafka's error codes for bad input, a coordinator killed with kill -9 while its
transaction waits in PrepareCommit whose successor finishes it, timeouts that abort
and fence, expiry of idle transactional ids, and shards moving between coordinators."""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.waiting import wait_until
from txn_grpc import (
    SETTLE_S,
    add_partitions,
    committed_values,
    coordinator,
    create_topic,
    data_values,
    describe,
    end_txn,
    fetch,
    init,
    metadata,
    owner,
    produce_txn,
    wait_state,
)

from odradek.group_shard import OFFSETS_TOPIC, shard_of
from odradek.protocol.errors import ErrorCode as E
from odradek.records.control import parse_end_txn_marker
from odradek.rpc.v1 import transactions_pb2
from odradek.tools.dump_log import dump_files
from odradek.tools.launcher import TRANSACTIONS_BASE_ID, Cluster
from odradek.transaction_shard import (
    TRANSACTION_STATE_TOPIC,
    transaction_coordinator_of,
    transaction_shard_of,
)

READ_COMMITTED, READ_UNCOMMITTED = 1, 0
FAST = {
    "replica.lag.time.max.ms": "2000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


def markers(cluster: Cluster, topic: str, partition: int) -> list[tuple[str, int, int]]:
    """(COMMIT/ABORT, producer id, coordinator epoch) of every control batch."""
    batches, _ = fetch(cluster, topic, partition, READ_UNCOMMITTED)
    out = []
    for b in batches:
        if b.is_control:
            for r in b.records:
                m = parse_end_txn_marker(r.key, r.value)
                out.append((m.control_type.name, b.producer_id, m.coordinator_epoch))
    return out


def state_log(cluster: Cluster, transactional_id: str) -> list[str]:
    """The states ``dump-log --transaction-log-decoder`` shows for the id, in log order,
    read from the segment files of every storage node holding the shard."""
    shard = transaction_shard_of(metadata(cluster), transactional_id)
    found: list[list[str]] = []
    for svc in cluster.services:
        if svc.spec.kind != "storage":
            continue
        segment = Path(svc.spec.settings["log.dirs"]) / f"{TRANSACTION_STATE_TOPIC}-{shard}"
        logs = sorted(segment.glob("*.log")) if segment.is_dir() else []
        if not logs:
            continue
        out = io.StringIO()
        assert dump_files([str(p) for p in logs], False, out, transaction_log_decoder=True) == 0
        key = f"key: transaction_metadata::transactionalId={transactional_id} "
        found.append(
            [
                line.split("state=")[1].split(",")[0]
                for line in out.getvalue().splitlines()
                if key in line and "state=" in line
            ]
        )
    assert found, "no replica of the shard found"
    return max(found, key=len)


def test_commit_abort_and_offsets_over_grpc(cluster: Cluster, unique_topic: str) -> None:
    topic, txn = unique_topic, f"txn-{unique_topic}"
    create_topic(cluster, topic, 2)
    node, epoch = owner(cluster, txn)
    stub = coordinator(cluster, node)
    r = init(stub, txn)
    assert r.error_code == E.NONE and r.producer_epoch == 0
    pid = r.producer_id

    # Nothing may be written before the partition joined the transaction (KIP-890).
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 0, [b"early"]) == E.INVALID_TXN_STATE
    added = add_partitions(stub, txn, pid, 0, {topic: [0, 1]})
    assert [p.error_code for p in added.partitions] == [E.NONE, E.NONE]
    verified = add_partitions(stub, txn, pid, 0, {topic: [1]}, verify_only=True)
    assert [p.error_code for p in verified.partitions] == [E.NONE]
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 0, [b"c0"]) == E.NONE
    assert produce_txn(cluster, txn, pid, 0, topic, 1, 0, [b"c1"]) == E.NONE
    assert data_values(fetch(cluster, topic, 0, READ_COMMITTED)[0]) == []  # not yet committed
    d = describe(stub, txn)
    assert d.transaction_state == "Ongoing" and d.producer_id == pid
    assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0, 1])]

    assert end_txn(stub, txn, pid, 0, commit=True) == E.NONE
    wait_state(stub, txn, "CompleteCommit")
    for p, value in ((0, b"c0"), (1, b"c1")):
        batches, aborted = fetch(cluster, topic, p, READ_COMMITTED)
        assert data_values(batches) == [value] and aborted == []
        ((kind, producer, coordinator_epoch),) = markers(cluster, topic, p)
        # The shard's epoch (it grows only if the shard moved meanwhile).
        assert (kind, producer) == ("COMMIT", pid) and coordinator_epoch >= epoch

    # An aborted transaction: its data stays out of read_committed, listed as aborted.
    assert add_partitions(stub, txn, pid, 0, {topic: [0]}).partitions[0].error_code == E.NONE
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 1, [b"a0"]) == E.NONE
    assert end_txn(stub, txn, pid, 0, commit=False) == E.NONE
    wait_state(stub, txn, "CompleteAbort")
    batches, aborted = fetch(cluster, topic, 0, READ_COMMITTED)
    assert data_values(batches) == [b"c0", b"a0"]  # below the LSO; the consumer filters
    assert committed_values(batches, aborted) == [b"c0"]
    first_aborted = next(b.base_offset for b in batches if b"a0" in data_values([b]))
    assert aborted == [(pid, first_aborted)]
    assert markers(cluster, topic, 0)[-1][:2] == ("ABORT", pid)

    # Offsets in a transaction: the group's __consumer_offsets partition joins it and
    # the offset store takes the marker.
    group = f"g-{unique_topic}"
    offsets = stub.AddOffsetsToTxn(
        transactions_pb2.AddOffsetsToTxnRequest(
            transactional_id=txn, producer_id=pid, producer_epoch=0, group_id=group
        ),
        timeout=30,
    )
    assert offsets.error_code == E.NONE
    d = describe(stub, txn)
    assert [(t.topic, list(t.partitions)) for t in d.topics] == [
        (OFFSETS_TOPIC, [shard_of(metadata(cluster), group)])
    ]
    assert end_txn(stub, txn, pid, 0, commit=True) == E.NONE
    wait_state(stub, txn, "CompleteCommit")

    listed = stub.ListTransactions(
        transactions_pb2.ListTransactionsRequest(
            state_filters=["CompleteCommit", "Bogus"], duration_filter_ms=-1
        ),
        timeout=30,
    )
    assert listed.error_code == E.NONE and list(listed.unknown_state_filters) == ["Bogus"]
    assert (txn, pid) in {(t.transactional_id, t.producer_id) for t in listed.transactions}
    ongoing = stub.ListTransactions(
        transactions_pb2.ListTransactionsRequest(state_filters=["Ongoing"], duration_filter_ms=-1)
    )
    assert txn not in {t.transactional_id for t in ongoing.transactions}

    assert state_log(cluster, txn) == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
        "Ongoing",
        "PrepareAbort",
        "CompleteAbort",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
    ]


def test_bad_input_gets_kafkas_error_codes(cluster: Cluster, unique_topic: str) -> None:
    topic, txn = unique_topic, f"txn-{unique_topic}"
    create_topic(cluster, topic, 1)
    node, _ = owner(cluster, txn)
    stub = coordinator(cluster, node)
    pid = init(stub, txn).producer_id
    too_long = stub.InitProducerId(
        transactions_pb2.TxnInitProducerIdRequest(
            transactional_id=txn, transaction_timeout_ms=900_001, producer_id=-1, producer_epoch=-1
        )
    )
    assert too_long.error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert end_txn(stub, txn, pid, 0, commit=True, retry=False) == E.INVALID_TXN_STATE
    assert end_txn(stub, txn, pid, 1, commit=True, retry=False) == E.PRODUCER_FENCED
    assert end_txn(stub, txn, pid + 1, 0, commit=True, retry=False) == E.INVALID_PRODUCER_ID_MAPPING
    assert end_txn(stub, f"{txn}-never", 0, 0, commit=True) == E.INVALID_PRODUCER_ID_MAPPING
    assert end_txn(stub, "", pid, 0, commit=True, retry=False) == E.INVALID_REQUEST
    unknown = add_partitions(stub, txn, pid, 0, {topic: [0], f"{topic}-missing": [0]})
    assert [(p.topic, p.error_code) for p in unknown.partitions] == [
        (topic, E.OPERATION_NOT_ATTEMPTED),
        (f"{topic}-missing", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    fenced = add_partitions(stub, txn, pid, 3, {topic: [0]})
    assert fenced.partitions[0].error_code == E.PRODUCER_FENCED
    never = describe(stub, f"{txn}-never")
    assert never.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    # A second producer instance fences the first one.
    assert init(stub, txn).producer_epoch == 1
    assert add_partitions(stub, txn, pid, 0, {topic: [0]}).partitions[0].error_code == (
        E.PRODUCER_FENCED
    )
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 0, [b"zombie"]) != E.NONE


@pytest.mark.slow
def test_kill9_during_prepare_commit_successor_finishes_it(
    cluster_factory: Callable[..., Cluster],
) -> None:
    cluster = cluster_factory(
        storage_nodes=3, replication_factor=1, transaction_coordinators=2, settings=FAST
    )
    txn, topic = "txn-kill9", "held"
    # The data partition lives on storage-102 alone: with it down, markers cannot land.
    create_topic(cluster, topic, assignments={0: [102]})
    first, epoch = owner(cluster, txn)
    stub = coordinator(cluster, first)
    pid = init(stub, txn).producer_id
    assert add_partitions(stub, txn, pid, 0, {topic: [0]}).partitions[0].error_code == E.NONE
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 0, [b"kept"]) == E.NONE

    storage = cluster.service("storage-102")
    os.kill(storage.process.pid, signal.SIGKILL)
    storage.process.wait(10)
    assert end_txn(stub, txn, pid, 0, commit=True) == E.NONE  # PrepareCommit is durable
    assert describe(stub, txn).transaction_state == "PrepareCommit"

    victim = cluster.service(f"transactions-{first}")
    os.kill(victim.process.pid, signal.SIGKILL)
    victim.process.wait(10)
    successor = TRANSACTIONS_BASE_ID + (1 - (first - TRANSACTIONS_BASE_ID))

    def moved() -> int | None:
        md = metadata(cluster)
        node, new_epoch = transaction_coordinator_of(md, transaction_shard_of(md, txn))
        return new_epoch if node == successor else None

    new_epoch = wait_until(moved, "the shard to move to the other coordinator", timeout=SETTLE_S)
    assert new_epoch > epoch
    stub = coordinator(cluster, successor)
    # The successor replayed the log: still prepared, markers pending on storage-102.
    assert describe(stub, txn).transaction_state == "PrepareCommit"
    answer = stub.InitProducerId(
        transactions_pb2.TxnInitProducerIdRequest(
            transactional_id=txn, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
        ),
        timeout=30,
    )
    assert answer.error_code == E.CONCURRENT_TRANSACTIONS

    cluster.restart("storage-102")
    wait_state(stub, txn, "CompleteCommit", timeout=90)
    batches, aborted = fetch(cluster, topic, 0, READ_COMMITTED)
    assert data_values(batches) == [b"kept"] and aborted == []
    # Written by the successor: its coordinator epoch, never the dead owner's.
    ((kind, producer, coordinator_epoch),) = markers(cluster, topic, 0)
    assert (kind, producer) == ("COMMIT", pid) and coordinator_epoch >= new_epoch
    # The transactional id goes on under the successor.
    again = init(stub, txn)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.NONE, pid, 1)


def test_timeouts_abort_and_fence_and_idle_ids_expire(
    cluster_factory: Callable[..., Cluster],
) -> None:
    cluster = cluster_factory(
        settings={
            **FAST,
            "transactional.id.expiration.ms": "4000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "300",
        }
    )
    topic, txn, idle = "slow", "txn-slow", "txn-idle"
    create_topic(cluster, topic, 1)
    node, _ = owner(cluster, txn)
    stub = coordinator(cluster, node)
    r = init(stub, txn, timeout_ms=1500)
    pid = r.producer_id
    assert add_partitions(stub, txn, pid, 0, {topic: [0]}).partitions[0].error_code == E.NONE
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 0, [b"late"]) == E.NONE
    d = wait_state(stub, txn, "CompleteAbort", timeout=30)
    assert d.producer_epoch == 1  # the producer was fenced by the abort
    assert end_txn(stub, txn, pid, 0, commit=True, retry=False) == E.PRODUCER_FENCED
    assert add_partitions(stub, txn, pid, 0, {topic: [0]}).partitions[0].error_code == (
        E.PRODUCER_FENCED
    )
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 1, [b"zombie"]) != E.NONE
    batches, aborted = fetch(cluster, topic, 0, READ_COMMITTED)
    assert aborted == [(pid, 0)] and committed_values(batches, aborted) == []
    assert markers(cluster, topic, 0)[0][0] == "ABORT"

    idle_stub = coordinator(cluster, owner(cluster, idle)[0])
    assert init(idle_stub, idle).error_code == E.NONE
    wait_until(
        lambda: describe(idle_stub, idle).error_code == E.TRANSACTIONAL_ID_NOT_FOUND,
        "the idle transactional id to expire",
        timeout=30,
    )
    assert state_log(cluster, idle) == ["Empty"]  # then its tombstone (no state)
    fresh = init(idle_stub, idle)
    assert fresh.producer_id != r.producer_id and fresh.producer_epoch == 0


@pytest.mark.slow
def test_shard_moves_between_two_coordinators(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(transaction_coordinators=2, settings=FAST)
    topic, txn = "moving", "txn-moving"
    create_topic(cluster, topic, 1)
    first, epoch = owner(cluster, txn)
    other = TRANSACTIONS_BASE_ID + (1 - (first - TRANSACTIONS_BASE_ID))
    stub = coordinator(cluster, first)
    pid = init(stub, txn).producer_id
    assert add_partitions(stub, txn, pid, 0, {topic: [0]}).partitions[0].error_code == E.NONE
    assert produce_txn(cluster, txn, pid, 0, topic, 0, 0, [b"moved"]) == E.NONE
    # The other coordinator does not own the id.
    wrong = coordinator(cluster, other).EndTxn(
        transactions_pb2.EndTxnRequest(
            transactional_id=txn, producer_id=pid, producer_epoch=0, committed=True
        ),
        timeout=30,
    )
    assert wrong.error_code == E.NOT_COORDINATOR

    # Graceful stop: controlled shutdown hands every shard to the other coordinator.
    leaving = cluster.service(f"transactions-{first}")
    leaving.process.send_signal(signal.SIGTERM)
    assert leaving.process.wait(30) == 0
    wait_until(lambda: owner(cluster, txn)[0] == other, "the shard to move", timeout=SETTLE_S)
    stub = coordinator(cluster, other)
    d = describe(stub, txn)
    assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, 0)
    assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]
    assert end_txn(stub, txn, pid, 0, commit=True) == E.NONE
    wait_state(stub, txn, "CompleteCommit")
    assert data_values(fetch(cluster, topic, 0, READ_COMMITTED)[0]) == [b"moved"]

    # The first coordinator comes back: shards are rebalanced (some move back, at a new
    # epoch); wherever the id lives now, its state is there.
    cluster.restart(f"transactions-{first}")
    wait_until(
        lambda: {s.coordinator_id for s in metadata(cluster).transaction_shards} == {first, other},
        "shards to be spread over both coordinators",
        timeout=SETTLE_S,
    )
    now, now_epoch = owner(cluster, txn)
    assert now_epoch > epoch
    stub = coordinator(cluster, now)
    assert describe(stub, txn).transaction_state == "CompleteCommit"
    again = init(stub, txn)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.NONE, pid, 1)
