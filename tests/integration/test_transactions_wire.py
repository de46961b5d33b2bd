"""Transactions on the wire, request by request, against a real cluster (issue 13).

Every transaction API at the versions the gateway advertises, the Fetch and
ListOffsets views of an open, a committed and an aborted transaction (last stable
offset, aborted-transactions list), transactional offset commits pending until their
marker, the admin APIs (DescribeTransactions, ListTransactions, DescribeProducers),
and bad input answered with Kafka's error codes: EndTxn outside a transaction, a
stale epoch, an unknown producer id, markers for unknown partitions.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.wire import WireClient
from txn_tools import wait_storage_online
from txn_wire import (
    READ_COMMITTED,
    TxnSession,
    fetch,
    list_offset,
    offset_fetch,
    until,
    visible_values,
)

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import (
    AddPartitionsToTxnRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
)
from odradek.rpc.channel import open_channel
from odradek.rpc.v1 import offsets_pb2_grpc, transactions_pb2
from odradek.tools.launcher import Cluster


@pytest.fixture(scope="module")
def topic(bootstrap: str, cluster: Cluster) -> Iterator[str]:
    wait_storage_online(cluster)
    name = f"txw-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(60)
    until(
        lambda: len(admin.list_topics(name, timeout=10).topics[name].partitions) == 3,
        what="topic metadata",
    )
    yield name


def tid() -> str:
    return f"tx-{uuid.uuid4().hex[:10]}"


def test_find_coordinator_transaction_every_version(bootstrap: str, cluster: Cluster) -> None:
    # The coordinator is the broker (storage node 100, the only one) leading the id's
    # __transaction_state partition, at its gateway broker port (docs/brokers.md).
    port = cluster.service("gateway-0").ports["broker-100"]
    with TxnSession(bootstrap, tid()) as s:
        for version in (1, 2, 3):
            r = s.find_coordinator(version)
            assert (r.error_code, r.node_id, r.port) == (E.NONE, 100, port)
        with WireClient(bootstrap) as c:
            for version in (4, 5, 6):
                r = c.call(
                    FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "ü-群"]), version
                )
                assert [(x.key, x.error_code, x.node_id) for x in r.coordinators] == [
                    ("a", E.NONE, 100),
                    ("ü-群", E.NONE, 100),
                ]


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_every_version(bootstrap: str, version: int) -> None:
    with TxnSession(bootstrap, tid()) as s:
        first = s.init(version)
        assert (first.error_code, first.producer_epoch) == (E.NONE, 0)
        assert first.producer_id >= 0
        again = s.init(version)  # a new session of the same id: same producer, next epoch
        assert (again.error_code, again.producer_id, again.producer_epoch) == (
            E.NONE,
            first.producer_id,
            1,
        )
        if version >= 3:  # KIP-360: the producer names itself to resume
            resumed = s.init(version, producer_id=first.producer_id, epoch=1)
            assert (resumed.error_code, resumed.producer_id, resumed.producer_epoch) == (
                E.NONE,
                first.producer_id,
                2,
            )
    with TxnSession(bootstrap, tid(), timeout_ms=900_001) as s:
        assert s.init(version).error_code == E.INVALID_TRANSACTION_TIMEOUT


def test_commit_and_abort_as_fetch_and_list_offsets_see_them(bootstrap: str, topic: str) -> None:
    with TxnSession(bootstrap, tid()) as s:
        assert s.init().error_code == E.NONE
        assert s.add_partitions(topic, [0]) == {(topic, 0): E.NONE}
        error, first = s.produce(topic, 0, [b"c1", b"c2", b"c3"])
        assert error == E.NONE
        # Open: the last stable offset stays at the transaction's first offset.
        assert list_offset(bootstrap, topic, 0, isolation=READ_COMMITTED) == first
        assert list_offset(bootstrap, topic, 0, isolation=0) == first + 3
        entry = fetch(bootstrap, topic, 0, isolation=READ_COMMITTED, offset=first)
        assert (entry.high_watermark, entry.last_stable_offset) == (first + 3, first)
        assert visible_values(entry) == []
        assert s.end(commit=True) == E.NONE
        # The marker follows the answer; then everything up to it is stable.
        until(
            lambda: list_offset(bootstrap, topic, 0, isolation=READ_COMMITTED) == first + 4,
            what="the commit marker",
        )
        assert s.add_partitions(topic, [0]) == {(topic, 0): E.NONE}
        error, second = s.produce(topic, 0, [b"a1", b"a2"])
        assert (error, second) == (E.NONE, first + 4)
        assert s.end(commit=False) == E.NONE
        until(
            lambda: list_offset(bootstrap, topic, 0, isolation=READ_COMMITTED) == second + 3,
            what="the abort marker",
        )
        entry = fetch(bootstrap, topic, 0, isolation=READ_COMMITTED, offset=first)
        assert [(a.producer_id, a.first_offset) for a in entry.aborted_transactions] == [
            (s.pid, second)
        ]
        assert visible_values(entry) == [b"c1", b"c2", b"c3"]
        plain = fetch(bootstrap, topic, 0, isolation=0, offset=first)
        assert plain.aborted_transactions is None
        assert plain.last_stable_offset == second + 3


@pytest.mark.parametrize("version", range(4))
def test_add_partitions_to_txn_client_versions(bootstrap: str, topic: str, version: int) -> None:
    with TxnSession(bootstrap, tid()) as s:
        assert s.init().error_code == E.NONE
        assert s.add_partitions(topic, [0, 1], version) == {
            (topic, 0): E.NONE,
            (topic, 1): E.NONE,
        }
        missing = f"missing-{uuid.uuid4().hex[:6]}"
        r = s.add_partitions(missing, [0], version)
        assert r == {(missing, 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        # One bad partition and the coordinator is not asked: the rest is not attempted.
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        mixed = s.call(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=s.tid,
                v3_and_below_producer_id=s.pid,
                v3_and_below_producer_epoch=s.epoch,
                v3_and_below_topics=[
                    T(name=topic, partitions=[2]),
                    T(name=topic, partitions=[99]),
                    T(name="__consumer_offsets", partitions=[0]),
                ],
            ),
            version,
        )
        codes = {
            (t.name, p.partition_index): p.partition_error_code
            for t in mixed.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        assert codes == {
            (topic, 2): E.OPERATION_NOT_ATTEMPTED,
            (topic, 99): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED,
        }
        stale = s.add_partitions(topic, [2], version, epoch=s.epoch - 1 if s.epoch else 5)
        fenced = E.PRODUCER_FENCED if version >= 2 else E.INVALID_PRODUCER_EPOCH
        assert stale == {(topic, 2): fenced}
        assert s.end(commit=False) == E.NONE


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_broker_form(bootstrap: str, topic: str, version: int) -> None:
    """v4+ (KIP-890): several transactions per request; verify_only adds nothing and
    says which partitions are in the transaction."""
    with TxnSession(bootstrap, tid()) as a, TxnSession(bootstrap, tid()) as b:
        for s in (a, b):
            assert s.init().error_code == E.NONE
        assert a.add_partitions(topic, [0]) == {(topic, 0): E.NONE}
        X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        T = X.AddPartitionsToTxnTopic
        r = a.call(
            AddPartitionsToTxnRequest(
                transactions=[
                    X(
                        transactional_id=a.tid,
                        producer_id=a.pid,
                        producer_epoch=a.epoch,
                        verify_only=True,
                        topics=[T(name=topic, partitions=[0, 1])],
                    ),
                    X(
                        transactional_id=b.tid,
                        producer_id=b.pid,
                        producer_epoch=b.epoch,
                        verify_only=False,
                        topics=[T(name=topic, partitions=[2])],
                    ),
                ]
            ),
            version,
        )
        assert r.error_code == E.NONE
        results = {
            x.transactional_id: {
                (t.name, p.partition_index): p.partition_error_code
                for t in x.topic_results
                for p in t.results_by_partition
            }
            for x in r.results_by_transaction
        }
        not_in = E.TRANSACTION_ABORTABLE if version >= 5 else E.INVALID_TXN_STATE
        assert results[a.tid] == {(topic, 0): E.NONE, (topic, 1): not_in}
        assert results[b.tid] == {(topic, 2): E.NONE}
        for s in (a, b):
            assert s.end(commit=False) == E.NONE


def test_bad_input_gets_kafkas_error_codes(bootstrap: str, topic: str) -> None:
    with TxnSession(bootstrap, tid()) as s:
        assert s.init().error_code == E.NONE
        # EndTxn outside a transaction.
        assert s.end(commit=True) == E.INVALID_TXN_STATE
        assert s.end(commit=False) == E.NONE  # aborts nothing (end_txn.py deviation)
        # An unknown producer id for this transactional id.
        assert s.end(commit=True, producer_id=s.pid + 100_000) == E.INVALID_PRODUCER_ID_MAPPING
        assert s.add_partitions(topic, [0]) == {(topic, 0): E.NONE}
        # A stale epoch: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH before v2.
        old = s.epoch
        assert s.init().error_code == E.NONE  # bumps the epoch, aborts the open transaction
        assert s.end(commit=True, epoch=old) == E.PRODUCER_FENCED
        assert s.end(commit=True, epoch=old, version=1) == E.INVALID_PRODUCER_EPOCH
        assert s.add_offsets("g", epoch=old) == E.PRODUCER_FENCED
        # A transactional batch to a partition never added: refused (KIP-890), nothing
        # appended, as TRANSACTION_ABORTABLE from Produce v11 and INVALID_TXN_STATE before.
        end = list_offset(bootstrap, topic, 1, isolation=0)
        assert s.produce(topic, 1, [b"x"], version=9)[0] == E.INVALID_TXN_STATE
        assert s.produce(topic, 1, [b"x"], version=11)[0] == E.TRANSACTION_ABORTABLE
        assert list_offset(bootstrap, topic, 1, isolation=0) == end
        # Transactional records need a transactional id.
        assert (
            s.produce(topic, 1, [b"x"], transactional_id=None)[0]
            == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    # An unknown transactional id, and an empty one.
    with TxnSession(bootstrap, tid()) as ghost:
        ghost.find_coordinator()
        assert ghost.end(commit=True, producer_id=1, epoch=0) == E.INVALID_PRODUCER_ID_MAPPING
    with TxnSession(bootstrap, "") as empty:
        assert empty.end(commit=True, producer_id=1, epoch=0) == E.INVALID_REQUEST
        assert empty.init().error_code == E.INVALID_REQUEST


def test_markers_for_unknown_partitions(cluster: Cluster) -> None:
    """The offset store answers markers for partitions it cannot know with
    UNKNOWN_TOPIC_OR_PARTITION, which the coordinator treats as done (Kafka)."""
    name = next(s.spec.name for s in cluster.services if s.spec.kind == "offsets")

    async def call() -> Any:
        channel = open_channel(cluster.grpc_address(name))
        try:
            stub = offsets_pb2_grpc.OffsetStoreStub(channel)
            return await stub.WriteTxnMarkers(
                transactions_pb2.WriteTxnMarkersRequest(
                    timeout_ms=5000,
                    markers=[
                        transactions_pb2.TxnMarker(
                            producer_id=1,
                            producer_epoch=0,
                            committed=True,
                            coordinator_epoch=0,
                            topics=[
                                transactions_pb2.TxnTopicPartitions(
                                    topic="__consumer_offsets", partitions=[9999]
                                ),
                                transactions_pb2.TxnTopicPartitions(
                                    topic="not-an-offsets-topic", partitions=[0]
                                ),
                            ],
                        )
                    ],
                ),
                timeout=10,
            )
        finally:
            await channel.close()

    try:
        response = asyncio.run(call())
    except grpc.aio.AioRpcError as exc:  # pragma: no cover - a failure to report
        raise AssertionError(f"WriteTxnMarkers failed: {exc}") from exc
    (marker,) = response.markers
    assert {(p.topic, p.partition, p.error_code) for p in marker.partitions} == {
        ("__consumer_offsets", 9999, E.UNKNOWN_TOPIC_OR_PARTITION),
        ("not-an-offsets-topic", 0, E.UNKNOWN_TOPIC_OR_PARTITION),
    }


def test_txn_offset_commit_is_pending_until_the_commit_marker(bootstrap: str, topic: str) -> None:
    group = f"txg-{uuid.uuid4().hex[:8]}"
    with TxnSession(bootstrap, tid()) as s:
        assert s.init().error_code == E.NONE
        assert s.add_offsets(group) == E.NONE
        assert s.txn_offset_commit(group, {(topic, 0): 5}) == {(topic, 0): E.NONE}
        assert s.end(commit=True) == E.NONE
        until(
            lambda: offset_fetch(bootstrap, group, topic, [0], stable=True)[0] == (5, E.NONE),
            what="the first commit",
        )
        # Pending: invisible, and require_stable readers are told to retry.
        assert s.add_offsets(group) == E.NONE
        assert s.txn_offset_commit(group, {(topic, 0): 10, (topic, 1): 3}) == {
            (topic, 0): E.NONE,
            (topic, 1): E.NONE,
        }
        assert offset_fetch(bootstrap, group, topic, [0, 1], stable=False) == {
            0: (5, E.NONE),
            1: (-1, E.NONE),
        }
        assert offset_fetch(bootstrap, group, topic, [0, 1, 2], stable=True) == {
            0: (-1, E.UNSTABLE_OFFSET_COMMIT),
            1: (-1, E.UNSTABLE_OFFSET_COMMIT),
            2: (-1, E.NONE),
        }
        assert s.end(commit=True) == E.NONE
        until(
            lambda: (
                offset_fetch(bootstrap, group, topic, [0, 1], stable=True)
                == {0: (10, E.NONE), 1: (3, E.NONE)}
            ),
            what="the commit marker in __consumer_offsets",
        )
        # Aborted: the offsets vanish.
        assert s.add_offsets(group) == E.NONE
        assert s.txn_offset_commit(group, {(topic, 0): 99}) == {(topic, 0): E.NONE}
        assert s.end(commit=False) == E.NONE
        until(
            lambda: offset_fetch(bootstrap, group, topic, [0], stable=True)[0] == (10, E.NONE),
            what="the abort marker in __consumer_offsets",
        )


@pytest.mark.parametrize("version", range(5))
def test_txn_offset_commit_checks(bootstrap: str, topic: str, version: int) -> None:
    group = f"txc-{uuid.uuid4().hex[:8]}"
    with TxnSession(bootstrap, tid()) as s:
        assert s.init().error_code == E.NONE
        # Without AddOffsetsToTxn the group's partition is not in the transaction: the
        # storage leader's verification refuses the write (KIP-890).
        refused = E.TRANSACTION_ABORTABLE if version >= 4 else E.INVALID_TXN_STATE
        assert s.txn_offset_commit(group, {(topic, 0): 1}, version) == {(topic, 0): refused}
        assert s.add_offsets(group) == E.NONE
        unknown = {(topic, 0): 1, (topic, 42): 1, ("no-such-topic", 0): 1}
        assert s.txn_offset_commit(group, unknown, version) == {
            (topic, 0): E.NONE,
            (topic, 42): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        }
        if version >= 3:  # KIP-447: a generation for a group that does not exist
            assert s.txn_offset_commit(group + "-x", {(topic, 0): 1}, version, generation=4) == {
                (topic, 0): E.ILLEGAL_GENERATION
            }
        assert s.txn_offset_commit("", {(topic, 0): 1}, version) == {(topic, 0): E.INVALID_GROUP_ID}
        assert s.end(commit=False) == E.NONE


def test_describe_list_transactions_and_producers(bootstrap: str, topic: str) -> None:
    with TxnSession(bootstrap, tid()) as s, WireClient(bootstrap) as c:
        assert s.init().error_code == E.NONE
        assert s.add_partitions(topic, [1, 2]) == {(topic, 1): E.NONE, (topic, 2): E.NONE}
        error, first = s.produce(topic, 1, [b"d1"])
        assert error == E.NONE
        r = c.call(DescribeTransactionsRequest(transactional_ids=[s.tid, "nobody-" + s.tid, ""]), 0)
        mine, nobody, empty = r.transaction_states
        assert (mine.error_code, mine.transaction_state, mine.producer_id, mine.producer_epoch) == (
            E.NONE,
            "Ongoing",
            s.pid,
            s.epoch,
        )
        assert mine.transaction_timeout_ms == 60000 and mine.transaction_start_time_ms > 0
        assert {(t.topic, p) for t in mine.topics for p in t.partitions} == {(topic, 1), (topic, 2)}
        assert nobody.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert empty.error_code == E.INVALID_REQUEST

        def listed(version: int, **filters: Any) -> Any:
            request = ListTransactionsRequest(
                state_filters=filters.get("states", []),
                producer_id_filters=filters.get("pids", []),
                duration_filter=filters.get("duration", -1),
            )
            return c.call(request, version)

        for version in (0, 1):
            everything = listed(version)
            assert everything.error_code == E.NONE
            assert (s.tid, s.pid, "Ongoing") in {
                (t.transactional_id, t.producer_id, t.transaction_state)
                for t in everything.transaction_states
            }
            ongoing = listed(version, states=["Ongoing", "Nonsense"], pids=[s.pid])
            assert [t.transactional_id for t in ongoing.transaction_states] == [s.tid]
            assert ongoing.unknown_state_filters == ["Nonsense"]
        assert listed(1, duration=3_600_000, pids=[s.pid]).transaction_states == []

        T = DescribeProducersRequest.TopicRequest
        r = c.call(DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[1, 7])]), 0)
        found, missing = r.topics[0].partitions
        assert missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        states = {p.producer_id: p for p in found.active_producers}
        assert states[s.pid].current_txn_start_offset == first
        assert states[s.pid].producer_epoch == s.epoch

        assert s.end(commit=True) == E.NONE
        until(
            lambda: (
                c.call(DescribeTransactionsRequest(transactional_ids=[s.tid]), 0)
                .transaction_states[0]
                .transaction_state
                == "CompleteCommit"
            ),
            what="CompleteCommit",
        )
        r = c.call(DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[1])]), 0)
        (found,) = r.topics[0].partitions
        assert {p.producer_id: p for p in found.active_producers}[
            s.pid
        ].current_txn_start_offset == -1
