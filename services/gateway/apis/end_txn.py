"""EndTxn (key 26), versions 0-4.

Forwarded to the transaction coordinator owning the transactional id's shard
(:mod:`odradek.gateway.txn_routing`). It answers once PrepareCommit/PrepareAbort is
durable in ``__transaction_state`` and writes the markers afterwards, as Kafka does;
until they are all written the id's next request gets CONCURRENT_TRANSACTIONS.
Bad input gets Kafka's codes from the coordinator: a commit with no transaction open
INVALID_TXN_STATE, a stale epoch PRODUCER_FENCED, an unknown producer id
INVALID_PRODUCER_ID_MAPPING. An empty transactional id is INVALID_REQUEST;
NOT_COORDINATOR when the owner is unknown or unreachable. Versions below 2 get
INVALID_PRODUCER_EPOCH for PRODUCER_FENCED, versions below 4 INVALID_TXN_STATE for
TRANSACTION_ABORTABLE. Deviations: an abort with no transaction open (Empty or
CompleteCommit) succeeds, where Kafka answers INVALID_TXN_STATE, fatal to a librdkafka
producer that aborts while its AddPartitionsToTxn awaits a retry (librdkafka #4849);
v5 (KIP-890 part 2, an epoch bump per
transaction) is not served.
"""

from __future__ import annotations

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.txn_routing import for_version, refusal
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import EndTxnRequest, EndTxnResponse
from odradek.rpc.v1 import transactions_pb2

API_KEY = ApiKey.END_TXN


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: EndTxnRequest
) -> EndTxnResponse:
    refused = refusal(gw.authorizer, ctx, request.transactional_id)
    if refused is not None:
        return EndTxnResponse(throttle_time_ms=0, error_code=refused)
    code = await gw.transactions.error_of(
        request.transactional_id,
        lambda s: s.EndTxn,
        transactions_pb2.EndTxnRequest(
            transactional_id=request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            committed=request.committed,
        ),
    )
    return EndTxnResponse(
        throttle_time_ms=0,
        error_code=for_version(code, header.api_version, fenced_since=2, abortable_since=4),
    )
