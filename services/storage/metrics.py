"""The storage node's Prometheus metrics.

Counters are process-wide (one storage node per process). Per-partition gauges are
not kept up to date on the hot path: a collector reads them from the hosted
partitions when Prometheus scrapes, so an append costs nothing extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from odradek.metric_tallies import CounterTally
from odradek.storage.partition import Partition

BYTES_IN = Counter(
    "odradek_storage_bytes_in",
    "Record bytes appended by producers to partitions led here, per topic.",
    ["topic"],
)
BYTES_OUT = Counter(
    "odradek_storage_bytes_out",
    "Record bytes returned to consumer fetches, per topic.",
    ["topic"],
)
REPLICATION_BYTES_IN = Counter(
    "odradek_storage_replication_bytes_in",
    "Record bytes appended by this node's replica fetchers, per topic.",
    ["topic"],
)
REPLICATION_BYTES_OUT = Counter(
    "odradek_storage_replication_bytes_out",
    "Record bytes served to followers, per topic.",
    ["topic"],
)
PRODUCE_REQUESTS = Counter(
    "odradek_storage_produce_requests",
    "Produce requests handled.",
)
FETCH_REQUESTS = Counter(
    "odradek_storage_fetch_requests",
    "Fetch requests handled, by kind (consumer or replica).",
    ["kind"],
)
ISR_SHRINKS = Counter(
    "odradek_isr_shrinks", "ISR shrinks committed by the controller for partitions led here."
)
ISR_EXPANDS = Counter(
    "odradek_isr_expands", "ISR expansions committed by the controller for partitions led here."
)


class StorageMetrics:
    """The counters, behind methods so call sites stay one line.

    Each label set counts into a :class:`~odradek.metric_tallies.CounterTally`, moved
    into its Counter when ``/metrics`` is read: ``Counter.inc`` takes a lock and
    ``labels`` a lock and a dict lookup, and a leader counted about eight times per
    replicated one-record Produce (issue 18). Tallies are process-wide, one per label
    set, shared by every instance (tests make several).
    """

    def __init__(self) -> None:
        self._produce = _tally(PRODUCE_REQUESTS)
        self._fetch_consumer = _tally(FETCH_REQUESTS, "consumer")
        self._fetch_replica = _tally(FETCH_REQUESTS, "replica")
        self._isr_shrinks = _tally(ISR_SHRINKS)
        self._isr_expands = _tally(ISR_EXPANDS)
        self._bytes_in: dict[str, CounterTally] = {}
        self._bytes_out: dict[str, CounterTally] = {}
        self._replica_in: dict[str, CounterTally] = {}
        self._replica_out: dict[str, CounterTally] = {}

    @staticmethod
    def _topic(cache: dict[str, CounterTally], counter: Counter, topic: str) -> CounterTally:
        tally = cache.get(topic)
        if tally is None:
            tally = cache[topic] = _tally(counter, topic)
        return tally

    def bytes_in(self, topic: str, n: int) -> None:
        tally = self._bytes_in.get(topic) or self._topic(self._bytes_in, BYTES_IN, topic)
        tally.inc(n)

    def bytes_out(self, topic: str, n: int) -> None:
        tally = self._bytes_out.get(topic) or self._topic(self._bytes_out, BYTES_OUT, topic)
        tally.inc(n)

    def replica_bytes_in(self, topic: str, n: int) -> None:
        tally = self._replica_in.get(topic) or self._topic(
            self._replica_in, REPLICATION_BYTES_IN, topic
        )
        tally.inc(n)

    def replica_bytes_out(self, topic: str, n: int) -> None:
        tally = self._replica_out.get(topic) or self._topic(
            self._replica_out, REPLICATION_BYTES_OUT, topic
        )
        tally.inc(n)

    def produce_request(self) -> None:
        self._produce.inc()

    def fetch_request(self, replica: bool) -> None:
        (self._fetch_replica if replica else self._fetch_consumer).inc()

    def isr_shrink(self) -> None:
        self._isr_shrinks.inc()

    def isr_expand(self) -> None:
        self._isr_expands.inc()


_TALLIES: dict[tuple[int, tuple[str, ...]], CounterTally] = {}


def _tally(counter: Counter, *labels: str) -> CounterTally:
    """The process's one tally of ``counter`` with these label values."""
    key = (id(counter), labels)
    tally = _TALLIES.get(key)
    if tally is None:
        tally = _TALLIES[key] = CounterTally(counter.labels(*labels) if labels else counter)
    return tally


class PartitionCollector(Collector):
    """Per-partition gauges read at scrape time from the hosted partitions."""

    def __init__(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        self.partitions = partitions

    def describe(self) -> Iterable[Metric]:
        # The names, so that a scrape restricted to other series (``/metrics?name[]=``)
        # skips this collector instead of walking every hosted partition.
        return self._families()

    def _families(self) -> list[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "odradek_log_size_bytes", "Bytes in the partition's log segments.", labels=labels
        )
        segments = GaugeMetricFamily(
            "odradek_log_segments", "Segments in the partition's log.", labels=labels
        )
        start = GaugeMetricFamily(
            "odradek_log_start_offset", "The partition log's start offset.", labels=labels
        )
        end = GaugeMetricFamily(
            "odradek_log_end_offset", "The partition log's end offset.", labels=labels
        )
        hw = GaugeMetricFamily(
            "odradek_partition_high_watermark", "The partition's high watermark.", labels=labels
        )
        lso_lag = GaugeMetricFamily(
            "odradek_partition_last_stable_offset_lag",
            "High watermark minus last stable offset (Kafka's LastStableOffsetLag): how far "
            "read_committed consumers trail; it stays up while a transaction hangs.",
            labels=labels,
        )
        under = GaugeMetricFamily(
            "odradek_partition_under_replicated",
            "1 when this node leads the partition and its ISR is smaller than its replica set.",
            labels=labels,
        )
        leader = GaugeMetricFamily(
            "odradek_partition_is_leader", "1 when this node leads the partition.", labels=labels
        )
        return [size, segments, start, end, hw, lso_lag, under, leader]

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        size, segments, start, end, hw, lso_lag, under, leader = families
        for part in self.partitions():
            values = [part.topic, str(part.index)]
            try:
                size.add_metric(values, part.size_bytes)
                segments.add_metric(values, part.segment_count)
                start.add_metric(values, part.log_start_offset)
                end.add_metric(values, part.log_end_offset)
                hw.add_metric(values, part.high_watermark)
                lso_lag.add_metric(values, part.high_watermark - part.last_stable_offset)
                under.add_metric(values, 1 if part.under_replicated else 0)
                leader.add_metric(values, 1 if part.is_leader else 0)
            except Exception:  # a log being deleted under the scrape: skip it
                continue
        yield from families


def register_collector(collector: PartitionCollector) -> None:
    REGISTRY.register(collector)


def unregister_collector(collector: PartitionCollector) -> None:
    try:
        REGISTRY.unregister(collector)
    except KeyError:
        pass
