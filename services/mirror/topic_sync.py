"""Which source topics a flow mirrors, and their target topics made to match.

Each refresh (``refresh.topics.interval.seconds``), per flow: the source's topics are
selected (policy, include/exclude regexes), missing target topics are created with the
source's partition count and its topic-level configs (those in
:data:`odradek.mirror.settings.SYNCED_TOPIC_CONFIGS`, MM2's ``sync.topic.configs``),
target topics with fewer partitions than their source get more (CreatePartitions),
and configs changed at the source are applied to the target
(IncrementalAlterConfigs). The result is the flow's work: one :class:`WorkUnit` per
source partition whose target partition exists.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from odradek.kafka_client import KafkaClient, error_text
from odradek.mirror import wire
from odradek.mirror.replication_policy import ReplicationPolicy
from odradek.mirror.settings import SYNCED_TOPIC_CONFIGS, Flow
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class WorkUnit:
    """One source partition and the target partition it is copied to."""

    target_topic: str
    partition: int
    source: str
    source_topic: str

    @property
    def target_tp(self) -> tuple[str, int]:
        return (self.target_topic, self.partition)

    @property
    def source_tp(self) -> tuple[str, int]:
        return (self.source_topic, self.partition)


def _counts(metadata: object) -> dict[str, int]:
    return {
        t.name: len(t.partitions)
        for t in metadata.topics  # type: ignore[attr-defined]
        if not t.error_code and t.partitions
    }


async def sync_topics(
    source: KafkaClient,
    target: KafkaClient,
    flow: Flow,
    policy: ReplicationPolicy,
    *,
    sync_configs: bool,
) -> list[WorkUnit]:
    """Create/extend/configure the flow's target topics; return its work units."""
    source_counts = _counts(await source.metadata(None))
    selected = {
        t: n
        for t, n in source_counts.items()
        if policy.should_mirror(t, flow.source, flow.target) and flow.selects_topic(t)
    }
    names = {t: policy.target_topic(flow.source, t) for t in selected}
    target.invalidate()
    target_counts = _counts(await target.metadata(None))
    wanted_configs: dict[str, dict[str, str]] = {}
    if sync_configs and selected:
        described = await wire.describe_topic_configs(source, sorted(selected))
        wanted_configs = {
            names[t]: {
                k: v
                for k, (v, override) in described.get(t, {}).items()
                if override and v is not None and k in SYNCED_TOPIC_CONFIGS
            }
            for t in selected
        }
    missing = {
        names[t]: (n, wanted_configs.get(names[t], {}))
        for t, n in selected.items()
        if names[t] not in target_counts
    }
    for name, (code, message) in (await wire.create_topics(target, missing)).items():
        if code and code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("creating %s on %s: %s", name, flow.target, error_text(code, message))
        elif not code:
            log.info("created %s on %s (%d partitions)", name, flow.target, missing[name][0])
    grow = {
        names[t]: n
        for t, n in selected.items()
        if names[t] in target_counts and target_counts[names[t]] < n
    }
    for name, (code, message) in (await wire.create_partitions(target, grow)).items():
        if code:
            log.warning("adding partitions to %s: %s", name, error_text(code, message))
        else:
            log.info("%s on %s grows to %d partitions", name, flow.target, grow[name])
    existing = [names[t] for t in selected if names[t] in target_counts]
    if sync_configs and existing:
        current = await wire.describe_topic_configs(target, existing)
        changes = {}
        for name in existing:
            have = {k: v for k, (v, _) in current.get(name, {}).items()}
            diff = {k: v for k, v in wanted_configs.get(name, {}).items() if have.get(k) != v}
            if diff:
                changes[name] = diff
        for name, (code, message) in (await wire.alter_topic_configs(target, changes)).items():
            if code:
                log.warning("syncing configs of %s: %s", name, error_text(code, message))
    target.invalidate()
    final = _counts(await target.metadata(sorted(names.values()))) if names else {}
    return sorted(
        WorkUnit(names[t], p, flow.source, t)
        for t, n in selected.items()
        for p in range(min(n, final.get(names[t], 0)))
    )
