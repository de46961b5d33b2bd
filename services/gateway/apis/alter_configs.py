"""AlterConfigs (key 33), versions 0-2.

The legacy, non-incremental form: the configs given replace every override the
resource had (a config left out returns to its default), exactly as Kafka applies
it. TOPIC resources change topic overrides; BROKER ``""`` changes the cluster-wide
defaults that Kafka allows to change at run time. Forwarded to the controller
(:mod:`odradek.gateway.config_changes`), which validates names and values and
answers per resource with Kafka's codes and messages: INVALID_CONFIG for a bad
value, UNKNOWN_TOPIC_OR_PARTITION for an unknown topic, INVALID_REQUEST for a null
value. ``validate_only`` checks and changes nothing.

BROKER ``<id>`` changes that broker's own dynamic configs (DYNAMIC_BROKER_CONFIG; the
storage node applies them); as on a Kafka broker, a request on a broker's port may
only name that broker, and the controller answers BROKER_ID_NOT_REGISTERED for an id
that is no storage node.

Deviations: BROKER_LOGGER and other resource types are INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.gateway.config_changes import ResourceChange, alter, resource_responses
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import AlterConfigsRequest, AlterConfigsResponse
from odradek.rpc.v1 import controller_pb2

API_KEY = ApiKey.ALTER_CONFIGS

Response = AlterConfigsResponse.AlterConfigsResourceResponse


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    rows = [
        ResourceChange(
            resource.resource_type,
            resource.resource_name,
            [
                controller_pb2.ConfigChange(name=c.name, op=controller_pb2.SET, value=c.value)
                if c.value is not None
                else controller_pb2.ConfigChange(name=c.name, op=controller_pb2.SET)
                for c in resource.configs
            ],
        )
        for resource in request.resources
    ]
    await alter(
        gw,
        ctx,
        rows,
        incremental=False,
        validate_only=bool(request.validate_only),
        api_name="AlterConfigs",
    )
    return AlterConfigsResponse(throttle_time_ms=0, responses=resource_responses(rows, Response))
