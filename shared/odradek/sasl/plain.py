"""SASL PLAIN (RFC 4616): ``[authzid] NUL authcid NUL passwd``, as Kafka's
``PlainSaslServer`` parses it (an authorization id, if given, must equal the user)."""

from __future__ import annotations


class PlainError(Exception):
    """A malformed PLAIN message or a mismatched authorization id."""


def parse_plain(message: bytes) -> tuple[str, str]:
    """(username, password) of a PLAIN client message."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise PlainError("Invalid SASL/PLAIN response: not UTF-8") from None
    parts = text.split("\x00")
    if len(parts) != 3:
        raise PlainError("Invalid SASL/PLAIN response: expected 3 tokens")
    authzid, user, password = parts
    if not user:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    if authzid and authzid != user:
        raise PlainError(
            "Authentication failed: Client requested an authorization id that is different from username"
        )
    return user, password
