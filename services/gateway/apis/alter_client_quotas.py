"""AlterClientQuotas (key 49), versions 0-1: set or remove client quotas.

Needs ALTER_CONFIGS on the cluster (every entry CLUSTER_AUTHORIZATION_FAILED
otherwise, as Kafka's ControllerApis answers). The controller validates and stores
(Kafka's ``ClientQuotaControlManager``, odradek.client_quotas): INVALID_REQUEST for
an unknown entity type or quota key, a value <= 0, a fraction for a byte rate, an
entity or key named twice; ``validate_only`` changes nothing. One result per
distinct entity. After a change the answer waits (bounded) until this gateway's
metadata holds it, so the client's next request here is measured against it.
"""

from __future__ import annotations

from odradek.client_quota_proto import entity_from_proto, entity_to_proto
from odradek.client_quotas import Entity, entity
from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import (
    AdminDeadline,
    ControllerFailure,
    call_controller,
    wait_visible,
)
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import AlterClientQuotasRequest, AlterClientQuotasResponse
from odradek.rpc.v1 import controller_pb2

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
Entry = AlterClientQuotasResponse.EntryData


def _entry(e: Entity, code: int, message: str | None) -> AlterClientQuotasResponse.EntryData:
    return Entry(
        error_code=code,
        error_message=message or None,
        entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in e],
    )


def _shows(gw: GatewayApi, wanted: list[tuple[Entity, str, float | None]]) -> bool:
    """Whether this gateway's metadata holds every value just set or removed."""
    quotas = gw.quotas.quotas()
    return all(quotas.get(e, {}).get(key) == value for e, key, value in wanted)


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse:
    entities = [entity((p.entity_type, p.entity_name) for p in e.entity) for e in request.entries]
    if not gw.authorizer.cluster(ctx, AclOperation.ALTER_CONFIGS):
        return AlterClientQuotasResponse(
            throttle_time_ms=0,
            entries=[
                _entry(e, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
                for e in dict.fromkeys(entities)
            ],
        )
    rpc = controller_pb2.AlterClientQuotasRequest(
        entries=[
            controller_pb2.ClientQuotaAlteration(
                entity=entity_to_proto(e),
                ops=[
                    controller_pb2.QuotaOp(key=op.key, value=op.value, remove=op.remove)
                    for op in entry.ops
                ],
            )
            for e, entry in zip(entities, request.entries, strict=True)
        ],
        validate_only=bool(request.validate_only),
    )
    deadline = AdminDeadline(gw, gw.request_timeout_ms)
    answer = await call_controller(gw, lambda st: st.AlterClientQuotas, rpc, deadline)
    if not isinstance(answer, ControllerFailure) and not request.validate_only:
        ok = {entity_from_proto(r.entity) for r in answer.results if r.error_code == 0}
        wanted = [
            (e, op.key, None if op.remove else op.value)
            for e, entry in zip(entities, request.entries, strict=True)
            if e in ok
            for op in entry.ops
        ]
        if wanted:
            await wait_visible(gw, lambda _: _shows(gw, wanted), deadline.remaining())
    if isinstance(answer, ControllerFailure):
        return AlterClientQuotasResponse(
            throttle_time_ms=0,
            entries=[_entry(e, answer.error_code, answer.message) for e in dict.fromkeys(entities)],
        )
    return AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            _entry(entity_from_proto(r.entity), r.error_code, r.error_message)
            for r in answer.results
        ],
    )
