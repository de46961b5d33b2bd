"""DescribeCluster (key 60), versions 0-1.

Brokers are the live storage nodes at the gateway endpoints that front them, and
the controller id is the lowest of them, exactly as in Metadata
(:mod:`odradek.gateway.brokers`); the cluster id is the controller's. Admin requests
may go to any broker: every gateway forwards them to the controller. Authorized operations are reported (everything allowed: there is no
authorizer yet) only when asked, else Kafka's "not requested" value.

v1 carries ``endpoint_type``: these are broker endpoints (1). A request for controller
endpoints (2) is MISMATCHED_ENDPOINT_TYPE and an unknown type
UNSUPPORTED_ENDPOINT_TYPE, with Kafka's messages (INVALID_REQUEST in v0, which has
neither code).
"""

from __future__ import annotations

from odradek.acl import CLUSTER_NAME
from odradek.gateway.authorizer import ResourceType
from odradek.gateway.brokers import controller_id
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    authorized_operations,
)

API_KEY = ApiKey.DESCRIBE_CLUSTER

Broker = DescribeClusterResponse.DescribeClusterBroker

# Kafka's EndpointType ids.
ENDPOINT_TYPES = {1: "BROKER", 2: "CONTROLLER"}
BROKER_ENDPOINT = 1

# AclOperation ids the cluster resource supports: CREATE, ALTER, DESCRIBE,
# CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.


def _endpoint_error(version: int, requested: int) -> tuple[int, str] | None:
    if requested == BROKER_ENDPOINT:
        return None
    name = ENDPOINT_TYPES.get(requested)
    if name is None:
        code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {requested}"
    else:
        code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = (
            f"The request was sent to an endpoint of type BROKER, "
            f"but we wanted an endpoint of type {name}"
        )
    return int(code if version >= 1 else ErrorCode.INVALID_REQUEST), message


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    version = header.api_version
    snap = gw.metadata.current
    requested = getattr(request, "endpoint_type", BROKER_ENDPOINT) if version >= 1 else 1
    problem = _endpoint_error(version, requested)
    if problem is not None:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=problem[0],
            error_message=problem[1],
            endpoint_type=BROKER_ENDPOINT,
            cluster_id=snap.cluster_id,
            controller_id=-1,
            brokers=[],
            authorized_operations=authorized_operations(None),
        )
    brokers = gw.brokers(ctx.listener)
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=snap.cluster_id,
        controller_id=controller_id(brokers),
        brokers=[
            Broker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in brokers.values()
        ],
        authorized_operations=authorized_operations(
            gw.authorizer.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if request.include_cluster_authorized_operations
            else None
        ),
    )
