"""DescribeClientQuotas (key 48), versions 0-1: the configured client quotas.

Needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED for the whole
request otherwise, as KafkaApis answers). Served from this gateway's metadata (Kafka's
brokers answer from their metadata image too); the filter is Kafka's
``ClientQuotasImage.describe``: INVALID_REQUEST for a malformed filter,
UNSUPPORTED_VERSION for an unknown entity type (odradek.client_quotas).
"""

from __future__ import annotations

from odradek.client_quotas import DescribeError, describe
from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
Entry = DescribeClientQuotasResponse.EntryData


def _error(code: int, message: str | None) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=code, error_message=message, entries=None
    )


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse:
    if not gw.authorizer.cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        found = describe(
            gw.quotas.quotas(),
            [(c.entity_type, c.match_type, c.match) for c in request.components],
            bool(request.strict),
        )
    except DescribeError as exc:
        return _error(exc.code, exc.message)
    return DescribeClientQuotasResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        entries=[
            Entry(
                entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in e],
                values=[Entry.ValueData(key=k, value=v) for k, v in sorted(values.items())],
            )
            for e, values in found
        ],
    )
