"""Client quota enforcement on one gateway: Kafka's ClientQuotaManager and
ClientRequestQuotaManager.

The quotas themselves come from the controller's metadata (``client_quotas``, set by
AlterClientQuotas), so every gateway enforces the same configured values; each
gateway measures the traffic it serves itself, as each Kafka broker does.

Measurement (Kafka's ``Rate`` over a ``SampledStat``): ``quota.window.num`` samples
(11) of ``quota.window.size.seconds`` (1 s); the rate is the sum of the retained
samples over the elapsed window, counted as at least ``num - 1`` whole windows. A
value recorded past the bound gives the throttle time Kafka's ``QuotaUtils.throttleTime``
gives: ``(rate - bound) / bound * window`` ms, the time the rate needs to come back
under the bound if nothing more is recorded. ``request_percentage`` throttles are
capped at one window (``ClientRequestQuotaManager``).

Who shares a rate: :func:`odradek.client_quotas.resolve` (KIP-55 precedence); a
client with no quota at any level records nothing.

``request_percentage`` counts the time the gateway's event loop spends on the request
(decoding, handling, encoding: the steps of the request's own task, not the time
spent waiting for storage nodes or coordinators), as a percentage of one second, as
Kafka counts request-handler thread time. Work a handler hands to other tasks
(e.g. the gRPC calls themselves) is not counted.

Metrics (``/metrics``): per quota type and entity (user, client-id as in Kafka's
metric tags), the throttle time and throttled responses (counters), the measured rate
and the bound; at most :data:`MAX_EXPORTED` entities per type are exported (the most
throttled ones), and entities idle for an hour are forgotten (Kafka's inactive sensor
expiration), so the series stay bounded.
"""

from __future__ import annotations

import math
import time
import types
from collections.abc import Callable, Coroutine, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from odradek.client_quota_proto import entity_from_proto
from odradek.client_quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    Resolved,
    resolve,
)
from odradek.config import Config
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.metadata_cache import MetadataCache, Snapshot
from odradek.scrape_collector import ScrapeTimeCollector

T = TypeVar("T")

INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
MAX_EXPORTED = 200
_NANOS_TO_PERCENTAGE = 100.0 / 1e9


class _Sample:
    __slots__ = ("last_window_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.last_window_ms = now_ms
        self.value = 0.0


class Rate:
    """Kafka's ``Rate`` (a ``SampledTotal`` over ``samples`` windows of ``window_ms``)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples_max = samples
        self.window_ms = window_ms
        self.samples: list[_Sample] = []
        self.current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self.samples:
            self.samples.append(_Sample(now_ms))
        sample = self.samples[self.current]
        if now_ms - sample.last_window_ms >= self.window_ms:
            self.current = (self.current + 1) % self.samples_max
            if self.current >= len(self.samples):
                sample = _Sample(now_ms)
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample.last_window_ms, sample.value = now_ms, 0.0
        sample.value += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples_max * self.window_ms
        for s in self.samples:
            if now_ms - s.last_window_ms >= expire:
                s.last_window_ms, s.value = now_ms, 0.0

    def window_size(self, now_ms: int) -> int:
        """The elapsed time the rate divides by: at least ``samples - 1`` windows."""
        self._purge(now_ms)
        if not self.samples:
            self.samples.append(_Sample(now_ms))
        oldest = min(s.last_window_ms for s in self.samples)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples_max - 1:
            elapsed += (self.samples_max - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self.samples)
        return total / (self.window_size(now_ms) / 1000.0)


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)


class _Sensor:
    """One entity's rate and throttle totals."""

    __slots__ = ("last_used_ms", "rate", "throttle_ms", "throttled")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self.rate = Rate(samples, window_ms)
        self.last_used_ms = now_ms
        self.throttle_ms = 0
        self.throttled = 0


class ClientQuotaManager:
    """One quota type (Kafka's ``QuotaType``: Produce, Fetch, Request) on this gateway."""

    def __init__(
        self,
        quota_type: str,
        key: str,
        samples: int,
        window_s: int,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.quota_type = quota_type
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = max_throttle_ms
        self.sensors: dict[tuple[str, str], _Sensor] = {}
        self.bounds: dict[tuple[str, str], float] = {}
        self._last_purge_ms = 0

    def _sensor(self, q: Resolved, now_ms: int) -> _Sensor:
        tags = (q.user, q.client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = _Sensor(self.samples, self.window_ms, now_ms)
        sensor.last_used_ms = now_ms
        self.bounds[tags] = q.bound
        if now_ms - self._last_purge_ms > 60_000:
            self._purge(now_ms)
        return sensor

    def _purge(self, now_ms: int) -> None:
        self._last_purge_ms = now_ms
        for tags, s in list(self.sensors.items()):
            if now_ms - s.last_used_ms > INACTIVE_SENSOR_EXPIRATION_MS:
                del self.sensors[tags]
                self.bounds.pop(tags, None)

    def record(self, q: Resolved | None, value: float, now_ms: int) -> int:
        """Record ``value`` and answer the throttle time in ms (0: within the quota)."""
        if q is None:
            return 0
        rate = self._sensor(q, now_ms).rate
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= q.bound:
            return 0
        throttle = _java_round((measured - q.bound) / q.bound * rate.window_size(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return max(0, throttle)

    def unrecord(self, q: Resolved | None, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled Fetch answers no data)."""
        if q is not None:
            self._sensor(q, now_ms).rate.record(-value, now_ms)

    def max_value_in_window(self, q: Resolved | None) -> float | None:
        """Kafka's ``getMaxValueInQuotaWindow``: more than this in one response is
        throttled even after an idle window."""
        if q is None:
            return None
        return q.bound * (self.samples - 1) * (self.window_ms / 1000.0)

    def throttled(self, q: Resolved | None, throttle_ms: int) -> None:
        """Count a response answered with ``throttle_ms`` (Kafka's throttle-time sensor)."""
        _count_throttle(self.sensors, q, throttle_ms)


class TokenBucket:
    """Kafka's ``TokenBucket`` (KIP-599): ``bound`` tokens a second, at most
    ``samples * window`` seconds' worth; recording takes tokens, which may go negative."""

    __slots__ = ("burst_s", "last_ms", "tokens")

    def __init__(self, burst_s: float) -> None:
        self.burst_s = burst_s
        self.tokens: float | None = None  # full on first use
        self.last_ms = 0

    def measure(self, bound: float, now_ms: int) -> float:
        burst = self.burst_s * bound
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + bound * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        return self.tokens

    def record(self, value: float, bound: float, now_ms: int) -> None:
        self.tokens = min(self.burst_s * bound, self.measure(bound, now_ms) - value)


class _BucketSensor:
    __slots__ = ("bucket", "last_used_ms", "throttle_ms", "throttled")

    def __init__(self, burst_s: float, now_ms: int) -> None:
        self.bucket = TokenBucket(burst_s)
        self.last_used_ms = now_ms
        self.throttle_ms = 0
        self.throttled = 0


class ControllerMutationQuotaManager:
    """``controller_mutation_rate``: partitions created or deleted per second (Kafka's
    ControllerMutationQuotaManager). Throttle time ``-tokens / bound`` seconds."""

    quota_type = "ControllerMutation"
    key = CONTROLLER_MUTATION_RATE

    def __init__(self, samples: int, window_s: int) -> None:
        self.burst_s = float(samples * window_s)
        self.sensors: dict[tuple[str, str], _BucketSensor] = {}
        self.bounds: dict[tuple[str, str], float] = {}

    def _sensor(self, q: Resolved, now_ms: int) -> _BucketSensor:
        tags = (q.user, q.client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            if len(self.sensors) > 10_000:
                self._purge(now_ms)
            sensor = self.sensors[tags] = _BucketSensor(self.burst_s, now_ms)
        sensor.last_used_ms = now_ms
        self.bounds[tags] = q.bound
        return sensor

    def _purge(self, now_ms: int) -> None:
        for tags, s in list(self.sensors.items()):
            if now_ms - s.last_used_ms > INACTIVE_SENSOR_EXPIRATION_MS:
                del self.sensors[tags]
                self.bounds.pop(tags, None)

    def throttle_ms(self, q: Resolved, now_ms: int) -> int:
        """0 while tokens remain, else the time until the bucket is back at zero."""
        tokens = self._sensor(q, now_ms).bucket.measure(q.bound, now_ms)
        return 0 if tokens >= 0 else _java_round(-tokens / q.bound * 1000)

    def record(self, q: Resolved, partitions: float, now_ms: int) -> None:
        self._sensor(q, now_ms).bucket.record(partitions, q.bound, now_ms)

    def throttled(self, q: Resolved | None, throttle_ms: int) -> None:
        _count_throttle(self.sensors, q, throttle_ms)


def _count_throttle(
    sensors: Mapping[tuple[str, str], _Sensor | _BucketSensor], q: Resolved | None, ms: int
) -> None:
    if q is None or ms <= 0:
        return
    sensor = sensors.get((q.user, q.client_id))
    if sensor is not None:
        sensor.throttle_ms += ms
        sensor.throttled += 1


@dataclass(frozen=True, slots=True)
class Who:
    """The quota identity of a request: principal name and client id."""

    user: str
    client_id: str

    @staticmethod
    def of(principal: str, client_id: str | None) -> Who:
        # Kafka's session.sanitizedUser: the principal's name without its type.
        _, sep, name = principal.partition(":")
        return Who(name if sep else principal, client_id or "")


class ClientQuotas:
    """The three client quota managers, over the quotas in the current metadata."""

    def __init__(
        self,
        config: Config,
        metadata: MetadataCache,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        samples = GATEWAY_CONFIGS.read_int(config, "quota.window.num")
        window_s = GATEWAY_CONFIGS.read_int(config, "quota.window.size.seconds")
        self.metadata = metadata
        self.clock = clock
        self.produce = ClientQuotaManager("Produce", PRODUCER_BYTE_RATE, samples, window_s)
        self.fetch = ClientQuotaManager("Fetch", CONSUMER_BYTE_RATE, samples, window_s)
        self.request = ClientQuotaManager(
            "Request", REQUEST_PERCENTAGE, samples, window_s, max_throttle_ms=window_s * 1000
        )
        self.mutation = ControllerMutationQuotaManager(
            GATEWAY_CONFIGS.read_int(config, "controller.quota.window.num"),
            GATEWAY_CONFIGS.read_int(config, "controller.quota.window.size.seconds"),
        )
        self._snapshot: Snapshot | None = None
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._keys: frozenset[str] = frozenset()
        self._resolved: dict[tuple[str, str, str], Resolved | None] = {}
        _COLLECTOR.register(self)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        snap = self.metadata.current
        if snap is not self._snapshot:
            self._quotas = {
                entity_from_proto(q.entity): dict(q.values) for q in snap.raw.client_quotas
            }
            self._keys = frozenset(k for values in self._quotas.values() for k in values)
            self._resolved = {}
            self._snapshot = snap
        return self._quotas

    def any(self) -> bool:
        """Whether any quota is configured at all."""
        self.quotas()
        return bool(self._keys)

    def enabled(self, key: str) -> bool:
        """Whether any entity sets ``key`` (nothing is measured otherwise)."""
        self.quotas()
        return key in self._keys

    def resolve(
        self, manager: ClientQuotaManager | ControllerMutationQuotaManager, who: Who
    ) -> Resolved | None:
        quotas = self.quotas()
        if manager.key not in self._keys:
            return None
        cache_key = (manager.key, who.user, who.client_id)
        try:
            return self._resolved[cache_key]
        except KeyError:
            pass
        if len(self._resolved) > 10_000:
            self._resolved.clear()
        found = self._resolved[cache_key] = resolve(quotas, manager.key, who.user, who.client_id)
        return found

    def fetch_max_bytes(self, who: Who) -> int | None:
        """The most one Fetch may answer without a certain throttle (KafkaApis caps
        ``fetch_max_bytes`` with it); None: no consumer_byte_rate applies."""
        cap = self.fetch.max_value_in_window(self.resolve(self.fetch, who))
        return None if cap is None else int(min(cap, 2**31 - 1))


def thread_time_percentage(nanos: int) -> float:
    return nanos * _NANOS_TO_PERCENTAGE


class ThreadTime:
    """Event-loop time spent running one request's steps (see :func:`timed`)."""

    __slots__ = ("_started", "total_ns")

    def __init__(self) -> None:
        self.total_ns = 0
        self._started = 0

    def start(self) -> None:
        self._started = time.perf_counter_ns()

    def stop(self) -> None:
        self.total_ns += time.perf_counter_ns() - self._started

    def elapsed_ns(self) -> int:
        """Counted so far, the step running now included."""
        return self.total_ns + (time.perf_counter_ns() - self._started)


@types.coroutine
def timed(coro: Coroutine[Any, Any, T], clock: ThreadTime) -> Generator[Any, Any, T]:
    """Run ``coro`` in the awaiting task, adding the time each of its steps takes on the
    event loop to ``clock`` (waits in between are not counted)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        clock.start()
        try:
            yielded = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as stop:
            clock.stop()
            return stop.value  # type: ignore[no-any-return]
        except BaseException:
            clock.stop()
            raise
        clock.stop()
        try:
            value = yield yielded
            error = None
        except BaseException as exc:  # cancellation and the like: hand it to the coroutine
            value, error = None, exc


def _families(gateways: Sequence[ClientQuotas]) -> list[Metric]:
    labels = ["quota_type", "user", "client_id"]
    throttle = CounterMetricFamily(
        "odradek_gateway_client_quota_throttle_time_ms",
        "Throttle time answered to clients (Kafka's throttle-time sensor), by quota type "
        "(Produce, Fetch, Request) and quota entity.",
        labels=labels,
    )
    throttled = CounterMetricFamily(
        "odradek_gateway_client_quota_throttled_responses",
        "Responses answered with a throttle time, by quota type and entity.",
        labels=labels,
    )
    rate = GaugeMetricFamily(
        "odradek_gateway_client_quota_rate",
        "The measured rate a quota is checked against (bytes/s; percent for Request), "
        "by quota type and entity (Kafka's byte-rate / request-time).",
        labels=labels,
    )
    bound = GaugeMetricFamily(
        "odradek_gateway_client_quota_bound",
        "The quota that applies, by quota type and entity.",
        labels=labels,
    )
    for gw in gateways:
        now = gw.now_ms()
        for manager in (gw.produce, gw.fetch, gw.request):
            for (user, client_id), sensor in _exported(manager.sensors):
                values = [manager.quota_type, user, client_id]
                throttle.add_metric(values, float(sensor.throttle_ms))
                throttled.add_metric(values, float(sensor.throttled))
                rate.add_metric(values, sensor.rate.measure(now))
                bound.add_metric(values, manager.bounds.get((user, client_id), math.inf))
        m = gw.mutation
        for (user, client_id), bucket in _exported(m.sensors):
            values = [m.quota_type, user, client_id]
            throttle.add_metric(values, float(bucket.throttle_ms))
            throttled.add_metric(values, float(bucket.throttled))
            bound.add_metric(values, m.bounds.get((user, client_id), math.inf))
    return [throttle, throttled, rate, bound]


S = TypeVar("S", _Sensor, _BucketSensor)


def _exported(
    sensors: Mapping[tuple[str, str], S],
) -> Iterator[tuple[tuple[str, str], S]]:
    if len(sensors) <= MAX_EXPORTED:
        yield from sensors.items()
        return
    ranked = sorted(sensors.items(), key=lambda kv: kv[1].throttle_ms, reverse=True)
    yield from ranked[:MAX_EXPORTED]


_COLLECTOR: ScrapeTimeCollector[ClientQuotas] = ScrapeTimeCollector(_families)
