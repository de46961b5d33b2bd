"""The first bytes of every data link connection over a Unix socket (sans-io).

A gateway takes the Unix socket a storage node registered only once the process behind
the path proves it is that node: containers on one host can share a boot id but not a
filesystem, and a path left behind by a stopped node may be bound by another process.
The node writes this hello as soon as it accepts a connection; the gateway compares it
with the node id and the per-start token in the metadata (common.proto ``DataSocket``)
and otherwise closes the socket and uses TCP (docs/data-link.md, "Same host").

Layout::

    BYTES[8]  magic     b"ODKUNIX1"
    INT32     node_id   big-endian
    BYTES[16] token     random per start of the node
"""

from __future__ import annotations

import secrets
import struct

MAGIC = b"ODKUNIX1"
TOKEN_BYTES = 16
_HELLO = struct.Struct(f">8si{TOKEN_BYTES}s")
HELLO_SIZE = _HELLO.size


def new_token() -> bytes:
    """A node's token for one start: registered with the controller, sent in each hello."""
    return secrets.token_bytes(TOKEN_BYTES)


def encode_hello(node_id: int, token: bytes) -> bytes:
    if len(token) != TOKEN_BYTES:
        raise ValueError(f"a data link token has {TOKEN_BYTES} bytes, not {len(token)}")
    return _HELLO.pack(MAGIC, node_id, token)


def hello_mismatch(data: bytes, node_id: int, token: bytes) -> str | None:
    """Why ``data`` is not the hello of node ``node_id`` started with ``token``; None
    when it is."""
    if len(data) != HELLO_SIZE:
        return f"a hello of {len(data)} bytes, expected {HELLO_SIZE}"
    magic, got_id, got_token = _HELLO.unpack(data)
    if magic != MAGIC:
        return "not a data link socket"
    if got_id != node_id:
        return f"the socket is storage node {got_id}'s, not {node_id}'s"
    if not secrets.compare_digest(got_token, token):
        return f"the socket belongs to another start of storage node {node_id}"
    return None
