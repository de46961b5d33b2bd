"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no ``transactional_id``) get a fresh producer id with epoch 0,
taken from controller-issued blocks (:mod:`odradek.producer_id_blocks`), so
no id is ever handed out twice, across gateways or restarts. As in Kafka, a
producer id and epoch sent by a non-transactional producer (v3+, KIP-360) are
ignored and a new id is handed out. When no block can be had in time the answer is
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.

Transactional producers are forwarded to the transaction coordinator owning the
id's ``__transaction_state`` shard (:mod:`odradek.gateway.txn_routing`), which bumps
the epoch (fencing zombies), aborts or completes what the id left open and answers
CONCURRENT_TRANSACTIONS while a previous transaction is still being completed. An
empty transactional id is INVALID_REQUEST; a producer id without an epoch (or the
reverse, v3+) is INVALID_REQUEST, both as in Kafka's KafkaApis. NOT_COORDINATOR when
the owner is unknown or unreachable, so the client looks it up again. Versions
below 4 get INVALID_PRODUCER_EPOCH where Kafka would answer PRODUCER_FENCED.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.txn_routing import for_version, refusal
from odradek.producer_id_blocks import WAIT_FOR_BLOCK_S, ProducerIdsUnavailable
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from odradek.rpc.v1 import transactions_pb2

API_KEY = ApiKey.INIT_PRODUCER_ID


def _answer(code: int, producer_id: int = -1, epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=epoch
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    version = header.api_version
    transactional_id = request.transactional_id
    producer_id, epoch = (request.producer_id, request.producer_epoch) if version >= 3 else (-1, -1)
    if (producer_id < 0) != (epoch < 0):
        return _answer(ErrorCode.INVALID_REQUEST)
    if transactional_id is not None:
        refused = refusal(gw.authorizer, ctx, transactional_id)
        if refused is not None:
            return _answer(refused)
        answer = await gw.transactions.call(
            transactional_id,
            lambda s: s.InitProducerId,
            transactions_pb2.TxnInitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout_ms=request.transaction_timeout_ms,
                producer_id=producer_id,
                producer_epoch=epoch,
            ),
        )
        if isinstance(answer, int):
            return _answer(answer)
        code = for_version(answer.error_code, version, fenced_since=4, abortable_since=5)
        if code:
            return _answer(code)
        return _answer(ErrorCode.NONE, answer.producer_id, answer.producer_epoch)
    # Idempotent producers: IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
    if not gw.authorizer.cluster(ctx, AclOperation.IDEMPOTENT_WRITE) and not any(
        gw.authorizer.allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
        for name in gw.metadata.current.topics
    ):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        new_id = await gw.producer_ids.next_id(WAIT_FOR_BLOCK_S)
    except ProducerIdsUnavailable:
        return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return _answer(ErrorCode.NONE, new_id, 0)
