"""ApiVersions (key 18), versions 0-4.

The first request of every client. The header of the response is always v0 and
default-valued tagged fields are never written (docs/compatibility.md C1 and C22); an
unknown request version is answered by the dispatcher before decoding (docs/compatibility.md C2). We
list only APIs that have a handler in this gateway (docs/compatibility.md C4).
Deviation: no SupportedFeatures/FinalizedFeatures (no KRaft feature levels).
"""

from __future__ import annotations

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import api_versions_response
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import ApiVersionsRequest, ApiVersionsResponse

API_KEY = ApiKey.API_VERSIONS


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    if header.api_version >= 3:
        ctx.client_software = getattr(request, "client_software_name", "") or ""
        ctx.client_software_version = getattr(request, "client_software_version", "") or ""
    return api_versions_response(supported=gw.versions_for(ctx))
