"""What the broker does with a request it cannot parse: answer it, or close the
connection. One function, so every listener behaves the same.

Apache Kafka's behaviour, which we follow (``SocketServer.processCompletedReceives``
closes the channel on any exception from ``RequestHeader.parse`` or
``RequestContext.parseRequest``; the latter wraps every parse failure in
``InvalidRequestException``):

==========================================  =========================================
input                                       Kafka broker
==========================================  =========================================
size prefix > socket.request.max.bytes      close (InvalidReceiveException)
negative size prefix                        close
header too short / unknown API key          close ("Unknown API key" /
                                            "Error parsing request header")
ApiVersions at a version it does not know   answer: ApiVersions v0 body, error
                                            UNSUPPORTED_VERSION (35) plus the
                                            supported ranges (KIP-511); the body is
                                            not parsed at all
any other API at an unsupported version,    close (the body parse fails, wrapped in
or an API this broker does not serve        InvalidRequestException)
malformed body (short, trailing bytes,      close (InvalidRequestException)
null in a non-nullable field, ...)
==========================================  =========================================

Closing is also safe for clients: a dropped connection is a network error they
recover from by reconnecting, whereas a guessed answer they cannot parse could
fail their request for good.
"""

from __future__ import annotations

from enum import Enum

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import build_api_versions_response
from odradek.protocol.exceptions import UnsupportedVersionError


class Action(Enum):
    CLOSE = "close"
    RESPOND_ERROR = "respond_error"


def classify(exc: BaseException) -> Action:
    """Close for everything except an ApiVersions request at an unknown version,
    which gets :func:`error_response`. Non-protocol exceptions close too: a broker
    that cannot tell what it received must not guess an answer."""
    if (
        isinstance(exc, UnsupportedVersionError)
        and exc.api_key == ApiKey.API_VERSIONS
        and exc.correlation_id is not None
    ):
        return Action.RESPOND_ERROR
    return Action.CLOSE


def error_response(exc: BaseException) -> bytes | None:
    """The framed answer for an exception :func:`classify` says to answer, or None
    when the connection should be closed instead."""
    if classify(exc) is not Action.RESPOND_ERROR:
        return None
    assert isinstance(exc, UnsupportedVersionError) and exc.correlation_id is not None
    return build_api_versions_response(exc.version, exc.correlation_id)
