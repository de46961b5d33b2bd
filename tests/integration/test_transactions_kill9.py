"""Exactly once through kill -9 (issue 13): a consume-transform-produce loop
(``send_offsets_to_transaction``, tests/integration/txn_loop.py) copies a numbered
input topic to an output topic while something dies with SIGKILL: the loop process
itself, a storage node, or the transaction coordinator holding the loop's
transaction. Afterwards the committed output is exactly the input, transformed:
nothing lost, nothing twice, nothing of an aborted transaction.

Three storage nodes, replication factor 3, ``min.insync.replicas`` 2; each scenario
runs in its own cluster (slow suite), bounded by the loop's progress deadlines.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_tools import (
    cluster_metadata,
    create_topic,
    kill9_service,
    partition_state,
    wait_full_isr,
)
from txn_tools import (
    Loop,
    differences,
    expected_output,
    read_committed,
    transaction_coordinator_name,
    wait_storage_online,
    write_input,
)
from txn_wire import READ_COMMITTED, TxnSession, list_offset, offset_fetch, until

from odradek.protocol.errors import ErrorCode as E
from odradek.tools.launcher import Cluster

PARTITIONS = 3
PER_PARTITION = 1500
SETTINGS = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "3000"}


@pytest.fixture
def cluster(cluster_factory: Callable[..., Cluster]) -> Cluster:
    return cluster_factory(storage_nodes=3, replication_factor=3, settings=SETTINGS)


def run_loop_through(
    cluster: Cluster, tmp_path: Path, disaster: Callable[[Loop, str], None]
) -> None:
    bootstrap = cluster.bootstrap_servers
    wait_storage_online(cluster, 3)
    tag = uuid.uuid4().hex[:6]
    source, sink = f"in-{tag}", f"out-{tag}"
    for t in (source, sink):
        create_topic(bootstrap, t, PARTITIONS, 3)
        wait_full_isr(cluster, t, PARTITIONS)
    write_input(bootstrap, source, PARTITIONS, PER_PARTITION)
    total = PARTITIONS * PER_PARTITION
    transactional_id = f"loop-{tag}"
    loop = Loop(bootstrap, source, sink, f"loop-group-{tag}", transactional_id, tmp_path)
    try:
        loop.start().wait_committed(total // 10)
        disaster(loop, transactional_id)
        got = read_committed(bootstrap, sink, PARTITIONS, total, timeout=180)
    finally:
        loop.stop()
    problems = differences(expected_output(PARTITIONS, PER_PARTITION), got)
    log = [line for run in range(1, loop.runs + 1) for line in _tail(tmp_path / f"loop-{run}.out")]
    assert not problems, (problems, log)


def _tail(path: Path) -> list[str]:
    try:
        return [f"{path.name}: {line}" for line in path.read_text().splitlines()[-5:]]
    except OSError:
        return []


@pytest.mark.slow
def test_exactly_once_when_the_loop_is_killed(cluster: Cluster, tmp_path: Path) -> None:
    def disaster(loop: Loop, transactional_id: str) -> None:
        for _ in range(2):  # twice, mid-transaction (the loop is always inside one)
            loop.kill9()
            loop.start().wait_committed(200)

    run_loop_through(cluster, tmp_path, disaster)


@pytest.mark.slow
def test_exactly_once_when_a_storage_node_is_killed(cluster: Cluster, tmp_path: Path) -> None:
    def disaster(loop: Loop, transactional_id: str) -> None:
        # The node leading the output's partition 0, with the loop writing to it.
        leader = partition_state(cluster, _sink_of(loop), 0).leader
        name = f"storage-{leader}"
        before = loop.committed()
        kill9_service(cluster, name)
        time.sleep(3.0)
        cluster.restart(name)
        loop.wait_committed(before + 200, timeout=120)

    run_loop_through(cluster, tmp_path, disaster)


@pytest.mark.slow
def test_exactly_once_when_the_transaction_coordinator_is_killed(
    cluster: Cluster, tmp_path: Path
) -> None:
    def disaster(loop: Loop, transactional_id: str) -> None:
        name = transaction_coordinator_name(cluster_metadata(cluster), transactional_id)
        before = loop.committed()
        kill9_service(cluster, name)
        time.sleep(2.0)
        cluster.restart(name)
        loop.wait_committed(before + 200, timeout=120)

    run_loop_through(cluster, tmp_path, disaster)


def _sink_of(loop: Loop) -> str:
    return loop.args[2]


@pytest.mark.slow
def test_no_torn_transaction_when_the_coordinator_dies_after_end_txn(cluster: Cluster) -> None:
    """EndTxn answers once PrepareCommit is durable; the markers follow. Killing the
    coordinator right after the answer leaves some partitions without their marker:
    the restarted coordinator finishes the commit, so every partition shows the
    transaction, none is left holding the last stable offset (Jepsen's torn
    transactions)."""
    bootstrap = cluster.bootstrap_servers
    wait_storage_online(cluster, 3)
    topic = f"torn-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS, 3)
    wait_full_isr(cluster, topic, PARTITIONS)
    transactional_id = f"torn-{uuid.uuid4().hex[:6]}"
    for round_ in range(3):
        with TxnSession(bootstrap, transactional_id) as s:
            # The first InitProducerId creates __transaction_state (50 partitions, RF 3)
            # and the coordinator loads its shards: COORDINATOR_LOAD_IN_PROGRESS until
            # then, which took over 30 s on a loaded 2-core machine. Kafka's producer
            # waits max.block.ms (60 s) for it; so does this test.
            assert s.init(timeout=60.0).error_code == E.NONE
            parts = list(range(PARTITIONS))
            assert set(s.add_partitions(topic, parts).values()) == {E.NONE}
            for p in parts:
                assert s.produce(topic, p, [f"r{round_}-p{p}".encode()])[0] == E.NONE
            name = transaction_coordinator_name(cluster_metadata(cluster), transactional_id)
            assert s.end(commit=True) == E.NONE
        kill9_service(cluster, name)
        cluster.restart(name)
        for p in parts:
            until(
                lambda p=p: (
                    list_offset(bootstrap, topic, p, isolation=READ_COMMITTED)
                    == list_offset(bootstrap, topic, p, isolation=0)
                ),
                timeout=60,
                what=f"the commit marker on partition {p}",
            )
    got = read_committed(bootstrap, topic, PARTITIONS, 3 * PARTITIONS, timeout=60)
    for p in range(PARTITIONS):
        assert got[p] == [f"r{r}-p{p}".encode() for r in range(3)], got


@pytest.mark.slow
def test_transactional_offsets_across_an_offset_store_kill(cluster: Cluster) -> None:
    """The offset store replays __consumer_offsets after kill -9: a committed
    transaction's offsets are back, an aborted one's stay gone, an open one's are
    pending again and land with the commit marker the coordinator delivers once the
    store has loaded."""
    bootstrap = cluster.bootstrap_servers
    wait_storage_online(cluster, 3)
    topic, group = f"offs-{uuid.uuid4().hex[:6]}", f"offs-g-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1, 3)

    def stable() -> tuple[int, int]:
        return offset_fetch(bootstrap, group, topic, [0], stable=True)[0]

    with TxnSession(bootstrap, f"offs-{uuid.uuid4().hex[:6]}") as s:
        assert s.init().error_code == E.NONE
        for offset, commit in ((5, True), (10, False)):
            assert s.add_offsets(group) == E.NONE
            assert s.txn_offset_commit(group, {(topic, 0): offset}) == {(topic, 0): E.NONE}
            assert s.end(commit=commit) == E.NONE
            until(lambda: stable() == (5, E.NONE), what="the marker")
        assert s.add_offsets(group) == E.NONE
        assert s.txn_offset_commit(group, {(topic, 0): 20}) == {(topic, 0): E.NONE}
        name = next(svc.spec.name for svc in cluster.services if svc.spec.kind == "offsets")
        kill9_service(cluster, name)
        cluster.restart(name)
        until(
            lambda: offset_fetch(bootstrap, group, topic, [0], stable=False)[0] == (5, E.NONE),
            timeout=60,
            what="the reloaded shard",
        )
        assert stable() == (-1, E.UNSTABLE_OFFSET_COMMIT)
        assert s.end(commit=True) == E.NONE
        until(lambda: stable() == (20, E.NONE), timeout=60, what="the commit marker")
