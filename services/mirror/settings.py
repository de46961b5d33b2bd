"""The mirror's settings, by MirrorMaker 2's names (``connect-mirror-maker.properties``).

A configuration names the clusters by alias and enables flows ``source->target``::

    clusters = east, west
    east.bootstrap.servers = east-1:9092
    west.bootstrap.servers = west-1:9092
    west.security.protocol = SASL_SSL          # any client setting, per cluster
    east->west.enabled = true
    east->west.topics = orders.*, payments     # comma-separated regexes (default .*)
    east->west.topics.exclude = .*\\.tmp
    replication.policy.class = DefaultReplicationPolicy   # or IdentityReplicationPolicy

One mirror process has one target (every enabled flow must end at the same cluster)
and any number of sources. Flow settings (``topics``, ``groups``, ...) may be given
per flow (``east->west.topics``) or for all flows (``topics``). The mirror's own
settings: ``mirror.group.id`` (the instances sharing the work, and where source
offsets are stored on the target), ``metrics.listener`` (``host:port`` of
``/metrics``), ``exactly.once.support`` (``enabled``, ``requested``: when the target
supports transactions, the default; ``disabled``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.config import ConfigError, load_file
from odradek.kafka_client import ClientConfig
from odradek.kafka_security import SecurityConfigError
from odradek.mirror.replication_policy import ReplicationPolicy

# MM2's defaults (MirrorSourceConfig / MirrorCheckpointConfig), faster refresh intervals.
DEFAULTS: dict[str, str] = {
    "topics": ".*",
    "topics.exclude": r".*[\-\.]internal, .*\.replica, __.*",
    "groups": ".*",
    "groups.exclude": r"console-consumer-.*, connect-.*, __.*, odradek-mirror.*",
    "replication.policy.class": "DefaultReplicationPolicy",
    "replication.policy.separator": ".",
    "sync.topic.configs.enabled": "true",
    "refresh.topics.interval.seconds": "10",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "5",
    "sync.group.offsets.enabled": "false",
    "sync.group.offsets.interval.seconds": "10",
    "offset.flush.interval.ms": "1000",
    # The instances' group (Kafka Connect's worker defaults, which MM2 runs on).
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "3000",
    "rebalance.timeout.ms": "60000",
    "exactly.once.support": "requested",
    "metrics.listener": "127.0.0.1:0",
    "progress.interval.seconds": "5",
    "fetch.max.wait.ms": "500",
    "fetch.min.bytes": "1",
    "fetch.max.bytes": "52428800",
    "max.partition.fetch.bytes": "4194304",
    "max.in.flight.requests.per.connection": "5",
    "request.timeout.ms": "30000",
}
# The topic configs copied to the target (MM2's sync.topic.configs with its default filter).
SYNCED_TOPIC_CONFIGS = (
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "compression.type",
    "max.message.bytes",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
    "message.timestamp.type",
    "segment.bytes",
    "segment.ms",
)
_FLOW = re.compile(r"^([A-Za-z0-9_.-]+?)->([A-Za-z0-9_.-]+)\.enabled$")
_CLUSTER_KEYS = (
    "bootstrap.servers",
    "security.",
    "sasl.",
    "ssl.",
    "client.id",
    "request.timeout.ms",
)


@dataclass(frozen=True)
class Flow:
    """One ``source->target`` flow: which topics and groups cross it."""

    source: str
    target: str
    topics: tuple[re.Pattern[str], ...]
    topics_exclude: tuple[re.Pattern[str], ...]
    groups: tuple[re.Pattern[str], ...]
    groups_exclude: tuple[re.Pattern[str], ...]

    def selects_topic(self, topic: str) -> bool:
        return _matches(self.topics, topic) and not _matches(self.topics_exclude, topic)

    def selects_group(self, group: str) -> bool:
        return _matches(self.groups, group) and not _matches(self.groups_exclude, group)


@dataclass(frozen=True)
class MirrorSettings:
    clusters: dict[str, ClientConfig]
    target: str
    flows: tuple[Flow, ...]
    policy: ReplicationPolicy
    group_id: str
    values: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> str:
        return self.values.get(name, DEFAULTS.get(name, ""))

    def int(self, name: str) -> int:
        try:
            return int(self.get(name))
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {self.get(name)!r}") from None

    def bool(self, name: str) -> bool:
        return self.get(name).strip().lower() == "true"

    def seconds(self, name: str) -> float:
        return float(self.get(name))

    @property
    def sources(self) -> list[str]:
        return sorted({f.source for f in self.flows})


def _patterns(text: str, name: str) -> tuple[re.Pattern[str], ...]:
    out = []
    for item in text.split(","):
        item = item.strip()
        if item:
            try:
                out.append(re.compile(item))
            except re.error as exc:
                raise ConfigError(f"{name}: invalid regex {item!r}: {exc}") from None
    return tuple(out)


def _matches(patterns: tuple[re.Pattern[str], ...], name: str) -> bool:
    return any(p.fullmatch(name) for p in patterns)


def parse_settings(values: Mapping[str, str]) -> MirrorSettings:
    """Validate an MM2-style configuration; :class:`ConfigError` names what is wrong.

    ``mirror.config.file`` (``ODRADEK_MIRROR_CONFIG_FILE``) names a properties/YAML file
    read under the other settings: how a container gets flow keys such as
    ``east->west.enabled``, which cannot be environment variables."""
    values = dict(values)
    if values.get("mirror.config.file"):
        try:
            values = {**load_file(values["mirror.config.file"]), **values}
        except OSError as exc:
            raise ConfigError(f"mirror.config.file: {exc}") from None
    aliases = [a.strip() for a in values.get("clusters", "").split(",") if a.strip()]
    if not aliases:
        raise ConfigError("clusters: list the cluster aliases, e.g. clusters = east, west")
    clusters: dict[str, ClientConfig] = {}
    for alias in aliases:
        prefix = alias + "."
        props = {
            k[len(prefix) :]: v
            for k, v in values.items()
            if k.startswith(prefix) and k[len(prefix) :].startswith(_CLUSTER_KEYS)
        }
        props.setdefault("request.timeout.ms", values.get("request.timeout.ms", "30000"))
        if not props.get("bootstrap.servers"):
            raise ConfigError(f"{alias}.bootstrap.servers is not set")
        try:
            clusters[alias] = ClientConfig.from_properties(
                props, client_id=f"odradek-mirror-{alias}"
            )
        except SecurityConfigError as exc:
            raise ConfigError(f"{alias}: {exc}") from None
    flows: list[Flow] = []
    for key, value in values.items():
        m = _FLOW.match(key)
        if not m or value.strip().lower() != "true":
            continue
        source, target = m.group(1), m.group(2)
        for alias in (source, target):
            if alias not in clusters:
                raise ConfigError(f"{key}: {alias} is not in clusters ({', '.join(aliases)})")
        if source == target:
            raise ConfigError(f"{key}: a cluster cannot mirror into itself")

        def flow_value(name: str, s: str = source, t: str = target) -> str:
            return values.get(f"{s}->{t}.{name}", values.get(name, DEFAULTS[name]))

        flows.append(
            Flow(
                source,
                target,
                _patterns(flow_value("topics"), f"{source}->{target}.topics"),
                _patterns(flow_value("topics.exclude"), f"{source}->{target}.topics.exclude"),
                _patterns(flow_value("groups"), f"{source}->{target}.groups"),
                _patterns(flow_value("groups.exclude"), f"{source}->{target}.groups.exclude"),
            )
        )
    if not flows:
        raise ConfigError("no flow is enabled: set e.g. east->west.enabled = true")
    targets = sorted({f.target for f in flows})
    if len(targets) != 1:
        raise ConfigError(
            f"one mirror process writes to one target cluster; the enabled flows end at "
            f"{', '.join(targets)} (run one mirror per target)"
        )
    try:
        policy = ReplicationPolicy.named(
            values.get("replication.policy.class", DEFAULTS["replication.policy.class"]),
            values.get("replication.policy.separator", "."),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    support = values.get("exactly.once.support", DEFAULTS["exactly.once.support"]).lower()
    if support not in ("enabled", "requested", "disabled"):
        raise ConfigError(
            f"exactly.once.support {support!r}: expected enabled, requested or disabled"
        )
    group_id = values.get("mirror.group.id") or f"odradek-mirror-{targets[0]}"
    return MirrorSettings(clusters, targets[0], tuple(flows), policy, group_id, values)
