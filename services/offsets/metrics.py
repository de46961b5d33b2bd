"""Prometheus metrics of the offset store, including kafka-exporter's consumer-group
series so existing dashboards work unchanged:

- ``kafka_consumergroup_current_offset{consumergroup,topic,partition}``: committed offset;
- ``kafka_consumergroup_lag{consumergroup,topic,partition}``: high watermark minus the
  committed offset (the high watermarks are refreshed in the background every
  ``offsets.lag.refresh.interval.ms``; no series until one is known);
- ``kafka_consumergroup_members{consumergroup}`` from the stored group metadata.

All three are computed at scrape time from the shard caches, so a deleted group or a
shard that moved away disappears from the output at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from odradek.scrape_collector import ScrapeTimeCollector

if TYPE_CHECKING:
    from odradek.offsets.service import OffsetStoreService

COMMITS = Counter("odradek_offsets_commits_total", "Offsets committed durably (one per partition).")
APPENDS = Counter("odradek_offsets_appends_total", "Record batches appended to __consumer_offsets.")
APPEND_SECONDS = Histogram(
    "odradek_offsets_append_seconds",
    "Time for one acks=all append to __consumer_offsets.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


def _families(services: list[OffsetStoreService]) -> list[GaugeMetricFamily]:
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset",
        "Current offset of a consumer group at a topic/partition.",
        labels=labels,
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "Current approximate lag of a consumer group at a topic/partition.",
        labels=labels,
    )
    members = GaugeMetricFamily(
        "kafka_consumergroup_members", "Members of a consumer group.", labels=["consumergroup"]
    )
    cached = GaugeMetricFamily(
        "odradek_offsets_cached_offsets", "Committed offsets held in the cache."
    )
    total = 0
    for service in services:
        watermarks = service.high_watermarks
        for shard in list(service.store.shards.values()):
            cache = shard.cache
            total += cache.count()
            for group, topic, partition, value in cache.all_offsets():
                key = [group, topic, str(partition)]
                current.add_metric(key, value.offset)
                hw = watermarks.get((topic, partition))
                if hw is not None and value.offset >= 0:
                    lag.add_metric(key, max(0, hw - value.offset))
            for group, meta in cache.groups.items():
                members.add_metric([group], len(meta.members))
    cached.add_metric([], total)
    return [current, lag, members, cached]


register = ScrapeTimeCollector(_families).register
