"""Several listeners on the same gateways (issue 15): PLAINTEXT and SASL_SSL at once.

One cluster for the module, started as a user starts it: ``odradek up --security
sasl_ssl --listeners PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0`` with two gateways
and two storage nodes, so brokers are fronted by both gateways and every endpoint
crosses the controller (``Node.listeners``). The PLAINTEXT listener's clients are
``User:ANONYMOUS``; the test grants them the ``lst-`` topics and groups, as a Kafka
operator does for an internal listener. What each test proves:

- ``cluster.json`` names both listeners with their bootstrap servers; each gateway
  reports a bootstrap and a broker port per storage node for each listener;
- confluent-kafka produces on one listener and consumes on the other (both ways);
- Metadata and DescribeCluster on each listener name only that listener's ports
  (librdkafka's admin client on SASL_SSL, the wire on PLAINTEXT), FindCoordinator
  answers the coordinator's port on the listener asked;
- a consumer group over SASL_SSL (FindCoordinator, JoinGroup, ... on SASL_SSL ports);
- kafkajs over SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256, the Java client
  producing over SASL_SSL for confluent-kafka to read on PLAINTEXT;
- the SASL APIs are advertised on the SASL_SSL listener only;
- ``odradek`` tools run next to the data dir with ``--command-config
  data/client.properties`` find the SASL_SSL listener in ``cluster.json``.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_clients import ConfluentClient, JavaClient, KafkajsClient
from compat_model import ClientError, Rec
from compat_security import java_settings, librdkafka_settings
from compat_up import UpCluster, start_up, stop_up
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from helpers.wire import WireClient

from odradek.protocol.messages import (
    ApiVersionsRequest,
    FindCoordinatorRequest,
    MetadataRequest,
)

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
RECORDS = [Rec(f"k{i}".encode(), f"value-{i}".encode()) for i in range(5)]


@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("listeners") / "data",
        [
            "--security",
            "sasl_ssl",
            "--listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "--gateways",
            "2",
            "--storage-nodes",
            "2",
            "--no-console",
        ],
    )
    try:
        admin = AdminClient({"bootstrap.servers": sasl_bootstrap(cluster), **secure_conf(cluster)})
        # What User:ANONYMOUS (the PLAINTEXT listener) may do: the lst- topics and groups.
        bindings = [
            AclBinding(
                kind,
                "lst-",
                ResourcePatternType.PREFIXED,
                "User:ANONYMOUS",
                "*",
                AclOperation.ALL,
                AclPermissionType.ALLOW,
            )
            for kind in (ResourceType.TOPIC, ResourceType.GROUP)
        ]
        for f in admin.create_acls(bindings).values():
            f.result(30)
        yield cluster
    finally:
        stop_up(cluster)


def listeners(cluster: UpCluster) -> dict[str, str]:
    found: dict[str, str] = cluster.info()["listeners"]  # type: ignore[assignment]
    return found


def sasl_bootstrap(cluster: UpCluster) -> str:
    return listeners(cluster)["SASL_SSL"]


def secure_conf(cluster: UpCluster, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    return librdkafka_settings(cluster.data_dir, mechanism, "admin", cluster.admin_password)


def gateway_ports(cluster: UpCluster) -> list[dict[str, int]]:
    services: list[dict[str, Any]] = cluster.info()["services"]  # type: ignore[assignment]
    return [s["ports"] for s in services if s["kind"] == "gateway"]


def broker_ports(cluster: UpCluster, listener: str) -> set[int]:
    """Every gateway's broker ports of ``listener``, from cluster.json."""
    prefix = f"{listener.lower()}-broker-"
    return {p for ports in gateway_ports(cluster) for k, p in ports.items() if k.startswith(prefix)}


def topic() -> str:
    return f"lst-{uuid.uuid4().hex[:8]}"


def test_cluster_file_names_both_listeners(two_listeners: UpCluster) -> None:
    found = listeners(two_listeners)
    assert set(found) == {"PLAINTEXT", "SASL_SSL"}
    assert two_listeners.bootstrap == found["PLAINTEXT"]  # the first listener
    security: dict[str, str] = two_listeners.info()["security"]  # type: ignore[assignment]
    assert security["listener"] == f"SASL_SSL://{found['SASL_SSL']}"
    for ports in gateway_ports(two_listeners):
        assert ports["kafka"] == ports["kafka-plaintext"] != ports["kafka-sasl_ssl"]
        for storage_id in (100, 101):
            assert ports[f"plaintext-broker-{storage_id}"] != ports[f"sasl_ssl-broker-{storage_id}"]
    plain, secure = (
        broker_ports(two_listeners, "PLAINTEXT"),
        broker_ports(two_listeners, "SASL_SSL"),
    )
    assert len(plain) == len(secure) == 4 and not plain & secure


@pytest.mark.parametrize("direction", ["plaintext-to-sasl_ssl", "sasl_ssl-to-plaintext"])
def test_produce_on_one_listener_consume_on_the_other(
    two_listeners: UpCluster, direction: str
) -> None:
    plain = (ConfluentClient(two_listeners.bootstrap), {})
    secure = (ConfluentClient(sasl_bootstrap(two_listeners)), secure_conf(two_listeners))
    (producer, pconf), (consumer, cconf) = (
        (plain, secure) if direction.startswith("plaintext") else (secure, plain)
    )
    name = topic()
    produced = producer.produce(name, RECORDS, partition=0, config=pconf)
    assert len(produced) == len(RECORDS)
    # librdkafka looks up even an unused group's coordinator: one ANONYMOUS may describe.
    got = consumer.consume(
        name, [0], len(RECORDS), config={**cconf, "group.id": f"lst-unused-{uuid.uuid4().hex}"}
    )
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in RECORDS]


def test_metadata_on_sasl_ssl_names_only_sasl_ssl_ports(two_listeners: UpCluster) -> None:
    admin = AdminClient(
        {"bootstrap.servers": sasl_bootstrap(two_listeners), **secure_conf(two_listeners)}
    )
    md = admin.list_topics(timeout=30)
    ports = {b.port for b in md.brokers.values()}
    assert sorted(md.brokers) == [100, 101]
    assert ports <= broker_ports(two_listeners, "SASL_SSL"), ports
    described = admin.describe_cluster(request_timeout=30).result(30)
    assert {n.port for n in described.nodes} == ports
    # Both gateways front a broker (two storage nodes spread over two gateways).
    assert len(ports) == 2


def test_metadata_and_find_coordinator_on_plaintext(two_listeners: UpCluster) -> None:
    plain_ports = broker_ports(two_listeners, "PLAINTEXT")
    with WireClient(two_listeners.bootstrap) as wire:
        md = wire.request(METADATA, 9, MetadataRequest(topics=None))
        assert sorted(b.node_id for b in md.brokers) == [100, 101]
        assert {b.port for b in md.brokers} <= plain_ports
        found = wire.request(
            FIND_COORDINATOR, 3, FindCoordinatorRequest(key=f"lst-{uuid.uuid4().hex}", key_type=0)
        )
        assert found.error_code == 0, found
        assert found.port in plain_ports


def test_consumer_group_over_sasl_ssl(two_listeners: UpCluster) -> None:
    name = topic()
    ConfluentClient(two_listeners.bootstrap).produce(name, RECORDS, partition=0)
    consumer = Consumer(
        {
            "bootstrap.servers": sasl_bootstrap(two_listeners),
            **secure_conf(two_listeners),
            "group.id": f"lst-group-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([name])
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF
            if msg.error() is None:
                got.append(msg.value())
            if len(got) == len(RECORDS):
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == [r.value for r in RECORDS]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_kafkajs_over_sasl_ssl(
    two_listeners: UpCluster, mechanism: str, kafkajs_driver: Path
) -> None:
    security = {
        "security": {
            "mechanism": mechanism,
            "username": "admin",
            "password": two_listeners.admin_password,
            "ca": str(two_listeners.ca_file),
        }
    }
    client = KafkajsClient(sasl_bootstrap(two_listeners), kafkajs_driver)
    name = topic()
    produced = client.produce(name, RECORDS, partition=0, config=security)
    assert [r.offset for r in produced] == list(range(len(RECORDS)))
    # kafkajs consumes through a group: FindCoordinator and the group on SASL_SSL ports.
    got = client.consume(name, [0], len(RECORDS), config=security)
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in RECORDS]


def test_kafkajs_with_a_wrong_password_is_refused(
    two_listeners: UpCluster, kafkajs_driver: Path
) -> None:
    security = {
        "retries": 0,
        "security": {
            "mechanism": "SCRAM-SHA-512",
            "username": "admin",
            "password": "not-" + two_listeners.admin_password,
            "ca": str(two_listeners.ca_file),
        },
    }
    client = KafkajsClient(sasl_bootstrap(two_listeners), kafkajs_driver)
    with pytest.raises(ClientError) as caught:
        client.produce(topic(), RECORDS, partition=0, idempotent=False, config=security)
    assert "KafkaJSSASLAuthenticationError" in str(caught.value), caught.value


def test_sasl_apis_advertised_on_the_sasl_listener_only(two_listeners: UpCluster) -> None:
    with WireClient(two_listeners.bootstrap) as wire:
        plain = wire.request(
            API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
    keys = {k.api_key for k in plain.api_keys}
    assert SASL_HANDSHAKE not in keys and SASL_AUTHENTICATE not in keys
    from compat_security import TlsWire

    with TlsWire(sasl_bootstrap(two_listeners), two_listeners.ca_file) as wire:
        secure = wire.request(
            API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
    keys = {k.api_key for k in secure.api_keys}
    assert SASL_HANDSHAKE in keys and SASL_AUTHENTICATE in keys


def test_tools_pick_the_listener_of_their_command_config(two_listeners: UpCluster) -> None:
    name = topic()
    ConfluentClient(two_listeners.bootstrap).produce(name, RECORDS[:1], partition=0)
    # cwd holds data/cluster.json; no --bootstrap-server: the SASL_SSL listener's servers.
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "topics",
            "list",
            "--command-config",
            str(two_listeners.data_dir / "client.properties"),
        ],
        cwd=two_listeners.data_dir.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert name in listed.stdout.splitlines()


def test_java_client_over_sasl_ssl(
    two_listeners: UpCluster, request: pytest.FixtureRequest
) -> None:
    classpath = request.getfixturevalue("java_classpath")
    conf = java_settings(
        two_listeners.data_dir, "SCRAM-SHA-512", "admin", two_listeners.admin_password
    )
    name = topic()
    produced = JavaClient(sasl_bootstrap(two_listeners), classpath).produce(
        name, RECORDS, partition=0, config=conf
    )
    assert [r.offset for r in produced] == list(range(len(RECORDS)))
    got = ConfluentClient(two_listeners.bootstrap).consume(
        name, [0], len(RECORDS), config={"group.id": f"lst-unused-{uuid.uuid4().hex}"}
    )
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in RECORDS]
