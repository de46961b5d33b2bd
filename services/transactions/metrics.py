"""Prometheus metrics of the transaction coordinator.

Gauges are computed at scrape time from the live shards (a custom collector), so a
shard that moved away simply stops contributing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.scrape_collector import ScrapeTimeCollector
from odradek.transaction_log.records import TransactionState

if TYPE_CHECKING:
    from odradek.transactions.service import TransactionCoordinatorService


def _families(
    services: list[TransactionCoordinatorService],
) -> list[GaugeMetricFamily | CounterMetricFamily]:
    txns = GaugeMetricFamily(
        "odradek_transactions_ids",
        "Transactional ids of the shards this coordinator owns, by state.",
        labels=["state"],
    )
    shards = GaugeMetricFamily(
        "odradek_transactions_shards", "Owned shards by status.", labels=["status"]
    )
    aborted = CounterMetricFamily(
        "odradek_transactions_timed_out_aborts",
        "Transactions aborted because they ran past their timeout (owned shards).",
    )
    markers = CounterMetricFamily(
        "odradek_transactions_marker_requests",
        "WriteTxnMarkers requests sent to partition leaders and offset stores.",
    )
    by_state = {s.kafka_name: 0 for s in TransactionState}
    by_status = {"loading": 0, "active": 0}
    timed_out = requests = 0
    for service in services:
        requests += service.markers.stats.requests
        for runtime in list(service.runtimes.values()):
            if runtime.status.value in by_status:
                by_status[runtime.status.value] += 1
            timed_out += runtime.shard.timed_out_aborts
            for md in list(runtime.shard.txns.values()):
                by_state[md.state.kafka_name] += 1
    for state, count in by_state.items():
        txns.add_metric([state], count)
    for status, count in by_status.items():
        shards.add_metric([status], count)
    aborted.add_metric([], timed_out)
    markers.add_metric([], requests)
    return [txns, shards, aborted, markers]


register = ScrapeTimeCollector(_families).register
