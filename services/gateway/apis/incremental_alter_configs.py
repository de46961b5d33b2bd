"""IncrementalAlterConfigs (key 44), versions 0-1.

Each config names an operation: SET (0), DELETE (1, back to the default), APPEND
(2) and SUBTRACT (3) for list configs such as ``cleanup.policy``; configs not
named keep their value. TOPIC resources change topic overrides; BROKER ``""``
changes the cluster-wide defaults Kafka allows to change at run time. Forwarded to
the controller (:mod:`odradek.gateway.config_changes`), which answers per
resource with Kafka's codes and messages: INVALID_CONFIG for a bad value or an
APPEND/SUBTRACT on a non-list config, UNKNOWN_TOPIC_OR_PARTITION for an unknown
topic, INVALID_REQUEST for duplicate keys or a null value outside DELETE. An
operation id outside 0-3 is INVALID_REQUEST here. ``validate_only`` checks and
changes nothing.

BROKER ``<id>`` changes that broker's own dynamic configs (DYNAMIC_BROKER_CONFIG; the
storage node applies them); as on a Kafka broker, a request on a broker's port may
only name that broker, and the controller answers BROKER_ID_NOT_REGISTERED for an id
that is no storage node. ``listener.name.<l>.ssl.keystore.location`` and Kafka's other
reconfigurable TLS settings (KIP-226) are per broker only: the gateway checks the new
files make a usable context (INVALID_CONFIG otherwise) and every gateway's port for that
broker on listener ``<l>`` serves the new certificate to new connections
(:mod:`odradek.gateway.listener_certificates`).

Deviations: BROKER_LOGGER, GROUP and CLIENT_METRICS resources are INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.gateway.config_changes import ResourceChange, alter, resource_responses
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from odradek.rpc.v1 import controller_pb2

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS

Response = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

# Kafka's AlterConfigOp ids, which the controller's ConfigOp shares.
OPERATIONS = {
    0: controller_pb2.SET,
    1: controller_pb2.DELETE,
    2: controller_pb2.APPEND,
    3: controller_pb2.SUBTRACT,
}


def _row(resource: IncrementalAlterConfigsRequest.AlterConfigsResource) -> ResourceChange:
    row = ResourceChange(resource.resource_type, resource.resource_name)
    for c in resource.configs:
        op = OPERATIONS.get(c.config_operation)
        if op is None:
            row.fail(ErrorCode.INVALID_REQUEST, f"Unknown operation type {c.config_operation}")
            break
        change = controller_pb2.ConfigChange(name=c.name, op=op)
        if c.value is not None and op != controller_pb2.DELETE:
            change.value = c.value
        row.changes.append(change)
    return row


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse:
    rows = [_row(resource) for resource in request.resources]
    await alter(
        gw,
        ctx,
        rows,
        incremental=True,
        validate_only=bool(request.validate_only),
        api_name="IncrementalAlterConfigs",
    )
    return IncrementalAlterConfigsResponse(
        throttle_time_ms=0, responses=resource_responses(rows, Response)
    )
