"""The Grafana dashboard is current, parses as PromQL, and queries metrics that exist.

Metric names are read from the code itself (every prometheus_client Counter, Gauge,
Histogram and collector family under shared/ and services/), with the suffixes the
client exposes (``_total`` for counters; ``_bucket``/``_sum``/``_count`` for
histograms), so a renamed metric breaks this test rather than a panel in production.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_tools import DEPLOY, ROOT, load_script

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "odradek.json"
_DEFINITION = re.compile(
    r"\b(Counter|Gauge|Histogram|Summary|Info|CounterMetricFamily|GaugeMetricFamily|"
    r"HistogramMetricFamily)\(\s*\"([a-zA-Z_:][a-zA-Z0-9_:]*)\"",
)
_NAME = re.compile(r"\b((?:odradek|kafka)_[a-z0-9_]+)\b")


def exported_names() -> set[str]:
    names: set[str] = set()
    for base in (ROOT / "shared" / "odradek", ROOT / "services"):
        for path in base.rglob("*.py"):
            if "rpc/v1" in path.as_posix():
                continue
            for kind, name in _DEFINITION.findall(path.read_text(errors="replace")):
                if kind in ("Counter", "CounterMetricFamily"):
                    stem = name.removesuffix("_total")
                    names |= {f"{stem}_total", f"{stem}_created"}
                elif kind in ("Histogram", "HistogramMetricFamily"):
                    names |= {name, f"{name}_bucket", f"{name}_sum", f"{name}_count"}
                else:
                    names.add(name)
    return names


def panels() -> list[dict[str, Any]]:
    doc = json.loads(DASHBOARD.read_text())
    return [p for p in doc["panels"] if p["type"] != "row"]


def expressions() -> list[str]:
    return [t["expr"] for p in panels() for t in p.get("targets", [])]


def used_names() -> set[str]:
    return {n for e in expressions() for n in _NAME.findall(e)}


def test_dashboard_matches_its_generator() -> None:
    generator = load_script("grafana_dashboard")
    assert generator.main(["--check"]) == 0, "run python deploy/scripts/grafana_dashboard.py"


def test_dashboard_covers_health_throughput_latency_and_lag() -> None:
    doc = json.loads(DASHBOARD.read_text())
    rows = [p["title"] for p in doc["panels"] if p["type"] == "row"]
    assert rows == [
        "Cluster health",
        "Throughput",
        "Latency",
        "Storage",
        "Consumer groups",
        "Transactions",
        "Mirror",
    ]
    names = used_names()
    for needed in (
        "odradek_controller_nodes",
        "odradek_controller_offline_partitions",
        "odradek_controller_under_replicated_partitions",
        "odradek_gateway_bytes_in_total",
        "odradek_gateway_bytes_out_total",
        "odradek_gateway_requests_total",
        "odradek_gateway_request_seconds_bucket",
        "odradek_grpc_server_handling_seconds_bucket",
        "kafka_consumergroup_lag",
        "odradek_mirror_lag_records",
        "odradek_mirror_replication_latency_seconds_bucket",
    ):
        assert needed in names, needed
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels():
        pos = p["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, p["title"]
        assert p["datasource"]["uid"] == "${datasource}"


def test_every_queried_metric_is_exported() -> None:
    exported = exported_names()
    assert "odradek_gateway_requests_total" in exported  # the scan itself works
    unknown = used_names() - exported
    assert not unknown, f"dashboard queries metrics no service exports: {sorted(unknown)}"


def test_consumer_group_panels_query_the_group_services_metrics() -> None:
    """The consumer-group row shows what the offset store (kafka-exporter's names for lag
    and members) and the coordinator export."""
    for name in (
        "kafka_consumergroup_lag",
        "kafka_consumergroup_members",
        "odradek_coordinator_groups",
        "odradek_coordinator_rebalances_total",
    ):
        assert name in used_names(), name


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian prometheus) is not installed"
)
def test_every_expression_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses each query (as a recording rule), with Grafana's variables filled in."""
    rules = [
        {"record": f"odradek:dashboard:{i}", "expr": e.replace("$__rate_interval", "1m")}
        for i, e in enumerate(expressions())
    ]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_provisioned_datasource_matches_the_dashboard_variable() -> None:
    doc = json.loads(DASHBOARD.read_text())
    (variable,) = doc["templating"]["list"]
    datasource = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )["datasources"][0]
    assert variable["current"]["value"] == datasource["uid"]
    assert variable["query"] == datasource["type"]
