"""``max.connections.per.ip`` and ``max.connections`` on a real gateway: connections
over the limit are closed when accepted, the ones inside it keep working, and a
closed connection frees its place. Counted over the bootstrap and broker ports."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

from helpers.waiting import wait_until

from odradek.protocol.messages import ApiVersionsRequest, encode_request
from odradek.tools.launcher import Cluster

API_VERSIONS = 18


def _connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=10)


def _answers(sock: socket.socket) -> bool:
    """True if the gateway answers an ApiVersions request on ``sock``."""
    try:
        sock.sendall(encode_request(API_VERSIONS, 0, 1, "limits", ApiVersionsRequest()))
        head = sock.recv(4)
        if len(head) < 4:
            return False
        (size,) = struct.unpack(">i", head)
        return size > 0
    except OSError:
        return False


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except OSError:
        return True


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def test_max_connections_per_ip(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(
        settings={"max.connections.per.ip": "2"}, console=False, with_groups=False
    )
    gateway = cluster.service("gateway-0")
    bootstrap = _address(cluster.bootstrap_servers)
    broker_port = next(v for k, v in gateway.ports.items() if k.startswith("broker-"))
    first = _connect(bootstrap)
    second = _connect((bootstrap[0], broker_port))  # broker ports count too
    assert _answers(first) and _answers(second)
    third = _connect(bootstrap)
    assert _closed(third)
    assert _answers(first)  # the others are unharmed
    first.close()

    # The freed place is usable again (once the gateway has seen the close).
    def admitted() -> bool:
        s = _connect(bootstrap)
        ok = _answers(s)
        s.close()
        return ok

    wait_until(admitted, "a connection to be admitted after one closed", timeout=10)
    second.close()
    third.close()


def test_max_connections_total(cluster_factory: Callable[..., Cluster]) -> None:
    cluster = cluster_factory(settings={"max.connections": "1"}, console=False, with_groups=False)
    bootstrap = _address(cluster.bootstrap_servers)
    first = _connect(bootstrap)
    assert _answers(first)
    start = time.monotonic()
    second = _connect(bootstrap)
    assert _closed(second) and time.monotonic() - start < 5
    assert _answers(first)
    first.close()
    second.close()


def test_max_connection_creation_rate_spreads_new_connections(
    cluster_factory: Callable[..., Cluster],
) -> None:
    """KIP-612: over the rate, connections are accepted and answered, but only in turn
    (about 1/rate apart once a second's worth has gone), never closed."""
    cluster = cluster_factory(
        settings={"max.connection.creation.rate": "4"}, console=False, with_groups=False
    )
    bootstrap = _address(cluster.bootstrap_servers)
    time.sleep(1.1)  # pacing, not a wait: the cluster's own start-up connections age out
    start = time.monotonic()
    socks = [_connect(bootstrap) for _ in range(12)]
    answered = [_answers(s) for s in socks]  # in connection order
    elapsed = time.monotonic() - start
    for s in socks:
        s.close()
    assert all(answered), "a connection over the creation rate was refused"
    # 4 at once, then 8 more 0.25 s apart: about 2 s; without the limit well under 1 s.
    assert elapsed >= 1.6, f"12 connections answered in {elapsed:.2f} s at 4 per second"
