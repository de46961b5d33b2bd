"""ListTransactions (key 66), versions 0-1 (KIP-664; v1 adds the duration filter, KIP-994).

Every online transaction coordinator is asked with the request's filters (states by
Kafka's names, producer ids, and from v1 transactions running longer than
``duration_filter`` ms); the answers are merged. Admin clients ask every broker and
merge what they hear, so a broker port lists only the transactional ids whose
coordinator is that broker (what FindCoordinator answers,
:mod:`odradek.gateway.txn_routing`), as ListGroups does for groups; the bootstrap
listener lists them all. A coordinator
still loading a shard answers COORDINATOR_LOAD_IN_PROGRESS (clients retry); one that
cannot be reached makes the answer COORDINATOR_NOT_AVAILABLE. Unknown state filters
come back in ``unknown_state_filters``. Deviation: v2's transactional id pattern
(KIP-1152) is not served.
"""

from __future__ import annotations

import asyncio

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.txn_routing import Stub as TxnStub
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from odradek.rpc.v1 import transactions_pb2

API_KEY = ApiKey.LIST_TRANSACTIONS

State = ListTransactionsResponse.TransactionState


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    txns = gw.transactions
    call = transactions_pb2.ListTransactionsRequest(
        state_filters=list(request.state_filters or []),
        producer_id_filters=list(request.producer_id_filters or []),
        duration_filter_ms=request.duration_filter if header.api_version >= 1 else -1,
    )

    async def ask(
        stub: TxnStub,
    ) -> transactions_pb2.ListTransactionsResponse:
        try:
            response: transactions_pb2.ListTransactionsResponse = await stub.ListTransactions(
                call, timeout=txns.timeout_s
            )
            return response
        except grpc.aio.AioRpcError:
            return transactions_pb2.ListTransactionsResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE
            )

    answers = await asyncio.gather(*(ask(s) for s in txns.all_coordinators()))
    error = next((a.error_code for a in answers if a.error_code), ErrorCode.NONE)
    unknown = sorted({f for a in answers for f in a.unknown_state_filters})
    if error:
        return ListTransactionsResponse(
            throttle_time_ms=0,
            error_code=error,
            unknown_state_filters=unknown,
            transaction_states=[],
        )
    listed: dict[str, State] = {}
    for a in answers:
        for t in a.transactions:
            # KafkaApis.handleListTransactionsRequest: only ids the principal may DESCRIBE.
            if txns.listed_on(t.transactional_id, ctx.broker_id) and gw.authorizer.allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id
            ):
                listed[t.transactional_id] = State(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.transaction_state,
                )
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        unknown_state_filters=unknown,
        transaction_states=[listed[k] for k in sorted(listed)],
    )
