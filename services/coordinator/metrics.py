"""Prometheus metrics of the group coordinator.

Gauges are computed at scrape time from the live shards (a custom collector), so a
shard that moved away simply stops contributing; rebalances are a plain counter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily

from odradek.scrape_collector import ScrapeTimeCollector

if TYPE_CHECKING:
    from odradek.coordinator.service import CoordinatorService

REBALANCES = Counter(
    "odradek_coordinator_rebalances_total",
    "Completed rebalances (new generations with members) of the groups this coordinator owns.",
)

STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")


def _families(services: list[CoordinatorService]) -> list[GaugeMetricFamily]:
    groups = GaugeMetricFamily(
        "odradek_coordinator_groups", "Consumer groups by state.", labels=["state"]
    )
    members = GaugeMetricFamily(
        "odradek_coordinator_members", "Members of the groups this coordinator owns."
    )
    shards = GaugeMetricFamily(
        "odradek_coordinator_shards", "Owned shards by status.", labels=["status"]
    )
    by_state = dict.fromkeys(STATES, 0)
    member_count = 0
    by_status = {"loading": 0, "active": 0}
    for service in services:
        for runtime in list(service.runtimes.values()):
            status = runtime.status.value
            if status in by_status:
                by_status[status] += 1
            counts, n = runtime.shard.counts()
            member_count += n
            for state, count in counts.items():
                by_state[state] = by_state.get(state, 0) + count
    for state, count in by_state.items():
        groups.add_metric([state], count)
    members.add_metric([], member_count)
    for status, count in by_status.items():
        shards.add_metric([status], count)
    return [groups, members, shards]


register = ScrapeTimeCollector(_families).register
