"""Prometheus series computed at scrape time from live service objects.

Coordinator-like services export gauges over the shards they own right now (groups by
state, cached offsets, transactions by state). Instead of keeping gauges in step with
every change, a :class:`ScrapeTimeCollector` computes the families from the services
registered with it at each scrape, so a shard that moved away stops contributing at
once. Services are held weakly: one that is gone simply drops out.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

S = TypeVar("S")


class ScrapeTimeCollector(Collector, Generic[S]):
    """Registered with the default registry; ``families(services)`` builds the series."""

    def __init__(self, families: Callable[[list[S]], Sequence[Metric]]) -> None:
        self._families = families
        self._services: weakref.WeakSet[S] = weakref.WeakSet()  # type: ignore[type-var]
        REGISTRY.register(self)

    def register(self, service: S) -> None:
        """Include ``service`` in every later scrape (while it lives)."""
        self._services.add(service)

    def collect(self) -> Iterator[Metric]:
        yield from self._families(list(self._services))
