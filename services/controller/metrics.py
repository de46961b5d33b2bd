"""Prometheus instruments of the replication controller (Kafka's controller metric names, prefixed)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from odradek.controller.cluster_state import NodeKind, NodeState
from odradek.controller.model import ClusterModel, Stats

ACTIVE = Gauge("odradek_controller_active", "1 while this process is the active controller.")
OFFLINE_PARTITIONS = Gauge("odradek_controller_offline_partitions", "Partitions without a leader.")
UNDER_REPLICATED = Gauge(
    "odradek_controller_under_replicated_partitions",
    "Partitions whose ISR is smaller than their replica set.",
)
LEADER_ELECTIONS = Counter(
    "odradek_controller_leader_elections", "Partition leader changes to a new leader."
)
ISR_SHRINKS = Counter("odradek_controller_isr_shrinks", "ISR shrinks committed.")
ISR_EXPANDS = Counter("odradek_controller_isr_expands", "ISR expansions committed.")
NODES = Gauge("odradek_controller_nodes", "Registered nodes by kind and state.", ["kind", "state"])
TOPICS = Gauge("odradek_controller_topics", "Topics.")
PARTITIONS = Gauge("odradek_controller_partitions", "Partitions.")
METADATA_VERSION = Gauge(
    "odradek_controller_metadata_version", "Latest published metadata version."
)


def observe(model: ClusterModel) -> None:
    """Refresh the gauges from a committed model."""
    OFFLINE_PARTITIONS.set(model.offline_partitions())
    UNDER_REPLICATED.set(model.under_replicated_partitions())
    TOPICS.set(len(model.topics))
    PARTITIONS.set(model.partition_count())
    METADATA_VERSION.set(model.metadata_version)
    counts = {(kind, state): 0 for kind in NodeKind if kind for state in NodeState if state}
    for node in model.nodes.values():
        counts[(node.kind, node.state)] = counts.get((node.kind, node.state), 0) + 1
    for (kind, state), count in counts.items():
        NODES.labels(kind.name.lower(), state.name.lower()).set(count)


def count(delta: Stats) -> None:
    """Add what one committed change did to the counters."""
    if delta.leader_elections:
        LEADER_ELECTIONS.inc(delta.leader_elections)
    if delta.isr_shrinks:
        ISR_SHRINKS.inc(delta.isr_shrinks)
    if delta.isr_expands:
        ISR_EXPANDS.inc(delta.isr_expands)


def clear() -> None:
    """A standby reports no cluster state of its own."""
    ACTIVE.set(0)
    NODES.clear()
