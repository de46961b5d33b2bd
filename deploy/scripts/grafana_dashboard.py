#!/usr/bin/env python3
"""Generates deploy/grafana/dashboards/odradek.json, the Odradek Grafana dashboard.

The dashboard is code so its queries can be reviewed and checked against the metric
names the services export (tests/deploy/test_dashboard.py). Run
``python deploy/scripts/grafana_dashboard.py`` after editing and commit the JSON; the
test fails when the committed file and this generator disagree.

Rows: cluster health (nodes by state, offline/under-replicated partitions, elections,
ISR changes), throughput (bytes in/out per topic, produce/fetch rates, connections,
throttling), latency (request quantiles per Kafka API, internal gRPC), storage
(log size, segments, offsets), consumer groups (``kafka_consumergroup_lag`` in
kafka-exporter's names, groups by state, rebalances), transactions and the mirror.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEPLOY = Path(__file__).resolve().parents[1]
OUT = DEPLOY / "grafana" / "dashboards" / "odradek.json"
# The Helm chart cannot read files outside its folder: it ships a copy.
CHART_COPY = DEPLOY / "helm" / "odradek" / "files" / "odradek-dashboard.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"

Panel = dict[str, Any]


class Layout:
    """Places panels left to right on Grafana's 24-column grid, rows top to bottom."""

    def __init__(self) -> None:
        self.panels: list[Panel] = []
        self.x = 0
        self.y = 0
        self.row_height = 0
        self.next_id = 1

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def row(self, title: str) -> None:
        if self.x:
            self.y += self.row_height
        self.panels.append(
            {
                "type": "row",
                "id": self._id(),
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
                "panels": [],
            }
        )
        self.x, self.y, self.row_height = 0, self.y + 1, 0

    def add(self, panel: Panel, w: int, h: int) -> None:
        if self.x + w > 24:
            self.x, self.y, self.row_height = 0, self.y + self.row_height, 0
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_height = max(self.row_height, h)


def target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}


def timeseries(title: str, unit: str, *queries: tuple[str, str], desc: str = "") -> Panel:
    return {
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": DS,
        "fieldConfig": {
            "defaults": {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10}},
            "overrides": [],
        },
        "options": {
            "legend": {
                "displayMode": "table",
                "placement": "bottom",
                "calcs": ["lastNotNull", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": [target(e, lg, chr(ord("A") + i)) for i, (e, lg) in enumerate(queries)],
    }


def stat(title: str, expr: str, *, bad_above: float | None = None, desc: str = "") -> Panel:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    if bad_above is not None:
        steps.append({"color": "red", "value": bad_above})
    return {
        "type": "stat",
        "title": title,
        "description": desc,
        "datasource": DS,
        "fieldConfig": {
            "defaults": {"unit": "short", "thresholds": {"mode": "absolute", "steps": steps}},
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background",
            "graphMode": "none",
            "textMode": "value",
        },
        "targets": [target(expr, "", "A")],
    }


def quantiles(metric: str, by: str, title: str) -> Panel:
    return timeseries(
        title,
        "s",
        (
            f"histogram_quantile(0.99, sum by (le, {by}) (rate({metric}_bucket[{RATE}])))",
            f"p99 {{{{{by}}}}}",
        ),
        (
            f"histogram_quantile(0.50, sum by (le, {by}) (rate({metric}_bucket[{RATE}])))",
            f"p50 {{{{{by}}}}}",
        ),
    )


def build() -> dict[str, Any]:
    lay = Layout()

    lay.row("Cluster health")
    lay.add(
        stat(
            "Active controllers", "sum(odradek_controller_active)", desc="Exactly 1 when healthy."
        ),
        4,
        4,
    )
    lay.add(
        stat("Offline partitions", "max(odradek_controller_offline_partitions)", bad_above=1),
        4,
        4,
    )
    lay.add(
        stat(
            "Under-replicated partitions",
            "max(odradek_controller_under_replicated_partitions)",
            bad_above=1,
        ),
        4,
        4,
    )
    lay.add(stat("Topics", "max(odradek_controller_topics)"), 4, 4)
    lay.add(stat("Partitions", "max(odradek_controller_partitions)"), 4, 4)
    lay.add(stat("Gateway connections", "sum(odradek_gateway_connections)"), 4, 4)
    lay.add(
        timeseries(
            "Nodes by kind and state",
            "short",
            ("sum by (kind, state) (odradek_controller_nodes)", "{{kind}} {{state}}"),
            desc="As registered with the active controller.",
        ),
        8,
        8,
    )
    lay.add(timeseries("Scrape targets up", "short", ("sum by (job) (up)", "{{job}}")), 8, 8)
    lay.add(
        timeseries(
            "Leader elections and ISR changes",
            "ops",
            (f"sum(rate(odradek_controller_leader_elections_total[{RATE}]))", "leader elections"),
            (f"sum(rate(odradek_controller_isr_shrinks_total[{RATE}]))", "ISR shrinks"),
            (f"sum(rate(odradek_controller_isr_expands_total[{RATE}]))", "ISR expands"),
        ),
        8,
        8,
    )

    lay.row("Throughput")
    lay.add(
        timeseries(
            "Bytes in per topic",
            "Bps",
            (f"sum by (topic) (rate(odradek_gateway_bytes_in_total[{RATE}]))", "{{topic}}"),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Bytes out per topic",
            "Bps",
            (f"sum by (topic) (rate(odradek_gateway_bytes_out_total[{RATE}]))", "{{topic}}"),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Produce and fetch requests",
            "reqps",
            (
                f'sum by (request) (rate(odradek_gateway_requests_total{{request=~"Produce|Fetch"}}[{RATE}]))',
                "{{request}}",
            ),
            (
                f'sum(rate(odradek_storage_fetch_requests_total{{kind="replica"}}[{RATE}]))',
                "replica fetches",
            ),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Requests per API and version",
            "reqps",
            (
                f"sum by (request, version) (rate(odradek_gateway_requests_total[{RATE}]))",
                "{{request}} v{{version}}",
            ),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Throttled and failed requests",
            "reqps",
            (f"sum(rate(odradek_gateway_throttled_requests_total[{RATE}]))", "throttled"),
            (
                f"sum by (request) (rate(odradek_gateway_request_failures_total[{RATE}]))",
                "failed {{request}}",
            ),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Replication bytes",
            "Bps",
            (
                f"sum by (instance) (rate(odradek_storage_replication_bytes_in_total[{RATE}]))",
                "in {{instance}}",
            ),
            (
                f"sum by (instance) (rate(odradek_storage_replication_bytes_out_total[{RATE}]))",
                "out {{instance}}",
            ),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Connections per gateway",
            "short",
            ("sum by (instance) (odradek_gateway_connections)", "{{instance}}"),
        ),
        12,
        8,
    )

    lay.row("Latency")
    lay.add(
        quantiles("odradek_gateway_request_seconds", "request", "Kafka request latency per API"),
        12,
        9,
    )
    lay.add(
        quantiles(
            "odradek_grpc_server_handling_seconds",
            "grpc_method",
            "Internal gRPC latency per method",
        ),
        12,
        9,
    )
    lay.add(
        timeseries(
            "Internal gRPC calls by method and code",
            "reqps",
            (
                f"sum by (grpc_method, grpc_code) (rate(odradek_grpc_server_handled_total[{RATE}]))",
                "{{grpc_method}} {{grpc_code}}",
            ),
        ),
        24,
        8,
    )

    lay.row("Storage")
    lay.add(
        timeseries(
            "Log size per topic", "bytes", ("sum by (topic) (odradek_log_size_bytes)", "{{topic}}")
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Segments per topic", "short", ("sum by (topic) (odradek_log_segments)", "{{topic}}")
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "High watermark per partition (leaders)",
            "short",
            (
                "max by (topic, partition) (odradek_partition_high_watermark * on (instance, topic, partition) (odradek_partition_is_leader == 1))",
                "{{topic}}-{{partition}}",
            ),
            (
                "max by (topic, partition) (odradek_log_start_offset)",
                "start {{topic}}-{{partition}}",
            ),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Under-replicated partitions per storage node",
            "short",
            ("sum by (instance) (odradek_partition_under_replicated)", "{{instance}}"),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Log end offset per partition",
            "short",
            ("max by (topic, partition) (odradek_log_end_offset)", "{{topic}}-{{partition}}"),
        ),
        12,
        8,
    )

    lay.row("Consumer groups")
    lay.add(
        timeseries(
            "Consumer lag per group",
            "short",
            ("sum by (consumergroup) (kafka_consumergroup_lag)", "{{consumergroup}}"),
            desc="kafka_consumergroup_lag as kafka-exporter names it: log end offset minus committed offset.",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Consumer lag per partition",
            "short",
            (
                "max by (consumergroup, topic, partition) (kafka_consumergroup_lag)",
                "{{consumergroup}} {{topic}}-{{partition}}",
            ),
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "Groups by state", "short", ("sum by (state) (odradek_coordinator_groups)", "{{state}}")
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Rebalances",
            "ops",
            (f"sum(rate(odradek_coordinator_rebalances_total[{RATE}]))", "rebalances"),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Members per group",
            "short",
            ("sum by (consumergroup) (kafka_consumergroup_members)", "{{consumergroup}}"),
        ),
        8,
        8,
    )

    lay.row("Transactions")
    lay.add(
        timeseries(
            "Transactional ids by state",
            "short",
            ("sum by (state) (odradek_transactions_ids)", "{{state}}"),
            desc="Ids of the __transaction_state shards the transaction coordinators own.",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Timed-out transactions aborted",
            "ops",
            (f"sum(rate(odradek_transactions_timed_out_aborts_total[{RATE}]))", "aborted"),
            desc="Transactions open past transaction.timeout.ms, aborted and their producers fenced.",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Transaction markers sent",
            "reqps",
            (f"sum(rate(odradek_transactions_marker_requests_total[{RATE}]))", "WriteTxnMarkers"),
        ),
        8,
        8,
    )

    lay.row("Mirror")
    lay.add(
        timeseries(
            "Mirror lag by topic",
            "short",
            ("sum by (source, topic) (odradek_mirror_lag_records)", "{{source}} {{topic}}"),
            desc="Source records not yet on the target (odradek mirror, docs/mirror.md).",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Mirror replication latency",
            "s",
            (
                "histogram_quantile(0.99, sum by (source, le) "
                f"(rate(odradek_mirror_replication_latency_seconds_bucket[{RATE}])))",
                "p99 {{source}}",
            ),
            (
                "histogram_quantile(0.5, sum by (source, le) "
                f"(rate(odradek_mirror_replication_latency_seconds_bucket[{RATE}])))",
                "p50 {{source}}",
            ),
            desc="Source record timestamp to target acknowledgement.",
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Mirrored bytes",
            "Bps",
            (f"sum by (source) (rate(odradek_mirror_bytes_total[{RATE}]))", "{{source}}"),
        ),
        8,
        8,
    )
    lay.add(
        timeseries(
            "Mirror partitions by instance",
            "short",
            (
                "sum by (instance, source) (odradek_mirror_assigned_partitions)",
                "{{instance}} {{source}}",
            ),
            desc="Source partitions each mirror instance copies: instances with one "
            "mirror.group.id share them (docs/mirror.md).",
        ),
        8,
        8,
    )

    return {
        "uid": "odradek-overview",
        "title": "Odradek",
        "description": "Odradek cluster health, throughput, latency, storage, consumer lag "
        "and transactions.",
        "tags": ["odradek", "kafka"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "10s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {"text": "Prometheus", "value": "prometheus"},
                    "hide": 0,
                    "refresh": 1,
                    "options": [],
                }
            ]
        },
        "panels": lay.panels,
    }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, action="append", help="default: both copies")
    parser.add_argument("--check", action="store_true", help="fail if a copy is not up to date")
    args = parser.parse_args(argv)
    text = render()
    outs: list[Path] = args.out or [OUT, CHART_COPY]
    stale = [p for p in outs if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} is stale: run {Path(__file__).name}", file=sys.stderr)
        return 1 if stale else 0
    for path in outs:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
