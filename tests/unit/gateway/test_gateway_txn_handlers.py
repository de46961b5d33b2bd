"""The transaction API handlers through the gateway's real dispatch, without a cluster.

What the gateway answers on its own, at every advertised version: input it refuses
before asking anyone (empty ids, unknown topics, internal topics, transactional
batches without a transactional id) and the retriable answers while no transaction
coordinator owns the id (clients look the coordinator up again). Everything that
needs the coordinator is covered by tests/integration/test_transactions_wire.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from gateway_testkit import call, offline_gateway, one_partition_metadata, produce_request

from odradek.gateway.gateway import Gateway
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from odradek.protocol.versions import SUPPORTED
from odradek.records.record import BatchBuilder


@pytest.fixture
async def gw() -> AsyncIterator[Gateway]:
    async with offline_gateway(one_partition_metadata()) as gateway:
        yield gateway


def versions(key: ApiKey) -> range:
    low, high = SUPPORTED[key]
    return range(low, high + 1)


def test_transaction_apis_are_advertised_as_served() -> None:
    assert SUPPORTED[ApiKey.ADD_PARTITIONS_TO_TXN] == (0, 5)
    assert SUPPORTED[ApiKey.ADD_OFFSETS_TO_TXN] == (0, 4)
    assert SUPPORTED[ApiKey.END_TXN] == (0, 4)  # v5 is transactions v2 (KIP-890 part 2)
    assert SUPPORTED[ApiKey.TXN_OFFSET_COMMIT] == (0, 4)
    assert SUPPORTED[ApiKey.DESCRIBE_TRANSACTIONS] == (0, 0)
    assert SUPPORTED[ApiKey.LIST_TRANSACTIONS] == (0, 1)
    assert SUPPORTED[ApiKey.DESCRIBE_PRODUCERS] == (0, 0)
    assert SUPPORTED[ApiKey.PRODUCE] == (0, 11)  # v12 is transactions v2
    # v1 only: Admin.abortTransaction (KIP-664); v2 is transactions v2 (KIP-890 part 2)
    assert SUPPORTED[ApiKey.WRITE_TXN_MARKERS] == (1, 1)


@pytest.mark.parametrize("version", [1, 3, 4, 6])
async def test_find_coordinator_before_transaction_state_exists(gw: Gateway, version: int) -> None:
    if version >= 4:
        r = await call(
            gw,
            ApiKey.FIND_COORDINATOR,
            version,
            FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]),
        )
        assert r.coordinators[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    else:
        r = await call(
            gw, ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest(key="t", key_type=1)
        )
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("version", range(4))
async def test_add_partitions_checks_before_asking_the_coordinator(
    gw: Gateway, version: int
) -> None:
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

    def request(tid: str, *topics: tuple[str, list[int]]) -> AddPartitionsToTxnRequest:
        return AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=7,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[T(name=n, partitions=ps) for n, ps in topics],
        )

    def codes(r: Any) -> dict[tuple[str, int], int]:
        return {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    r = await call(gw, ApiKey.ADD_PARTITIONS_TO_TXN, version, request("t", ("orders", [0, 3])))
    assert codes(r) == {
        ("orders", 0): E.OPERATION_NOT_ATTEMPTED,
        ("orders", 3): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    r = await call(
        gw, ApiKey.ADD_PARTITIONS_TO_TXN, version, request("t", ("__transaction_state", [0]))
    )
    assert codes(r) == {("__transaction_state", 0): E.TOPIC_AUTHORIZATION_FAILED}
    r = await call(gw, ApiKey.ADD_PARTITIONS_TO_TXN, version, request("", ("orders", [0])))
    assert codes(r) == {("orders", 0): E.INVALID_REQUEST}
    r = await call(gw, ApiKey.ADD_PARTITIONS_TO_TXN, version, request("t", ("orders", [0])))
    assert codes(r) == {("orders", 0): E.NOT_COORDINATOR}


@pytest.mark.parametrize("version", [4, 5])
async def test_add_partitions_broker_form_answers_per_transaction(
    gw: Gateway, version: int
) -> None:
    X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    T = X.AddPartitionsToTxnTopic
    r = await call(
        gw,
        ApiKey.ADD_PARTITIONS_TO_TXN,
        version,
        AddPartitionsToTxnRequest(
            transactions=[
                X(
                    transactional_id=tid,
                    producer_id=1,
                    producer_epoch=0,
                    verify_only=True,
                    topics=[T(name=topic, partitions=[0])],
                )
                for tid, topic in (("a", "orders"), ("b", "missing"))
            ]
        ),
    )
    assert r.error_code == E.NONE
    assert {
        x.transactional_id: [
            (t.name, p.partition_error_code)
            for t in x.topic_results
            for p in t.results_by_partition
        ]
        for x in r.results_by_transaction
    } == {"a": [("orders", E.NOT_COORDINATOR)], "b": [("missing", E.UNKNOWN_TOPIC_OR_PARTITION)]}


async def test_end_txn_and_add_offsets_without_a_coordinator(gw: Gateway) -> None:
    for version in versions(ApiKey.END_TXN):
        empty = EndTxnRequest(transactional_id="", producer_id=1, producer_epoch=0, committed=True)
        assert (await call(gw, ApiKey.END_TXN, version, empty)).error_code == E.INVALID_REQUEST
        ok = EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, committed=True)
        assert (await call(gw, ApiKey.END_TXN, version, ok)).error_code == E.NOT_COORDINATOR
    for version in versions(ApiKey.ADD_OFFSETS_TO_TXN):
        request = AddOffsetsToTxnRequest(
            transactional_id="t", producer_id=1, producer_epoch=0, group_id="g"
        )
        assert (
            await call(gw, ApiKey.ADD_OFFSETS_TO_TXN, version, request)
        ).error_code == E.NOT_COORDINATOR


@pytest.mark.parametrize("version", range(5))
async def test_txn_offset_commit_refusals(gw: Gateway, version: int) -> None:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition

    def request(group: str, topic: str, partition: int) -> TxnOffsetCommitRequest:
        return TxnOffsetCommitRequest(
            transactional_id="t",
            group_id=group,
            producer_id=1,
            producer_epoch=0,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                T(
                    name=topic,
                    partitions=[
                        P(
                            partition_index=partition,
                            committed_offset=5,
                            committed_leader_epoch=-1,
                            committed_metadata=None,
                        )
                    ],
                )
            ],
        )

    def code(r: Any) -> int:
        return int(r.topics[0].partitions[0].error_code)

    assert (
        code(await call(gw, ApiKey.TXN_OFFSET_COMMIT, version, request("", "orders", 0)))
        == E.INVALID_GROUP_ID
    )
    assert (
        code(await call(gw, ApiKey.TXN_OFFSET_COMMIT, version, request("g", "orders", 9)))
        == E.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        code(await call(gw, ApiKey.TXN_OFFSET_COMMIT, version, request("g", "orders", 0)))
        == E.NOT_COORDINATOR
    )


async def test_admin_apis_without_a_coordinator(gw: Gateway) -> None:
    r = await call(
        gw,
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        DescribeTransactionsRequest(transactional_ids=["t", ""]),
    )
    assert [(s.transactional_id, s.error_code) for s in r.transaction_states] == [
        ("t", E.NOT_COORDINATOR),
        ("", E.INVALID_REQUEST),
    ]
    for version in versions(ApiKey.LIST_TRANSACTIONS):
        r = await call(
            gw,
            ApiKey.LIST_TRANSACTIONS,
            version,
            ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1),
        )
        assert (r.error_code, r.transaction_states) == (E.NONE, [])


@pytest.mark.parametrize("version", [3, 9, 11])
async def test_transactional_batches_need_a_transactional_id(gw: Gateway, version: int) -> None:
    builder = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    builder.append(1, None, b"v")
    request = produce_request(builder.build())
    r = await call(gw, ApiKey.PRODUCE, version, request)
    assert (
        r.responses[0].partition_responses[0].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


async def test_write_txn_markers_answers_per_marker_and_partition(gw: Gateway) -> None:
    """Admin.abortTransaction's WriteTxnMarkers: one result per marker, in request order,
    with each partition the gateway cannot route refused before any storage call."""
    M = WriteTxnMarkersRequest.WritableTxnMarker
    T = M.WritableTxnMarkerTopic
    request = WriteTxnMarkersRequest(
        markers=[
            M(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=False,
                coordinator_epoch=0,
                topics=[T(name=name, partition_indexes=[index])],
            )
            for pid, name, index in ((7, "nowhere", 0), (8, "orders", 5))
        ]
    )
    answer = await call(gw, ApiKey.WRITE_TXN_MARKERS, 1, request)
    got = [
        (m.producer_id, t.name, p.partition_index, p.error_code)
        for m in answer.markers
        for t in m.topics
        for p in t.partitions
    ]
    assert got == [
        (7, "nowhere", 0, E.UNKNOWN_TOPIC_OR_PARTITION),
        (8, "orders", 5, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
