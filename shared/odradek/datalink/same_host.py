"""The caller's choice between a storage node's Unix socket and its TCP data link
(docs/data-link.md, "Same host").

A node that registered a Unix socket (common.proto ``DataSocket``) on this caller's host
is tried there first; the connection is used only when the hello proves it is that
start of that node (:func:`odradek.datalink.unix_socket.open_unix`). Anything else —
another host, a path that does not exist in this filesystem, another user's socket, a
hello of another node or another start — leaves the call to TCP (with TLS when
configured), exactly as without the socket. A refusal is remembered for that start of
the node for a while, so a node that is not ours does not cost every reconnect a try.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from prometheus_client import Counter

from odradek.datalink.unix_socket import UnixLinkError, host_id, open_unix
from odradek.rpc.v1 import common_pb2

log = logging.getLogger(__name__)

# How many data link connections this process opened, by transport: "unix" for the
# socket of a node on this host, "tcp" otherwise (tests and operators see which path
# Produce and Fetch take).
DATA_LINK_CONNECTIONS = Counter(
    "odradek_data_link_connections",
    "Data link connections opened to storage nodes, by transport (unix or tcp).",
    ["transport"],
)
TCP_CONNECTIONS = DATA_LINK_CONNECTIONS.labels("tcp")
UNIX_CONNECTIONS = DATA_LINK_CONNECTIONS.labels("unix")

# A refused socket is tried again after this long (the node may have been restarted
# under another user, or a transient failure such as a timeout on a loaded host).
RETRY_AFTER_S = 60.0

P = TypeVar("P", bound=asyncio.BaseProtocol)


class SameHostLinks:
    """Opens the Unix socket of a node on this host when it proves to be that node."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host_id() if host is None else host
        # node id -> (token of the refused start, when to try again)
        self._refused: dict[int, tuple[bytes, float]] = {}

    def candidate(self, node_id: int, data_socket: common_pb2.DataSocket | None) -> bool:
        """Whether the node's socket is worth a try: registered, on this host, not
        refused lately."""
        if data_socket is None or not data_socket.path or data_socket.host_id != self.host:
            return False
        refused = self._refused.get(node_id)
        return refused is None or refused[0] != data_socket.token or time.monotonic() >= refused[1]

    def refuse(self, node_id: int, data_socket: common_pb2.DataSocket | None) -> None:
        """Do not try this start of the node's socket for a while: it opened, but does
        not serve what the caller needs (a leader of an older version refusing a replica
        fetch under internal TLS)."""
        if data_socket is not None:
            self._refused[node_id] = (bytes(data_socket.token), time.monotonic() + RETRY_AFTER_S)

    async def open(
        self,
        node_id: int,
        data_socket: common_pb2.DataSocket | None,
        protocol_factory: Callable[[], P],
    ) -> P | None:
        """A connection over the node's Unix socket, or None: the caller uses TCP."""
        if data_socket is None or not self.candidate(node_id, data_socket):
            return None
        path, token = data_socket.path, bytes(data_socket.token)
        try:
            conn = await open_unix(path, node_id, token, protocol_factory)
        except UnixLinkError as exc:
            self._refused[node_id] = (token, time.monotonic() + RETRY_AFTER_S)
            log.info(
                "data link to storage node %d over TCP: its Unix socket %s: %s", node_id, path, exc
            )
            return None
        self._refused.pop(node_id, None)
        UNIX_CONNECTIONS.inc()
        log.info("data link to storage node %d over its Unix socket %s", node_id, path)
        return conn
