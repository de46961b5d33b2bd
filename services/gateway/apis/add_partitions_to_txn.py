"""AddPartitionsToTxn (key 24), versions 0-5.

v0-v3 come from transactional producers: one transaction, whose partitions the
transaction coordinator owning the id's shard adds (:mod:`odradek.gateway.txn_routing`)
after persisting the new partition set. v4+ come from brokers (KIP-890): several
transactions per request, each possibly ``verify_only`` (is the partition already in
the transaction? nothing is added); each is forwarded to its own coordinator and the
answers are gathered by transactional id.

As Kafka's KafkaApis does before asking the coordinator: a partition unknown to the
metadata is UNKNOWN_TOPIC_OR_PARTITION, and clients (v0-v3) may not add internal
topics (TOPIC_AUTHORIZATION_FAILED; offsets join through AddOffsetsToTxn); when any
partition of a transaction fails these checks the others get OPERATION_NOT_ATTEMPTED
and the coordinator is not asked. An empty transactional id is INVALID_REQUEST. A
coordinator that is unknown or unreachable gives every partition NOT_COORDINATOR.
Versions below 2 get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED, versions below 5
INVALID_TXN_STATE for TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.txn_routing import for_version
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from odradek.rpc.v1 import transactions_pb2

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
TopicPartition = tuple[str, int]


@dataclass
class _Txn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    partitions: list[TopicPartition]


class _Topic(Protocol):
    """A request topic: the v0-v3 and v4+ classes differ only in where they hang."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> list[int]: ...


def _transactions(version: int, request: AddPartitionsToTxnRequest) -> list[_Txn]:
    def partitions(topics: Iterable[_Topic]) -> list[TopicPartition]:
        seen: dict[TopicPartition, None] = {}  # request order, duplicates once
        for t in topics:
            for p in t.partitions:
                seen[(t.name, p)] = None
        return list(seen)

    if version < 4:
        return [
            _Txn(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                False,
                partitions(request.v3_and_below_topics),
            )
        ]
    return [
        _Txn(
            t.transactional_id,
            t.producer_id,
            t.producer_epoch,
            t.verify_only,
            partitions(t.topics),
        )
        for t in request.transactions
    ]


def _precheck(gw: GatewayApi, version: int, txn: _Txn) -> dict[TopicPartition, int] | None:
    """Per-partition errors when the coordinator must not be asked, else None."""
    if not txn.transactional_id:
        return {tp: ErrorCode.INVALID_REQUEST for tp in txn.partitions}
    snap = gw.metadata.current
    errors: dict[TopicPartition, int] = {}
    for topic, partition in txn.partitions:
        if version < 4 and topic in INTERNAL_TOPICS:
            errors[(topic, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif snap.partition(topic, partition) is None:
            errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not errors:
        return None
    return {tp: errors.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in txn.partitions}


async def _forward(
    gw: GatewayApi, ctx: ConnectionContext, version: int, txn: _Txn
) -> dict[TopicPartition, int]:
    # KafkaApis.handleAddPartitionsToTxnRequest: WRITE on the transactional id, then on
    # each topic; partitions not refused themselves are OPERATION_NOT_ATTEMPTED.
    authz = gw.authorizer
    if not authz.allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn.transactional_id
    ):
        return dict.fromkeys(txn.partitions, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    denied = authz.denied(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (t for t, _ in txn.partitions)
    )
    if denied:
        return {
            tp: int(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if tp[0] in denied
                else ErrorCode.OPERATION_NOT_ATTEMPTED
            )
            for tp in txn.partitions
        }
    early = _precheck(gw, version, txn)
    if early is not None:
        return early
    by_topic: dict[str, list[int]] = {}
    for topic, partition in txn.partitions:
        by_topic.setdefault(topic, []).append(partition)
    answer = await gw.transactions.call(
        txn.transactional_id,
        lambda s: s.AddPartitionsToTxn,
        transactions_pb2.AddPartitionsToTxnRequest(
            transactions=[
                transactions_pb2.AddPartitionsTransaction(
                    transactional_id=txn.transactional_id,
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    verify_only=txn.verify_only,
                    topics=[
                        transactions_pb2.TxnTopicPartitions(topic=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        ),
    )
    if isinstance(answer, int):
        return {tp: answer for tp in txn.partitions}
    default = answer.error_code
    found: dict[TopicPartition, int] = {}
    for result in answer.results:
        if result.transactional_id != txn.transactional_id:
            continue
        default = result.error_code or default
        for p in result.partitions:
            found[(p.topic, p.partition)] = p.error_code
    return {
        tp: for_version(found.get(tp, default), version, fenced_since=2, abortable_since=5)
        for tp in txn.partitions
    }


def _by_topic(errors: dict[TopicPartition, int]) -> dict[str, list[tuple[int, int]]]:
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append((partition, code))
    return by_topic


def _v3_results(errors: dict[TopicPartition, int]) -> list[TopicResult]:
    return [
        TopicResult(
            name=t,
            results_by_partition=[
                TopicResult.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=code
                )
                for p, code in parts
            ],
        )
        for t, parts in _by_topic(errors).items()
    ]


def _v4_result(transactional_id: str, errors: dict[TopicPartition, int]) -> Result:
    return Result(
        transactional_id=transactional_id,
        topic_results=[
            Result.AddPartitionsToTxnTopicResult(
                name=t,
                results_by_partition=[
                    Result.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=code
                    )
                    for p, code in parts
                ],
            )
            for t, parts in _by_topic(errors).items()
        ],
    )


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse:
    version = header.api_version
    txns = _transactions(version, request)
    answers = await asyncio.gather(*(_forward(gw, ctx, version, t) for t in txns))
    if version < 4:
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, results_by_topic_v3_and_below=_v3_results(answers[0])
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        results_by_transaction=[
            _v4_result(t.transactional_id, errors) for t, errors in zip(txns, answers, strict=True)
        ],
    )
