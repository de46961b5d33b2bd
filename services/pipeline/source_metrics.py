"""Spark's Kafka source metrics (``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``,
``avgOffsetsBehindLatest``) for the ``odradek`` source, from a query's progress.

Spark's connector returns them from ``ReportsSourceMetrics.metrics``; PySpark's
Python data source bridge (4.3) implements no such hook, so a Python source's
``"metrics"`` in ``StreamingQueryProgress`` stays ``{}``. The source does report what
they are computed from: ``endOffset`` (consumed) and ``latestOffset`` (the high
watermarks seen at the trigger, via ``reportLatestOffset``), both in Spark's Kafka
offset JSON. ``with_offsets_behind(query.lastProgress)`` fills the metrics in with
Spark's formula (``KafkaMicroBatchStream.metrics``: latest minus consumed, per
partition of the latest offsets; the average as a double).

Pure code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from odradek.pipeline.spark_offsets import from_json


def _offsets(raw: Any) -> dict[tuple[str, int], int]:
    if raw is None:
        return {}
    doc = json.loads(raw) if isinstance(raw, str) else raw
    return from_json(doc) if isinstance(doc, Mapping) else {}


def offsets_behind(source: Mapping[str, Any]) -> dict[str, str]:
    """The three metrics for one ``sources[i]`` entry of a progress; ``{}`` when the
    entry lacks either offset (as Spark returns an empty map)."""
    latest = _offsets(source.get("latestOffset"))
    consumed = _offsets(source.get("endOffset"))
    behind = [latest[tp] - consumed[tp] for tp in latest if tp in consumed]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(float(sum(behind)) / len(behind)),
    }


def with_offsets_behind(progress: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a progress (``query.lastProgress`` or a listener event's ``json``
    decoded) whose sources with Kafka offsets and no metrics of their own carry the
    metrics Spark's connector reports."""
    out = dict(progress)
    sources = []
    for src in progress.get("sources", []):
        entry = dict(src)
        if not entry.get("metrics"):
            try:
                entry["metrics"] = offsets_behind(entry)
            except ValueError:  # not Kafka offset JSON: some other source
                pass
        sources.append(entry)
    out["sources"] = sources
    return out
