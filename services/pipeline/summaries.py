"""Per-minute summaries of the access log, as published to the summary topic.

One record per finished minute: key ``2024-05-01T12:34:00Z`` (the minute, UTC),
value JSON::

    {"minute": "2024-05-01T12:34:00Z", "requests": 1200, "bytes": 8301234,
     "status": {"200": 1100, "304": 60, "404": 40},
     "top_paths": [["/", 300], ...], "top_clients": [["203.0.113.7", 90], ...],
     "distinct_paths": 212, "distinct_clients": 388}

Built only from the minute's final counts, in a fixed order, with no wall-clock
field: a replayed batch produces byte-identical records, which is what lets the
publisher recognise what an earlier attempt already wrote. Pure code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

DIMENSIONS = ("status", "path", "client")


@dataclass(frozen=True)
class CountRow:
    """One (minute, dimension, value) count; ``rank`` orders values within the
    minute and dimension by requests (1 = most), ``distinct`` counts the values."""

    minute: datetime
    dimension: str
    value: str
    requests: int
    bytes: int
    rank: int
    distinct: int


@dataclass
class MinuteSummary:
    minute: datetime
    requests: int = 0
    bytes: int = 0
    status: dict[str, int] = field(default_factory=dict)
    top_paths: list[tuple[str, int]] = field(default_factory=list)
    top_clients: list[tuple[str, int]] = field(default_factory=list)
    distinct_paths: int = 0
    distinct_clients: int = 0

    @property
    def key(self) -> str:
        return minute_key(self.minute)

    def to_json(self) -> str:
        return json.dumps(
            {
                "minute": self.key,
                "requests": self.requests,
                "bytes": self.bytes,
                "status": dict(sorted(self.status.items())),
                "top_paths": [list(p) for p in self.top_paths],
                "top_clients": [list(c) for c in self.top_clients],
                "distinct_paths": self.distinct_paths,
                "distinct_clients": self.distinct_clients,
            },
            separators=(",", ":"),
        )

    @property
    def end_ms(self) -> int:
        return int((self.minute.astimezone(UTC) + timedelta(minutes=1)).timestamp() * 1000)


def minute_key(minute: datetime) -> str:
    t = minute.astimezone(UTC) if minute.tzinfo else minute.replace(tzinfo=UTC)
    return t.strftime("%Y-%m-%dT%H:%M:00Z")


def build_summaries(rows: Iterable[CountRow], top: int) -> list[MinuteSummary]:
    """Summaries sorted by minute; top lists by requests, ties by value."""
    by_minute: dict[str, MinuteSummary] = {}
    tops: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
    for r in rows:
        key = minute_key(r.minute)
        s = by_minute.get(key)
        if s is None:
            s = by_minute[key] = MinuteSummary(minute=r.minute)
        if r.dimension == "status":
            s.status[r.value] = r.requests
            s.requests += r.requests
            s.bytes += r.bytes
        elif r.dimension in ("path", "client"):
            if r.dimension == "path":
                s.distinct_paths = r.distinct
            else:
                s.distinct_clients = r.distinct
            if r.rank <= top:
                tops.setdefault((key, r.dimension), []).append((-r.requests, r.value, r.requests))
    for (key, dimension), entries in tops.items():
        best = [(value, n) for _, value, n in sorted(entries)[:top]]
        if dimension == "path":
            by_minute[key].top_paths = best
        else:
            by_minute[key].top_clients = best
    return [by_minute[k] for k in sorted(by_minute)]
