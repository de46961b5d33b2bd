"""DescribeTransactions (key 65), version 0 (KIP-664).

Each transactional id is asked of the transaction coordinator owning its shard
(:mod:`odradek.gateway.txn_routing`), one call per coordinator; the answer is
Kafka's TransactionState: state name (``Empty``, ``Ongoing``, ``PrepareCommit``, ...),
timeout, start time (-1 when no transaction is open), producer id and epoch, and
the partitions in the transaction. An unknown id is TRANSACTIONAL_ID_NOT_FOUND, an
empty one INVALID_REQUEST, as in Kafka's TransactionCoordinator. Ids whose owner is
unknown or unreachable get NOT_COORDINATOR, so admin clients look it up again.
"""

from __future__ import annotations

import asyncio

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from odradek.rpc.v1 import transactions_pb2

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS

State = DescribeTransactionsResponse.TransactionState
TopicData = State.TopicData


def _error(transactional_id: str, code: int) -> State:
    return State(
        error_code=code,
        transactional_id=transactional_id,
        transaction_state="",
        transaction_timeout_ms=0,
        transaction_start_time_ms=-1,
        producer_id=-1,
        producer_epoch=-1,
        topics=[],
    )


def _state(d: transactions_pb2.TransactionDescription) -> State:
    if d.error_code:
        return _error(d.transactional_id, d.error_code)
    return State(
        error_code=ErrorCode.NONE,
        transactional_id=d.transactional_id,
        transaction_state=d.transaction_state,
        transaction_timeout_ms=d.transaction_timeout_ms,
        transaction_start_time_ms=d.transaction_start_time_ms,
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        topics=[TopicData(topic=t.topic, partitions=list(t.partitions)) for t in d.topics],
    )


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse:
    txns = gw.transactions
    answers: dict[str, State] = {}
    by_owner: dict[int, list[str]] = {}
    for tid in request.transactional_ids:
        node = txns.coordinator_node(tid) if tid else None
        if not tid:
            answers[tid] = _error(tid, ErrorCode.INVALID_REQUEST)
        elif not gw.authorizer.allowed(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid
        ):
            answers[tid] = _error(tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif node is None:
            answers[tid] = _error(tid, ErrorCode.NOT_COORDINATOR)
        else:
            by_owner.setdefault(node.node_id, []).append(tid)

    async def ask(ids: list[str]) -> None:
        stub = txns.stub(ids[0])
        try:
            if stub is None:
                raise LookupError("coordinator moved")
            response = await stub.DescribeTransactions(
                transactions_pb2.DescribeTransactionsRequest(transactional_ids=ids),
                timeout=txns.timeout_s,
            )
        except (grpc.aio.AioRpcError, LookupError):
            for tid in ids:
                answers[tid] = _error(tid, ErrorCode.NOT_COORDINATOR)
            return
        for d in response.transactions:
            answers[d.transactional_id] = _state(d)

    await asyncio.gather(*(ask(ids) for ids in by_owner.values()))
    return DescribeTransactionsResponse(
        throttle_time_ms=0,
        transaction_states=[
            answers.get(tid) or _error(tid, ErrorCode.NOT_COORDINATOR)
            for tid in request.transactional_ids
        ],
    )
