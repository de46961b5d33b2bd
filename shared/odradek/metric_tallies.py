"""Counters and histograms tallied in plain Python numbers, handed to prometheus_client
when ``/metrics`` is read (issue 18).

prometheus_client guards every value with a lock and checks the metric on each
``inc``/``observe``: a few microseconds per call, and a gateway answering thousands of
one-record Produce requests a second made five such calls per request (requests and
their duration by API, bytes and partition entries by topic). A tally adds to a plain
number instead and :func:`flush_tallies` moves what it holds into its child at each
scrape (:class:`odradek.metrics.MetricsServer` calls it before rendering), so a scrape
reads exactly what a direct ``inc``/``observe`` would have counted.

Tallies belong to one event loop's thread (no locks: the point is to take none) and
live as long as the process: make one per label set, once, and keep it.
"""

from __future__ import annotations

import bisect
from typing import Any

from prometheus_client import Counter, Histogram

_TALLIES: list[CounterTally | HistogramTally] = []


class CounterTally:
    """A Counter child's increments, held until the next :func:`flush_tallies`."""

    __slots__ = ("_child", "_pending")

    def __init__(self, child: Counter) -> None:
        self._child = child
        self._pending: float = 0
        _TALLIES.append(self)

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self._pending += amount

    def flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, 0
            self._child.inc(pending)


class HistogramTally:
    """A Histogram child's observations as bucket counts and a sum, held until the
    next :func:`flush_tallies`."""

    __slots__ = ("_bounds", "_child", "_counts", "_sum")

    def __init__(self, child: Histogram) -> None:
        self._child = child
        # prometheus_client's own bounds (the last is +Inf): an observation goes to the
        # first bucket whose bound is >= it, as Histogram.observe places it.
        self._bounds: list[float] = list(_internals(child)._upper_bounds)
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0
        _TALLIES.append(self)

    def observe(self, amount: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, amount)] += 1
        self._sum += amount

    def flush(self) -> None:
        counts = self._counts
        if not any(counts):
            return
        child = _internals(self._child)
        child._sum.inc(self._sum)
        for i, n in enumerate(counts):
            if n:
                child._buckets[i].inc(n)
        self._counts = [0] * len(counts)
        self._sum = 0.0


def _internals(child: Histogram) -> Any:
    """The child's per-bucket values (``_buckets``, ``_sum``, ``_upper_bounds``):
    prometheus_client has no public call that adds n observations to a bucket.
    tests/unit/test_metric_tallies.py checks the result against ``observe``."""
    return child


def flush_tallies() -> None:
    """Move every tally's counts into its metric (call before reading the registry)."""
    for tally in _TALLIES:
        tally.flush()
