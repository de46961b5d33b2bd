"""Listener certificates replaced without a restart (KIP-226; odradek.gateway.listener_certificates).

One SASL_SSL cluster for the module (``security="sasl_ssl"``, the gateway's PEM file
checked every 2 s). Each test reads the serial of the certificate a fresh TLS handshake
gets (no SNI, as the Java client connects to an IP address):

- a renewed PEM file (atomic replace, as a mounted secret changes) is served to new
  connections on the bootstrap port while a connection opened before keeps working;
- IncrementalAlterConfigs on ``BROKER 100`` setting
  ``listener.name.sasl_ssl.ssl.keystore.location`` is served on broker 100's port as
  soon as the request is answered (the bootstrap port keeps the static file);
  DescribeConfigs lists it as DYNAMIC_BROKER_CONFIG; altering to the same path after
  rewriting that file re-reads it; DELETE goes back to the static certificate;
- a location that gives no usable key is INVALID_CONFIG (Kafka's SslFactory message)
  and the old certificate keeps serving; the setting without the listener prefix is
  INVALID_CONFIG with Kafka's message (the cluster-default refusal, which
  confluent-kafka cannot send, is in tests/unit/controller/test_controller_broker_identity.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from cryptography import x509
from helpers.wire import WireClient, address

from odradek.certs import issue
from odradek.config import parse_properties
from odradek.protocol.messages import ApiVersionsRequest
from odradek.tools.launcher import Cluster

SETTING = "listener.name.sasl_ssl.ssl.keystore.location"
API_VERSIONS = 18


# One admin client per cluster, destroyed before the cluster stops (a handle left to the
# garbage collector keeps reconnecting to a stopped cluster).
_ADMINS: dict[int, AdminClient] = {}


@pytest.fixture(scope="module")
def secure(module_cluster_factory: Callable[..., Cluster]) -> Iterator[Cluster]:
    yield module_cluster_factory(
        security="sasl_ssl",
        console=False,
        settings={"ssl.keystore.check.interval.ms": "2000"},
    )
    _ADMINS.clear()


def certs_dir(cluster: Cluster) -> Path:
    return cluster.data_dir / "certs"


def serial_of(pem: Path) -> int:
    return x509.load_pem_x509_certificate(pem.read_bytes()).serial_number


def served_serial(port: int, ca: Path) -> int:
    """The serial of the certificate a new handshake on ``port`` gets (no SNI)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def eventually_serial(port: int, ca: Path, want: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while (seen := served_serial(port, ca)) != want:
        assert time.monotonic() < deadline, f"port {port} still serves {seen}, want {want}"
        time.sleep(0.2)


class TlsWire(WireClient):
    """A Kafka connection over TLS, for requests that need no SASL (ApiVersions)."""

    def __init__(self, bootstrap: str, ca: Path) -> None:
        self.ca = ca
        super().__init__(bootstrap, 10.0)

    def _open(self, bootstrap: str, timeout: float) -> socket.socket:
        host, port = address(bootstrap)
        ctx = ssl.create_default_context(cafile=str(self.ca))
        return ctx.wrap_socket(
            socket.create_connection((host, port), timeout=timeout), server_hostname=host
        )


def admin_client(cluster: Cluster) -> AdminClient:
    if id(cluster) not in _ADMINS:
        conf = parse_properties((cluster.data_dir / "librdkafka.conf").read_text())
        _ADMINS[id(cluster)] = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **conf})
    return _ADMINS[id(cluster)]


def alter(cluster: Cluster, broker: str, name: str, value: str | None) -> None:
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource(
        ResourceType.BROKER,
        broker,
        incremental_configs=[ConfigEntry(name, value or "", incremental_operation=op)],
    )
    (future,) = admin_client(cluster).incremental_alter_configs([resource]).values()
    future.result(30)


def alter_error(cluster: Cluster, broker: str, name: str, value: str) -> tuple[str, str]:
    with pytest.raises(KafkaException) as info:
        alter(cluster, broker, name, value)
    error = info.value.args[0]
    return error.name(), error.str()


def bootstrap_port(cluster: Cluster) -> int:
    return int(cluster.bootstrap_servers.rsplit(":", 1)[1])


def broker_port(cluster: Cluster, broker_id: int) -> int:
    """Where Metadata sends clients for ``broker_id`` (this gateway's port for it)."""
    return int(admin_client(cluster).list_topics(timeout=30).brokers[broker_id].port)


def test_renewed_file_is_served_to_new_connections(secure: Cluster) -> None:
    certs = certs_dir(secure)
    ca, static = certs / "ca.crt", certs / "gateway.pem"
    port = bootstrap_port(secure)
    assert served_serial(port, ca) == serial_of(static)
    with TlsWire(f"127.0.0.1:{port}", ca) as before:
        renewed = issue(certs, "gateway-renewed", hosts=("127.0.0.1", "localhost"))
        staged = certs / "gateway.pem.new"
        shutil.copy(renewed.pem, staged)
        os.replace(staged, static)  # what a mounted secret's update does
        eventually_serial(port, ca, serial_of(renewed.cert))
        answer = before.request(API_VERSIONS, 3, ApiVersionsRequest())
        assert answer.error_code == 0


def test_alter_configs_replaces_a_broker_ports_certificate(secure: Cluster) -> None:
    certs = certs_dir(secure)
    ca = certs / "ca.crt"
    port, bootstrap = broker_port(secure, 100), bootstrap_port(secure)
    static_serial = serial_of(certs / "gateway.pem")
    other = issue(certs, "gateway-100", hosts=("127.0.0.1", "localhost"))
    alter(secure, "100", SETTING, str(other.pem))
    # Served as soon as the request is answered, not at the next file check.
    assert served_serial(port, ca) == serial_of(other.cert)
    assert served_serial(bootstrap, ca) == static_serial
    resource = ConfigResource(ResourceType.BROKER, "100")
    (described,) = admin_client(secure).describe_configs([resource]).values()
    entry = described.result(30)[SETTING]
    assert entry.value == str(other.pem)
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    # The same path again re-reads the file (rewritten in place).
    again = issue(certs, "gateway-100-again", hosts=("127.0.0.1", "localhost"))
    other.pem.write_bytes(again.pem.read_bytes())
    alter(secure, "100", SETTING, str(other.pem))
    assert served_serial(port, ca) == serial_of(again.cert)

    alter(secure, "100", SETTING, None)
    assert served_serial(port, ca) == static_serial


def test_unusable_or_misplaced_settings_are_refused(secure: Cluster) -> None:
    certs = certs_dir(secure)
    ca = certs / "ca.crt"
    port = broker_port(secure, 100)
    before = served_serial(port, ca)
    code, message = alter_error(secure, "100", SETTING, str(certs / "missing.pem"))
    assert code == "INVALID_CONFIG"
    assert message.startswith("Validation of dynamic config update of SSLFactory failed")
    assert served_serial(port, ca) == before
    code, message = alter_error(secure, "100", "ssl.keystore.location", str(certs / "x.pem"))
    assert (code, message) == (
        "INVALID_CONFIG",
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)",
    )
