"""Client settings for a secured cluster, per real client, from what ``odradek up
--security`` writes (``DATA/client.properties``, ``DATA/librdkafka.conf``), and a
blocking wire client over TLS for what no real client lets a test do."""

from __future__ import annotations

import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from odradek.config import parse_properties
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.versions import response_header_version


def java_settings(data_dir: Path, mechanism: str, user: str, password: str) -> dict[str, str]:
    props = parse_properties((data_dir / "client.properties").read_text())
    module = (
        "org.apache.kafka.common.security.plain.PlainLoginModule"
        if mechanism == "PLAIN"
        else "org.apache.kafka.common.security.scram.ScramLoginModule"
    )
    props["sasl.mechanism"] = mechanism
    props["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    return props


def librdkafka_settings(data_dir: Path, mechanism: str, user: str, password: str) -> dict[str, str]:
    props = parse_properties((data_dir / "librdkafka.conf").read_text())
    props.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password})
    return props


def kafka_python_settings(ca: Path, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "ssl_cafile": str(ca),
    }


def aiokafka_settings(ca: Path, mechanism: str, user: str, password: str) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "ssl_context": create_ssl_context(cafile=str(ca)),
    }


class TlsWire:
    """One TLS connection speaking Kafka frames (requests built with Odradek's codec)."""

    def __init__(self, bootstrap: str, ca: Path, timeout: float = 10.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=str(ca))
        raw = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def _recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return out

    def request(self, api_key: int, version: int, message: Any) -> Any:
        self.correlation_id += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation_id, "sec", message))
        (size,) = struct.unpack(">i", self._recv_exact(4))
        frame = self._recv_exact(size)
        _, offset = parse_response_header(frame, response_header_version(api_key, version))
        return decode_response(api_key, version, frame[offset:])

    def closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (EOF or reset)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True
