"""SaslAuthenticate (key 36), versions 0-2: one token of the SASL exchange.

A failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message and the
connection is closed after the response (Kafka closes it too).

KIP-368: with ``connections.max.reauth.ms`` set on the listener, a completed exchange
answers ``session_lifetime_ms`` (v1+) and the session ends after it; the client
re-authenticates with SaslHandshake + SaslAuthenticate on the same connection, keeping
its mechanism and principal (else SASL_AUTHENTICATION_FAILED and the connection
closes). A v0 client is not told and its connection closes when the session ends, as
Kafka does. Session lifetime is not capped by credential lifetime (SCRAM credentials
have none).
"""

from __future__ import annotations

import logging
import time

from prometheus_client import Counter

from odradek.gateway.authentication import AuthenticationFailed
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse

API_KEY = ApiKey.SASL_AUTHENTICATE
log = logging.getLogger(__name__)
# Kafka's successful-/failed-reauthentication-total (SocketServer's listener metrics)
REAUTHENTICATIONS = Counter(
    "odradek_gateway_reauthentications_total",
    "KIP-368 re-authentications on live connections, by result.",
    ["result"],
)


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse:
    session = ctx.sasl
    if (
        session is None
        or session.mechanism is None
        or (ctx.authenticated and session.previous is None)
    ):
        ctx.close_after_response = True
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="Unexpected SaslAuthenticate request",
            auth_bytes=b"",
        )
    gw.credentials.update(gw.metadata.current)
    try:
        answer = session.step(bytes(request.auth_bytes), gw.credentials)
    except AuthenticationFailed as exc:
        log.info("authentication of %s (%r) failed: %s", ctx.peer, session.user, exc)
        if session.previous is not None:
            REAUTHENTICATIONS.labels("failure").inc()
        ctx.close_after_response = True
        return SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
            error_message=f"Authentication failed during authentication due to invalid "
            f"credentials with SASL mechanism {session.mechanism}",
            auth_bytes=b"",
        )
    lifetime = 0
    if session.complete:
        ctx.principal = "User:" + session.user
        ctx.authenticated = True
        if ctx.reauth_ms > 0:
            ctx.session_expires_at = time.monotonic() + ctx.reauth_ms / 1000.0
            lifetime = ctx.reauth_ms
        if session.previous is not None:
            REAUTHENTICATIONS.labels("success").inc()
    return SaslAuthenticateResponse(
        error_code=0, error_message=None, auth_bytes=answer, session_lifetime_ms=lifetime
    )
