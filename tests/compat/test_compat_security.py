"""Real clients against ``odradek up --security sasl_ssl`` (issue 15).

One cluster for the module, started as a user starts it. What each test proves:

- every client (confluent-kafka, kcat -F, kafka-python, aiokafka, the Java client)
  produces and consumes over SASL_SSL with SCRAM-SHA-512 and with PLAIN, using the
  super user's files ``odradek up`` wrote;
- a wrong password answers SASL_AUTHENTICATION_FAILED and the connection closes;
- requests before authentication, plaintext bytes on the TLS port and garbage or
  replayed SCRAM messages close only that connection;
- a client that never finishes authenticating is closed after
  ``authentication.timeout.ms``;
- the SASL APIs are advertised here (and not on a PLAINTEXT cluster, see
  test_sasl_apis_not_advertised_on_plaintext).
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_clients import (
    AiokafkaClient,
    ConfluentClient,
    JavaClient,
    KafkaPythonClient,
    KcatClient,
)
from compat_model import Rec
from compat_security import (
    TlsWire,
    aiokafka_settings,
    java_settings,
    kafka_python_settings,
    librdkafka_settings,
)
from compat_up import UpCluster, start_up, stop_up

from odradek.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from odradek.sasl.scram import ScramMechanism, client_proof, salted_password

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 58, 33
AUTH_TIMEOUT_MS = 1500


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("secure") / "data",
        [
            "--security",
            "sasl_ssl",
            "--no-console",
            "--set",
            f"authentication.timeout.ms={AUTH_TIMEOUT_MS}",
        ],
    )
    yield cluster
    stop_up(cluster)


def test_cluster_file_names_listener_and_files(secure: UpCluster) -> None:
    doc = json.loads((secure.data_dir / "cluster.json").read_text())
    sec = doc["security"]
    assert sec["listener"] == f"SASL_SSL://{secure.bootstrap}"
    assert Path(sec["ca_file"]) == secure.ca_file
    props = (secure.data_dir / "client.properties").read_text()
    assert "security.protocol=SASL_SSL" in props and "ssl.truststore.type=PEM" in props
    assert f'password="{secure.admin_password}"' in props
    rd = (secure.data_dir / "librdkafka.conf").read_text()
    assert "sasl.mechanisms=SCRAM-SHA-512" in rd and f"ssl.ca.location={secure.ca_file}" in rd


RECORDS = [Rec(f"k{i}".encode(), f"value-{i}".encode()) for i in range(5)]
MECHANISMS = ("SCRAM-SHA-512", "PLAIN")


def _roundtrip(client: object, topic: str, config: dict[str, object]) -> None:
    produced = client.produce(topic, RECORDS, partition=0, config=config)  # type: ignore[attr-defined]
    assert len(produced) == len(RECORDS)
    got = client.consume(topic, [0], len(RECORDS), config=config)  # type: ignore[attr-defined]
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in RECORDS]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(secure: UpCluster, mechanism: str) -> None:
    conf = librdkafka_settings(secure.data_dir, mechanism, "admin", secure.admin_password)
    _roundtrip(ConfluentClient(secure.bootstrap), f"sec-confluent-{uuid.uuid4().hex[:6]}", conf)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(secure: UpCluster, mechanism: str) -> None:
    conf = kafka_python_settings(secure.ca_file, mechanism, "admin", secure.admin_password)
    _roundtrip(KafkaPythonClient(secure.bootstrap), f"sec-kp-{uuid.uuid4().hex[:6]}", conf)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka(secure: UpCluster, mechanism: str) -> None:
    conf = aiokafka_settings(secure.ca_file, mechanism, "admin", secure.admin_password)
    _roundtrip(AiokafkaClient(secure.bootstrap), f"sec-aio-{uuid.uuid4().hex[:6]}", conf)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_java_client(secure: UpCluster, mechanism: str, request: pytest.FixtureRequest) -> None:
    classpath = request.getfixturevalue("java_classpath")
    conf = java_settings(secure.data_dir, mechanism, "admin", secure.admin_password)
    _roundtrip(JavaClient(secure.bootstrap, classpath), f"sec-java-{uuid.uuid4().hex[:6]}", conf)


def test_kcat_with_the_written_config_file(secure: UpCluster) -> None:
    """``kcat -F DATA/librdkafka.conf`` as the issue promises (kcat links librdkafka
    2.0.2, whose SCRAM client repeats its nonce; Kafka and Odradek accept that)."""
    kcat = KcatClient(secure.bootstrap)
    topic = f"sec-kcat-{uuid.uuid4().hex[:6]}"
    conf = str(secure.data_dir / "librdkafka.conf")
    kcat.run(["-F", conf, "-P", "-t", topic, "-p", "0"], stdin=b"one\ntwo\n")
    out = kcat.run(["-F", conf, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-c", "2"])
    assert out.split() == ["one", "two"]


def _handshake(wire: TlsWire, mechanism: str) -> None:
    answer = wire.request(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))
    assert answer.error_code == 0, answer
    assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}


def _plain(user: str, password: str) -> SaslAuthenticateRequest:
    return SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode())


def test_wrong_password_fails_then_closes(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        _handshake(wire, "PLAIN")
        answer = wire.request(SASL_AUTHENTICATE, 2, _plain("admin", "wrong"))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert "invalid credentials" in answer.error_message
        assert wire.closed_by_peer()
    finally:
        wire.close()


def test_right_password_authenticates_on_the_wire(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        versions = wire.request(
            API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
        keys = {k.api_key for k in versions.api_keys}
        assert {SASL_HANDSHAKE, SASL_AUTHENTICATE} <= keys
        _handshake(wire, "PLAIN")
        answer = wire.request(SASL_AUTHENTICATE, 2, _plain("admin", secure.admin_password))
        assert answer.error_code == 0
        md = wire.request(METADATA, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        assert md.brokers
    finally:
        wire.close()


def test_unsupported_mechanism(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        answer = wire.request(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
    finally:
        wire.close()


def test_request_before_authentication_closes(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
            wire.request(METADATA, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
    finally:
        wire.close()


def _scram_first(wire: TlsWire, user: str) -> tuple[str, str, bytes, int]:
    _handshake(wire, "SCRAM-SHA-512")
    first_bare = f"n={user},r=clientnonce123"
    answer = wire.request(
        SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=("n,," + first_bare).encode())
    )
    assert answer.error_code == 0, answer
    server_first = bytes(answer.auth_bytes).decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    import base64

    return first_bare, server_first, base64.b64decode(attrs["s"]), int(attrs["i"])


def test_scram_garbage_and_replay_are_refused(secure: UpCluster) -> None:
    import base64

    mech = ScramMechanism.SCRAM_SHA_512
    # A correct exchange, recorded.
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    first_bare, server_first, salt, iterations = _scram_first(wire, "admin")
    nonce = dict(p.split("=", 1) for p in server_first.split(","))["r"]
    salted = salted_password(mech, secure.admin_password, salt, iterations)
    without_proof = f"c=biws,r={nonce}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    final = f"{without_proof},p={base64.b64encode(client_proof(mech, salted, auth)).decode()}"
    ok = wire.request(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=final.encode()))
    assert ok.error_code == 0 and bytes(ok.auth_bytes).startswith(b"v=")
    wire.close()
    # Replaying that final message on a new exchange: the server nonce differs.
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    _scram_first(wire, "admin")
    replay = wire.request(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=final.encode()))
    assert replay.error_code == SASL_AUTHENTICATION_FAILED
    assert wire.closed_by_peer()
    wire.close()
    # Garbage as the first SCRAM message.
    wire = TlsWire(secure.bootstrap, secure.ca_file)
    _handshake(wire, "SCRAM-SHA-512")
    junk = wire.request(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\xff\x00,,x"))
    assert junk.error_code == SASL_AUTHENTICATION_FAILED
    assert wire.closed_by_peer()
    wire.close()


def test_unfinished_authentication_is_closed(secure: UpCluster) -> None:
    wire = TlsWire(secure.bootstrap, secure.ca_file, timeout=AUTH_TIMEOUT_MS / 1000 * 5)
    try:
        _handshake(wire, "SCRAM-SHA-512")
        start = time.monotonic()
        assert wire.closed_by_peer()
        assert time.monotonic() - start < AUTH_TIMEOUT_MS / 1000 * 4
    finally:
        wire.close()


def test_tls_handshake_never_started_is_closed(secure: UpCluster) -> None:
    host, port = secure.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=AUTH_TIMEOUT_MS / 1000 * 5) as s:
        start = time.monotonic()
        assert s.recv(1) == b""
        assert time.monotonic() - start < AUTH_TIMEOUT_MS / 1000 * 4


def test_plaintext_bytes_on_tls_port_do_not_harm_others(secure: UpCluster) -> None:
    good = TlsWire(secure.bootstrap, secure.ca_file)
    try:
        _handshake(good, "PLAIN")
        host, port = secure.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as bad:
            bad.sendall(
                b"\x00\x00\x00\x1c\x00\x12\x00\x03\x00\x00\x00\x01\x00\x04test" + b"\x00" * 14
            )
            # At most a TLS alert, then the connection is closed.
            closed = False
            try:
                for _ in range(10):
                    if bad.recv(1024) == b"":
                        closed = True
                        break
            except ConnectionError:
                closed = True
            assert closed
        answer = good.request(SASL_AUTHENTICATE, 2, _plain("admin", secure.admin_password))
        assert answer.error_code == 0
    finally:
        good.close()


def test_sasl_apis_not_advertised_on_plaintext(bootstrap: str) -> None:
    from helpers.wire import WireClient

    with WireClient(bootstrap) as wire:
        versions = wire.request(
            API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
    keys = {k.api_key for k in versions.api_keys}
    assert SASL_HANDSHAKE not in keys and SASL_AUTHENTICATE not in keys


def test_kcat_without_credentials_is_refused(secure: UpCluster) -> None:
    proc = subprocess.run(
        [
            "kcat",
            "-b",
            secure.bootstrap,
            "-X",
            "security.protocol=sasl_ssl",
            "-X",
            f"ssl.ca.location={secure.ca_file}",
            "-X",
            "sasl.mechanisms=SCRAM-SHA-256",
            "-X",
            "sasl.username=admin",
            "-X",
            "sasl.password=nope",
            "-L",
            "-m",
            "5",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert b"Authentication failed" in proc.stderr


# -- SSL with client certificates (odradek up --security ssl) ------------------------------
@pytest.fixture(scope="module")
def ssl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("ssl") / "data", ["--security", "ssl", "--no-console"]
    )
    yield cluster
    stop_up(cluster)


def _rd_ssl(up: UpCluster, cert: str) -> dict[str, str]:
    certs = up.data_dir / "certs"
    return {
        "security.protocol": "ssl",
        "ssl.ca.location": str(certs / "ca.crt"),
        "ssl.certificate.location": str(certs / f"{cert}.crt"),
        "ssl.key.location": str(certs / f"{cert}.key"),
    }


def test_ssl_client_certificate_is_the_principal(ssl_cluster: UpCluster) -> None:
    """The super user is ``User:CN=admin`` (its certificate); another certificate from
    the same CA authenticates as ``User:CN=bob`` and is refused by the authorizer."""
    from confluent_kafka import KafkaError, Producer

    from odradek.config import parse_properties

    rd = parse_properties((ssl_cluster.data_dir / "librdkafka.conf").read_text())
    assert rd["security.protocol"] == "ssl" and "ssl.certificate.location" in rd
    topic = f"ssl-{uuid.uuid4().hex[:6]}"
    _roundtrip(ConfluentClient(ssl_cluster.bootstrap), topic, dict(rd))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "certs",
            "--dir",
            str(ssl_cluster.data_dir / "certs"),
            "client",
            "bob",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    errors: list[KafkaError] = []
    p = Producer(
        {
            "bootstrap.servers": ssl_cluster.bootstrap,
            **_rd_ssl(ssl_cluster, "bob"),
            "message.timeout.ms": 8000,
            "enable.idempotence": False,
        }
    )
    p.produce(topic, b"x", partition=0, on_delivery=lambda err, _m: errors.append(err))
    p.flush(15)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_ssl_without_client_certificate_is_refused(ssl_cluster: UpCluster) -> None:
    host, port = ssl_cluster.bootstrap.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ssl_cluster.ca_file))
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(raw, server_hostname=host) as tls:
                # TLS 1.3: the refusal of a missing certificate arrives on first read.
                tls.sendall(b"\x00\x00\x00\x01\x00")
                if tls.recv(1) == b"":
                    raise ConnectionError("closed")
