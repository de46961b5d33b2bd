"""FindCoordinator (key 10), versions 0-6.

Key type 0 (GROUP): answers the broker leading the group's ``__consumer_offsets``
partition, as Kafka does, at the gateway endpoint it is advertised at
(:mod:`odradek.gateway.brokers`); gateways forward the group's requests to the
coordinator service owning the shard whatever port they arrive on.
COORDINATOR_NOT_AVAILABLE while ``__consumer_offsets`` does not exist yet or that
partition has no leader, the shard has no live coordinator, or no offset store is
online; clients retry. Key type 1 (TRANSACTION) is answered the same way for the
transactional id's ``__transaction_state`` partition (:mod:`odradek.gateway.txn_routing`):
COORDINATOR_NOT_AVAILABLE while that topic does not exist, the partition has no
leader or the shard has no online transaction coordinator. v4+ batch several keys
with an error per key (docs/compatibility.md C18). Deviation: share groups are not
supported; key type 2 (SHARE, v6) answers
INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.coordinator_routing import CoordinatorRouting
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

API_KEY = ApiKey.FIND_COORDINATOR

GROUP = 0
TRANSACTION = 1


def _answer(
    gw: GatewayApi, ctx: ConnectionContext, key: str, key_type: int
) -> tuple[int, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
    if key_type == TRANSACTION:
        router: CoordinatorRouting = gw.transactions
        resource, refused = (
            ResourceType.TRANSACTIONAL_ID,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        )
    elif key_type == GROUP:
        router = gw.groups
        resource, refused = ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        return ErrorCode.INVALID_REQUEST, f"key type {key_type} is not supported", -1, "", -1
    # KafkaApis.handleFindCoordinatorRequest: DESCRIBE on the group or transactional id.
    if not gw.authorizer.allowed(ctx, AclOperation.DESCRIBE, resource, key):
        return refused, None, -1, "", -1
    broker = router.coordinator_broker(key, ctx.listener) if router.available(key) else None
    if broker is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    return ErrorCode.NONE, None, broker.node_id, broker.host, broker.port


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    version = header.api_version
    key_type = request.key_type if version >= 1 else GROUP
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node_id, host, port = _answer(gw, ctx, key, key_type)
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=message,
                )
            )
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    error, message, node_id, host, port = _answer(gw, ctx, request.key, key_type)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )
