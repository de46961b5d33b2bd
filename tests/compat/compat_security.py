"""Client settings for a secured cluster, per real client, from what ``odradek up
--security`` writes (``DATA/client.properties``, ``DATA/librdkafka.conf``), and a
blocking wire client over TLS for what no real client lets a test do."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from helpers.wire import WireClient, address

from odradek.config import parse_properties


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


class TlsWire(WireClient):
    """One TLS connection speaking Kafka frames (requests built with Odradek's codec)."""

    def __init__(self, bootstrap: str, ca: Path, timeout: float = 10.0) -> None:
        self.ca = ca
        super().__init__(bootstrap, timeout)

    def _open(self, bootstrap: str, timeout: float) -> socket.socket:
        host, port = address(bootstrap)
        ctx = ssl.create_default_context(cafile=str(self.ca))
        return ctx.wrap_socket(
            socket.create_connection((host, port), timeout=timeout), server_hostname=host
        )

    def closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (EOF or reset)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True


def add_scram_user(admin: AdminClient, user: str, password: str) -> None:
    """Create (or update) ``user`` with a SCRAM-SHA-256 credential through the admin API."""
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
    )
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
