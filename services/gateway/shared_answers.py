"""Answers many requests share, encoded once per API version.

The all-topics Metadata answer is the same for every client of a listener until the
metadata snapshot changes (no authorizer, no quotas, no authorized operations asked).
Encoding it cost about a millisecond of event-loop time on a small cluster; a client
pipelining all-topics Metadata requests without reading (issue 14's never-read client)
made the loop spend that over and over while every other client's request waited its
turn behind them. ``apis/metadata.py`` hands out one response object per snapshot and
broker set and marks it shared; the gateway frames a shared answer from the body
encoded here the first time each version asks.
"""

from __future__ import annotations

import struct
from typing import TypeVar

from odradek.protocol.headers import RequestHeader, encode_response_header
from odradek.protocol.messages import Message, encode_body
from odradek.protocol.versions import response_header_version

_SIZE = struct.Struct(">i")

# id(answer) -> (answer, {version: encoded body}). The entry holds the answer, so its
# id cannot be reused while it is here (kafka-python's messages are neither hashable
# nor weakly referable). Bounded: answers of old snapshots go when it is full.
_ENCODED: dict[int, tuple[Message, dict[int, bytes]]] = {}
_MAX_SHARED = 64
M = TypeVar("M", bound="Message")


def share(response: M) -> M:
    """Mark ``response`` as handed to many requests unchanged (never mutate it after)."""
    if id(response) not in _ENCODED:
        if len(_ENCODED) >= _MAX_SHARED:
            _ENCODED.clear()
        _ENCODED[id(response)] = (response, {})
    return response


def frame(header: RequestHeader, response: Message) -> bytes | None:
    """The whole response frame when ``response`` is shared, else None."""
    entry = _ENCODED.get(id(response))
    if entry is None or entry[0] is not response:
        return None
    bodies = entry[1]
    version = header.api_version
    body = bodies.get(version)
    if body is None:
        body = bodies[version] = encode_body(response, version)
    prefix = encode_response_header(
        header.correlation_id, response_header_version(header.api_key, version)
    )
    return _SIZE.pack(len(prefix) + len(body)) + prefix + body
