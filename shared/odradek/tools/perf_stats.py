"""Producer throughput numbers and pacing, as kafka-producer-perf-test reports them.

:class:`ProducerStats` is fed one acknowledged record at a time (from the client's
I/O thread, the only writer) and prints, every reporting interval,

    ``50000 records sent, 10000.0 records/sec (0.95 MB/sec), 12.3 ms avg latency, 45.0 ms max latency.``

and at the end one total line with latency percentiles, in Kafka's exact format.
Latency is from ``send()`` to the acknowledgement, so it includes time spent waiting
in the client's batches, as in Kafka. At most ``MAX_SAMPLES`` latencies are kept
(every n-th record beyond that), so memory stays bounded on long runs.

:class:`Throttle` paces a sender to about N records per second.
"""

from __future__ import annotations

import time
from array import array
from typing import Any, TextIO

from odradek.tools.common import mb

MAX_SAMPLES = 500_000
PERCENTILES = (0.5, 0.95, 0.99, 0.999)


class ProducerStats:
    def __init__(self, expected_records: int, interval_s: float, out: TextIO) -> None:
        self.out = out
        self.interval_s = interval_s
        self.sampling = max(1, expected_records // MAX_SAMPLES)
        self.latencies = array("d")
        self.start = time.monotonic()
        self.count = 0
        self.bytes = 0
        self.total_latency = 0.0
        self.max_latency = 0.0
        self._iteration = 0
        self._new_window(self.start)

    def _new_window(self, now: float) -> None:
        self._window_start = now
        self._window_count = 0
        self._window_bytes = 0
        self._window_latency = 0.0
        self._window_max = 0.0

    def on_success(self, sent_at: float, nbytes: int, _metadata: Any = None) -> None:
        """Future callback: ``sent_at`` is ``time.monotonic()`` just before ``send()``."""
        now = time.monotonic()
        self.record((now - sent_at) * 1000.0, nbytes, now)

    def record(self, latency_ms: float, nbytes: int, now: float) -> None:
        self.count += 1
        self.bytes += nbytes
        self.total_latency += latency_ms
        if latency_ms > self.max_latency:
            self.max_latency = latency_ms
        self._window_count += 1
        self._window_bytes += nbytes
        self._window_latency += latency_ms
        if latency_ms > self._window_max:
            self._window_max = latency_ms
        if self._iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self._iteration += 1
        if self.interval_s > 0 and now - self._window_start >= self.interval_s:
            self.out.write(self.window_line(now) + "\n")
            self.out.flush()
            self._new_window(now)

    def window_line(self, now: float) -> str:
        elapsed = max(now - self._window_start, 1e-9)
        count = self._window_count
        return (
            f"{count} records sent, {count / elapsed:.1f} records/sec "
            f"({mb(self._window_bytes) / elapsed:.2f} MB/sec), "
            f"{self._window_latency / max(count, 1):.1f} ms avg latency, "
            f"{self._window_max:.1f} ms max latency."
        )

    def percentiles(self) -> list[int]:
        ordered = sorted(self.latencies)
        if not ordered:
            return [0 for _ in PERCENTILES]
        return [int(ordered[min(int(p * len(ordered)), len(ordered) - 1)]) for p in PERCENTILES]

    def total_line(self, now: float | None = None) -> str:
        elapsed = max((now if now is not None else time.monotonic()) - self.start, 1e-9)
        p50, p95, p99, p999 = self.percentiles()
        return (
            f"{self.count} records sent, {self.count / elapsed:f} records/sec "
            f"({mb(self.bytes) / elapsed:.2f} MB/sec), "
            f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
            f"{self.max_latency:.2f} ms max latency, "
            f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th."
        )


class Throttle:
    """Keeps a sender near ``per_second`` records/s (no pacing when it is <= 0)."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second if per_second > 0 else 0.0
        self.start = time.monotonic()

    def wait(self, sent: int) -> None:
        if not self.interval:
            return
        delay = self.start + sent * self.interval - time.monotonic()
        if delay > 0.001:  # skip sub-millisecond sleeps: they cost more than they pace
            time.sleep(delay)
