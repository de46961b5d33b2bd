"""The storage node's counters are tallied outside prometheus_client and moved into it
when ``/metrics`` is read (services/storage/metrics.py, issue 18): a scrape reads
exactly what was counted, and no counter lock is taken per request."""

from __future__ import annotations

from prometheus_client import REGISTRY

from odradek.metric_tallies import flush_tallies
from odradek.storage.metrics import StorageMetrics


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_counts_reach_the_registry_at_scrape_time_only() -> None:
    flush_tallies()
    topic = "tally-topic"
    before = {
        "in": _value("odradek_storage_bytes_in_total", topic=topic),
        "out": _value("odradek_storage_bytes_out_total", topic=topic),
        "rin": _value("odradek_storage_replication_bytes_in_total", topic=topic),
        "rout": _value("odradek_storage_replication_bytes_out_total", topic=topic),
        "produce": _value("odradek_storage_produce_requests_total"),
        "replica": _value("odradek_storage_fetch_requests_total", kind="replica"),
        "consumer": _value("odradek_storage_fetch_requests_total", kind="consumer"),
    }
    # Two instances (a test harness may make several) share one count per label set.
    for metrics in (StorageMetrics(), StorageMetrics()):
        metrics.bytes_in(topic, 100)
        metrics.bytes_out(topic, 7)
        metrics.replica_bytes_in(topic, 3)
        metrics.replica_bytes_out(topic, 5)
        metrics.produce_request()
        metrics.fetch_request(True)
        metrics.fetch_request(False)
        metrics.fetch_request(False)
    # Nothing reached prometheus_client yet: no lock per count.
    assert _value("odradek_storage_bytes_in_total", topic=topic) == before["in"]
    assert _value("odradek_storage_produce_requests_total") == before["produce"]

    flush_tallies()
    assert _value("odradek_storage_bytes_in_total", topic=topic) == before["in"] + 200
    assert _value("odradek_storage_bytes_out_total", topic=topic) == before["out"] + 14
    assert _value("odradek_storage_replication_bytes_in_total", topic=topic) == before["rin"] + 6
    assert _value("odradek_storage_replication_bytes_out_total", topic=topic) == before["rout"] + 10
    assert _value("odradek_storage_produce_requests_total") == before["produce"] + 2
    assert _value("odradek_storage_fetch_requests_total", kind="replica") == before["replica"] + 2
    assert _value("odradek_storage_fetch_requests_total", kind="consumer") == before["consumer"] + 4
