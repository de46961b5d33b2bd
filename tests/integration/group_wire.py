"""A minimal Kafka wire client for the group tests: one request at a time over a
real socket, encoded and decoded with Odradek's protocol codec (which wraps
kafka-python's schemas), so tests can pin exact API versions."""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.versions import response_header_version

_ids = itertools.count(1)


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
        return bytes(buf)

    def send(self, request: Any, version: int) -> None:
        cid = next(_ids)
        self._pending = (request.API_KEY, version, cid)
        self.sock.sendall(encode_request(request.API_KEY, version, cid, "wire-test", request))

    def receive(self) -> Any:
        api_key, version, cid = self._pending
        (size,) = struct.unpack(">i", self._read(4))
        payload = self._read(size)
        got, pos = parse_response_header(payload, response_header_version(api_key, version))
        assert got == cid
        return decode_response(api_key, version, payload[pos:])

    def call(self, request: Any, version: int) -> Any:
        self.send(request, version)
        return self.receive()
