"""`odradek up --security sasl_ssl` (internal mutual TLS) with the gateway and the
storage node on one host: produce and consume end to end over SASL_SSL while the
gateway's data link to the node is the node's Unix socket, not TCP with TLS
(docs/data-link.md, "Same host"); the gateway's ``odradek_data_link_connections_total``
says which transport it opened."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer

from odradek.config import parse_properties
from odradek.tools.launcher import Cluster

STORAGE_ID = 100


@pytest.fixture(scope="module")
def secure(module_cluster_factory: Callable[..., Cluster]) -> Cluster:
    return module_cluster_factory(security="sasl_ssl", console=False)


def _connections(cluster: Cluster, service: str) -> dict[str, float]:
    port = cluster.service(service).ports["metrics"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("odradek_data_link_connections_total{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('transport="')[1].split('"')[0]] = float(value)
    return out


def test_sasl_ssl_round_trip_over_the_unix_socket(secure: Cluster) -> None:
    conf = {
        "bootstrap.servers": secure.bootstrap_servers,
        **parse_properties((secure.data_dir / "librdkafka.conf").read_text()),
    }
    topic = f"unix-{uuid.uuid4().hex[:8]}"
    producer = Producer({**conf, "acks": "all"})
    for i in range(50):
        producer.produce(topic, f"v{i}".encode() * 100)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 50 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() * 100 for i in range(50))
    counts = _connections(secure, "gateway-0")
    assert counts.get("unix", 0) >= 1 and counts.get("tcp", 0) == 0, counts
    gateway_log = secure.service("gateway-0").log_file.read_text(errors="replace")
    assert f"data link to storage node {STORAGE_ID} over its Unix socket" in gateway_log
    storage_log = secure.service(f"storage-{STORAGE_ID}").log_file.read_text(errors="replace")
    assert "also on the Unix socket" in storage_log
    assert "refused" not in storage_log
