"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no ``transactional_id``) get a fresh producer id with epoch 0,
taken from controller-issued blocks (:mod:`odradek.gateway.producer_ids`), so
no id is ever handed out twice, across gateways or restarts. As in Kafka, a
producer id and epoch sent by a non-transactional producer (v3+, KIP-360) are
ignored and a new id is handed out. When no block can be had in time the answer is
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.

Transactions do not exist yet (docs/compatibility.md C20), so a transactional id gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53). The choice: InitProducerId has no
error message field, and the code must make clients stop instead of retrying
forever. Retriable codes (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS) would make them retry until their timeouts expire;
this one is treated as fatal for the transactional producer by the Java client,
librdkafka and kafka-python alike, and surfaces at once as
"TransactionalIdAuthorizationException" from ``initTransactions()``, naming the
transactional id as what is refused. An empty transactional id is INVALID_REQUEST,
as in Kafka. ``transaction_timeout_ms`` is not used.
"""

from __future__ import annotations

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.producer_ids import WAIT_FOR_BLOCK_S, ProducerIdsUnavailable
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import InitProducerIdRequest, InitProducerIdResponse

API_KEY = ApiKey.INIT_PRODUCER_ID


def _answer(code: int, producer_id: int = -1, epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=epoch
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    transactional_id = request.transactional_id
    if transactional_id is not None:
        if transactional_id == "":
            return _answer(ErrorCode.INVALID_REQUEST)
        return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    try:
        producer_id = await gw.producer_ids.next_id(WAIT_FOR_BLOCK_S)
    except ProducerIdsUnavailable:
        return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return _answer(ErrorCode.NONE, producer_id, 0)
