"""AddOffsetsToTxn (key 25), versions 0-4.

Forwarded to the transaction coordinator owning the transactional id's shard
(:mod:`odradek.gateway.txn_routing`), which adds the group's ``__consumer_offsets``
partition (``abs(java hash(group id)) % 50``) to the transaction, so the commit or
abort marker reaches the offsets that TxnOffsetCommit then writes there. An empty
transactional id is INVALID_REQUEST; NOT_COORDINATOR when the owner is unknown or
unreachable. Versions below 2 get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED,
versions below 4 INVALID_TXN_STATE for TRANSACTION_ABORTABLE (Kafka's KafkaApis).
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.txn_routing import for_version, refusal
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from odradek.rpc.v1 import transactions_pb2

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    refused = refusal(gw.authorizer, ctx, request.transactional_id)
    if refused is not None:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=refused)
    if not gw.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    code = await gw.transactions.error_of(
        request.transactional_id,
        lambda s: s.AddOffsetsToTxn,
        transactions_pb2.AddOffsetsToTxnRequest(
            transactional_id=request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            group_id=request.group_id,
        ),
    )
    return AddOffsetsToTxnResponse(
        throttle_time_ms=0,
        error_code=for_version(code, header.api_version, fenced_since=2, abortable_since=4),
    )
