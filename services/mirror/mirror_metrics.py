"""The mirror's Prometheus metrics, per source partition (``/metrics``).

Labels: ``source`` (cluster alias), ``topic`` (source topic), ``partition``. The
latency is MirrorMaker 2's ``replication-latency-ms``: from a record's timestamp at
the source to the target's acknowledgement of the batch holding it (the batch's
largest timestamp, so it is a lower bound for the batch's older records).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_LABELS = ("source", "topic", "partition")

LAG = Gauge(
    "odradek_mirror_lag_records",
    "Source records not yet on the target: source high watermark minus the mirrored position.",
    _LABELS,
)
LATENCY = Gauge(
    "odradek_mirror_replication_latency_ms",
    "Source timestamp to target acknowledgement of the last mirrored batch (ms).",
    _LABELS,
)
LATENCY_HISTOGRAM = Histogram(
    "odradek_mirror_replication_latency_seconds",
    "Source timestamp to target acknowledgement, per mirrored batch.",
    ("source",),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
RECORDS = Counter("odradek_mirror_records_total", "Records written to the target.", _LABELS)
BYTES = Counter("odradek_mirror_bytes_total", "Record batch bytes written to the target.", _LABELS)
ERRORS = Counter(
    "odradek_mirror_errors_total",
    "Partition mirror restarts after an error (fetch, produce or commit).",
    ("source", "kind"),
)
ASSIGNED = Gauge(
    "odradek_mirror_assigned_partitions", "Source partitions this instance mirrors.", ("source",)
)


def forget(source: str, topic: str, partition: int) -> None:
    """Drop a partition's series when it moves to another instance."""
    labels = (source, topic, str(partition))
    for metric in (LAG, LATENCY, RECORDS, BYTES):
        try:
            metric.remove(*labels)
        except KeyError:
            pass
