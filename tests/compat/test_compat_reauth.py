"""KIP-368 re-authentication on a SASL_SSL cluster with ``connections.max.reauth.ms``.

A session lasts that long: SaslAuthenticate v1+ says so (``session_lifetime_ms``),
a connection whose session ended is closed on its next request, and a client that
re-authenticates in time (librdkafka does, since 2.2) keeps one connection for hours.
A re-authentication may not change the principal or the mechanism.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from compat_security import TlsWire, librdkafka_settings
from compat_up import UpCluster, start_up, stop_up

from odradek.protocol.messages import MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest

METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 3, 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33
REAUTH_MS = 1500


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("reauth") / "data",
        [
            "--security",
            "sasl_ssl",
            "--no-console",
            "--set",
            f"connections.max.reauth.ms={REAUTH_MS}",
        ],
    )
    yield cluster
    stop_up(cluster)


def _plain(wire: TlsWire, user: str, password: str, version: int = 2) -> Any:
    shake = wire.request(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert shake.error_code == 0, shake
    return wire.request(
        SASL_AUTHENTICATE,
        version,
        SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()),
    )


def _metadata(wire: TlsWire) -> Any:
    return wire.request(METADATA, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))


def test_session_lifetime_is_told_and_an_ended_session_closes(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        answer = _plain(wire, "admin", secure.admin_password)
        assert answer.error_code == 0 and answer.session_lifetime_ms == REAUTH_MS
        assert _metadata(wire).brokers  # inside the session
        time.sleep(REAUTH_MS / 1000 + 0.4)  # the scenario: let the session end
        with pytest.raises((ConnectionError, OSError)):
            _metadata(wire)
    finally:
        wire.close()


def test_reauthentication_extends_the_session(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        assert _plain(wire, "admin", secure.admin_password).error_code == 0
        time.sleep(REAUTH_MS / 1000 * 0.6)
        again = _plain(wire, "admin", secure.admin_password)
        assert again.error_code == 0 and again.session_lifetime_ms == REAUTH_MS
        time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session's end
        assert _metadata(wire).brokers
    finally:
        wire.close()


def test_reauthentication_cannot_change_mechanism_or_principal(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        assert _plain(wire, "admin", secure.admin_password).error_code == 0
        shake = wire.request(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert shake.error_code == UNSUPPORTED_SASL_MECHANISM
    finally:
        wire.close()
    common = ["--bootstrap-server", secure.bootstrap]
    common += ["--command-config", str(secure.data_dir / "client.properties")]
    user = ["--user", "dave", "--password", "dave-pw", "--mechanism", "SCRAM-SHA-512"]
    added = subprocess.run(
        [sys.executable, "-m", "odradek", "users", "add", *common, *user],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        assert _plain(wire, "admin", secure.admin_password).error_code == 0
        deadline = time.monotonic() + 30  # dave's credential reaches the gateway
        while True:
            answer = _plain(wire, "dave", "dave-pw")
            if answer.error_code == SASL_AUTHENTICATION_FAILED or time.monotonic() > deadline:
                break
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert wire.closed_by_peer()
    finally:
        wire.close()


def test_librdkafka_reauthenticates_and_keeps_its_connections(secure: UpCluster) -> None:
    """Four sessions long, one producer: every record delivered, no connection lost."""
    stats: list[dict[str, Any]] = []
    conf: dict[str, Any] = {
        "bootstrap.servers": secure.bootstrap,
        **librdkafka_settings(secure.data_dir, "SCRAM-SHA-512", "admin", secure.admin_password),
        "statistics.interval.ms": 200,
        "stats_cb": lambda doc: stats.append(json.loads(doc)),
    }
    producer = confluent_kafka.Producer(conf)
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    failed: list[Any] = []
    end = time.monotonic() + 4 * REAUTH_MS / 1000
    sent = 0
    while time.monotonic() < end:
        producer.produce(
            topic, b"%d" % sent, on_delivery=lambda err, _m: err and failed.append(err)
        )
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0 and not failed, failed[:3]
    producer.poll(0.5)
    assert sent > 20
    disconnects = {
        name: b["disconnects"]
        for name, b in stats[-1]["brokers"].items()
        if b["nodeid"] >= 0 and b["state"] == "UP"
    }
    assert disconnects and not any(disconnects.values()), disconnects
    assert _reauthentications(secure, "success") >= 2, "librdkafka never re-authenticated"


def _reauthentications(up: UpCluster, result: str) -> float:
    """The gateway's odradek_gateway_reauthentications_total{result=...}."""
    doc = json.loads((up.data_dir / "cluster.json").read_text())
    (gateway,) = [s for s in doc["services"] if s["kind"] == "gateway"]
    url = f"http://127.0.0.1:{gateway['ports']['metrics']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    for line in text.splitlines():
        if line.startswith(f'odradek_gateway_reauthentications_total{{result="{result}"}}'):
            return float(line.split()[-1])
    return 0.0
