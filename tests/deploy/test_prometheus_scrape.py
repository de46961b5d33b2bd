"""A real Prometheus server scrapes a real local cluster; its HTTP API sees the traffic.

The cluster is started the way ``odradek up`` starts it; Prometheus (Debian's
``prometheus``, installed by .ci/run) gets a config written from ``cluster.json`` by
deploy/scripts/prometheus_targets.py with a one-second scrape interval. A real Kafka
client produces and consumes; the test then asks Prometheus — not the services — for
request counts, so the whole path (exposition, scrape, storage, query) is exercised.
``promtool check metrics`` lints every service's ``/metrics``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deploy_tools import load_script
from helpers.waiting import wait_until

from odradek.process import terminate
from odradek.tools.launcher import Cluster

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="Debian's prometheus is not installed (apt-get install prometheus; .ci/run does)",
)

MESSAGES = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""  # not listening (yet)


def _wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Prometheus scrapes once a second: poll its API at half that."""
    return wait_until(check, what, timeout=timeout, interval=0.5)


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        status, body = _http_get(f"{self.url}/api/v1/{path}?{query}")
        assert status == 200, f"{path}: HTTP {status}: {body[:500]!r}"
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return doc["data"]

    def value(self, expr: str) -> float:
        """The single value of an instant query (0 when the result is empty)."""
        result = self.api("query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else 0.0

    def series(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])


@dataclass
class Setup:
    cluster: Cluster
    prometheus: Prometheus
    topic: str
    group: str


def _round_trip(bootstrap: str, topic: str, group: str) -> None:
    """Produce MESSAGES records and read them back with kafka-python."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    try:
        for i in range(MESSAGES):
            producer.send(topic, key=b"k%d" % i, value=b"value-%d" % i)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        # Read only part of the topic, so committed < end: lag > 0.
        want = MESSAGES // 2
        while len(seen) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=want - len(seen)).values():
                seen.extend(r.value for r in records)
        assert len(seen) >= want, f"consumed {len(seen)} of {want}"
        assert seen[0] == b"value-0"
        consumer.commit({TopicPartition(topic, 0): _offset_and_metadata(want)})
    finally:
        consumer.close()


def _offset_and_metadata(offset: int) -> Any:
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:  # older kafka-python: (offset, metadata)
        return OffsetAndMetadata(offset, "")  # type: ignore[call-arg]


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory, module_cluster_factory: Callable[..., Cluster]
) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("scrape")
    cluster = module_cluster_factory()
    proc: subprocess.Popen[bytes] | None = None
    try:
        targets = load_script("prometheus_targets")
        config_file = tmp / "prometheus.yml"
        targets.write_config(
            cluster.data_dir, config_file, scrape_interval="1s", scrape_timeout="1s"
        )
        port = _free_port()
        log = tmp / "prometheus.log"
        assert PROMETHEUS is not None
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={tmp / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--web.console.templates=/nonexistent",
                    "--web.console.libraries=/nonexistent",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        prom = Prometheus(f"http://127.0.0.1:{port}", proc, log)
        _wait_until(
            "Prometheus to be ready",
            lambda: (
                proc is not None
                and proc.poll() is None
                and _http_get(f"{prom.url}/-/ready", 1.0)[0] == 200
            ),
            timeout=30,
        )
        topic = f"scrape-{uuid.uuid4().hex[:8]}"
        group = f"scrape-group-{uuid.uuid4().hex[:8]}"
        _round_trip(cluster.bootstrap_servers, topic, group)
        yield Setup(cluster, prom, topic, group)
    finally:
        if proc is not None:
            terminate(proc, 10)


def _service_metrics_ports(cluster: Cluster) -> dict[str, int]:
    return {s.spec.name: s.ports["metrics"] for s in cluster.services if "metrics" in s.ports}


def test_every_service_is_a_healthy_target(setup: Setup) -> None:
    expected = set(_service_metrics_ports(setup.cluster))
    assert {"controller", "gateway-0", "storage-100", "coordinator-200", "offsets-300"} <= expected

    def all_up() -> set[str] | None:
        active = setup.prometheus.api("targets", state="active")["activeTargets"]
        up = {t["labels"]["service"] for t in active if t["health"] == "up"}
        return up if up == expected else None

    _wait_until("every service to be scraped", all_up)
    kinds = {r["metric"]["job"] for r in setup.prometheus.series("up == 1")}
    assert {"controller", "storage", "gateway", "coordinator", "offsets"} <= kinds


def test_request_counts_reach_prometheus(setup: Setup) -> None:
    prom = setup.prometheus
    produced = _wait_until(
        "Produce requests in Prometheus",
        lambda: prom.value('sum(odradek_gateway_requests_total{request="Produce"})'),
    )
    fetched = _wait_until(
        "Fetch requests in Prometheus",
        lambda: prom.value('sum(odradek_gateway_requests_total{request="Fetch"})'),
    )
    assert produced >= 1 and fetched >= 1
    topic = setup.topic
    bytes_in = _wait_until(
        "bytes in for the topic",
        lambda: prom.value(f'sum(odradek_gateway_bytes_in_total{{topic="{topic}"}})'),
    )
    assert bytes_in >= MESSAGES * len(b"value-0")
    assert _wait_until(
        "bytes out for the topic",
        lambda: prom.value(f'sum(odradek_gateway_bytes_out_total{{topic="{topic}"}})'),
    )
    # The latency histogram has observations for the APIs the client used.
    apis = _wait_until(
        "request latency observations",
        lambda: (
            {
                s["metric"]["request"]
                for s in prom.series("sum by (request) (odradek_gateway_request_seconds_count) > 0")
            }
            >= {"Produce", "Fetch", "Metadata"}
            and {
                s["metric"]["request"]
                for s in prom.series("sum by (request) (odradek_gateway_request_seconds_count) > 0")
            }
        ),
    )
    assert {"ApiVersions", "Produce", "Fetch", "Metadata"} <= apis
    # Internal gRPC calls (gateway -> storage, everyone -> controller) are counted too.
    assert _wait_until(
        "internal gRPC calls",
        lambda: prom.value('sum(odradek_grpc_server_handled_total{grpc_code="OK"})'),
    )
    # The storage node's per-partition gauges reflect the produced records.
    end = _wait_until(
        "the partition's log end offset",
        lambda: (
            prom.value(f'max(odradek_log_end_offset{{topic="{topic}"}})') >= MESSAGES
            and prom.value(f'max(odradek_log_end_offset{{topic="{topic}"}})')
        ),
    )
    assert end == MESSAGES
    assert prom.value("max(odradek_controller_active)") == 1


def test_consumer_lag_reaches_prometheus(setup: Setup) -> None:
    group, topic = setup.group, setup.topic
    lag = _wait_until(
        "consumer lag for the group",
        lambda: setup.prometheus.value(
            f'sum(kafka_consumergroup_lag{{consumergroup="{group}", topic="{topic}"}})'
        ),
    )
    assert lag == MESSAGES - MESSAGES // 2


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian prometheus) is not installed")
def test_promtool_check_metrics_is_clean_on_every_service(setup: Setup) -> None:
    assert PROMTOOL is not None
    ports = _service_metrics_ports(setup.cluster)
    problems = {}
    for name, port in sorted(ports.items()):
        status, body = _http_get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200, name
        assert body, f"{name}: empty /metrics"
        result = subprocess.run(
            [PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=30
        )
        output = (result.stdout + result.stderr).decode(errors="replace").strip()
        if result.returncode != 0 or output:
            problems[name] = output or f"exit {result.returncode}"
    assert not problems, json.dumps(problems, indent=2)


def test_health_endpoints_answer_on_every_service(setup: Setup) -> None:
    for name, port in _service_metrics_ports(setup.cluster).items():
        assert _http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200, name
        assert _http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, name
