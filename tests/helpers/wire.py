"""Raw Kafka frames over real sockets: what hostile-input tests and the fuzzer send."""

from __future__ import annotations

import socket
import struct

from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.versions import response_header_version
from odradek.tools.launcher import Cluster


def address(cluster: Cluster | str) -> tuple[str, int]:
    """The first bootstrap server of ``cluster`` (or of a bootstrap list)."""
    bootstrap = cluster if isinstance(cluster, str) else cluster.bootstrap_servers
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def connect(cluster: Cluster | str, timeout: float = 10) -> socket.socket:
    s = socket.create_connection(address(cluster), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def recv_frame(s: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, size)


def closed(s: socket.socket, timeout: float = 5.0) -> bool:
    """True once the peer closed or reset the connection within ``timeout``."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def call(s: socket.socket, api_key: int, version: int, request: object, cid: int = 1) -> object:
    """Send one request and decode its response."""
    s.sendall(encode_request(api_key, version, cid, "wire", request))
    frame = recv_frame(s)
    got, offset = parse_response_header(frame, response_header_version(api_key, version))
    assert got == cid
    return decode_response(api_key, version, memoryview(frame)[offset:])
