"""Raw Kafka frames over real sockets: what hostile-input tests and the fuzzer send, and
:class:`WireClient` for tests that pin exact API versions or fields no real client
lets them choose. Frames are encoded and decoded with Odradek's own codec (which wraps
kafka-python's schemas)."""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import FetchRequest, decode_response, encode_request
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


_correlation_ids = itertools.count(1)


class WireClient:
    """One connection, one request at a time (or one sent ahead with :meth:`send`)."""

    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        self.sock = self._open(bootstrap, timeout)
        self._pending: tuple[int, int, int] | None = None  # api key, version, correlation id

    def _open(self, bootstrap: str, timeout: float) -> socket.socket:
        return connect(bootstrap, timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any, version: int, api_key: int | None = None) -> None:
        """Send ``request`` (its own API key unless ``api_key`` names one)."""
        key = request.API_KEY if api_key is None else api_key
        cid = next(_correlation_ids)
        self._pending = (key, version, cid)
        self.sock.sendall(encode_request(key, version, cid, "wire-test", request))

    def receive(self) -> Any:
        """The response to the request last sent."""
        assert self._pending is not None, "nothing was sent"
        api_key, version, cid = self._pending
        frame = recv_frame(self.sock)
        got, offset = parse_response_header(frame, response_header_version(api_key, version))
        assert got == cid, f"correlation id {got} != {cid}"
        return decode_response(api_key, version, memoryview(frame)[offset:])

    def call(self, request: Any, version: int) -> Any:
        self.send(request, version)
        return self.receive()

    def request(self, api_key: int, version: int, message: Any) -> Any:
        """:meth:`call` with the API key given by number."""
        self.send(message, version, api_key)
        return self.receive()


def fetch_request(
    topic: str,
    partition: int,
    *,
    offset: int = 0,
    isolation: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
) -> Any:
    """A consumer's Fetch of one partition from ``offset`` (fields of every version up
    to 12; an encoder skips those a lower version lacks)."""
    T = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic=topic,
                partitions=[
                    T.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
