"""Tallied metrics (odradek.metric_tallies): what a scrape of ``/metrics`` reads is
exactly what direct ``inc``/``observe`` calls would have counted, every one of them."""

from __future__ import annotations

import asyncio
import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from odradek.metric_tallies import CounterTally, HistogramTally, flush_tallies
from odradek.metrics import MetricsServer

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for m in registry.collect()
        for s in m.samples
        if not s.name.endswith("_created")
    }


def test_flushed_tallies_equal_direct_calls() -> None:
    direct, tallied = CollectorRegistry(), CollectorRegistry()
    made = {}
    for registry in (direct, tallied):
        made[id(registry)] = (
            Counter("t_requests", "r", ["api"], registry=registry),
            Histogram("t_seconds", "s", ["api"], buckets=BUCKETS, registry=registry),
        )
    d_count, d_hist = made[id(direct)]
    t_count, t_hist = made[id(tallied)]
    count_tally = CounterTally(t_count.labels("Produce"))
    hist_tally = HistogramTally(t_hist.labels("Produce"))
    rng = random.Random(18)
    # Values on the bucket bounds too: a bound's own value belongs to its bucket.
    values = [rng.choice(BUCKETS) for _ in range(200)] + [rng.uniform(0, 40) for _ in range(2000)]
    for i, v in enumerate(values):
        d_count.labels("Produce").inc(i % 3)
        count_tally.inc(i % 3)
        d_hist.labels("Produce").observe(v)
        hist_tally.observe(v)
        if i % 700 == 0:
            flush_tallies()  # scrapes in the middle: nothing counted twice or lost
    assert _samples(tallied) != _samples(direct)  # held until flushed
    flush_tallies()
    flush_tallies()
    assert _samples(tallied) == pytest.approx(_samples(direct))


def test_a_counter_tally_refuses_a_decrement() -> None:
    tally = CounterTally(Counter("t_neg", "n", registry=CollectorRegistry()))
    with pytest.raises(ValueError):
        tally.inc(-1)


async def _get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


def test_a_scrape_reads_what_was_tallied() -> None:
    counter = Counter("odradek_test_tallied_total", "Tallied for the test.")
    tally = CounterTally(counter)

    async def scenario() -> tuple[bytes, bytes]:
        server = MetricsServer()
        port = await server.start()
        try:
            for _ in range(1234):
                tally.inc()
            first = await _get(port, "/metrics")
            tally.inc(6)
            second = await _get(port, "/metrics?name[]=odradek_test_tallied_total")
            return first, second
        finally:
            await server.stop()

    first, second = asyncio.run(scenario())
    assert b"\nodradek_test_tallied_total 1234.0\n" in first
    assert b"\nodradek_test_tallied_total 1240.0\n" in b"\n" + second.split(b"\r\n\r\n", 1)[1]
