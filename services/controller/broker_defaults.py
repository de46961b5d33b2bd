"""Cluster-wide broker settings the controller owns and publishes.

The controller is the one place these are configured; it publishes the effective
values in ``ClusterMetadata.cluster_configs`` so every gateway, storage node and
coordinator applies the same ``num.partitions``, ``min.insync.replicas``, ``log.*``
defaults and so on. Names, defaults and which ones may change at run time
("cluster-wide" update mode in Kafka's docs, via AlterConfigs on the default
broker resource) are Kafka's. Topic-level synonyms (``log.segment.bytes`` ->
``segment.bytes``) are range-checked through :mod:`odradek.topic_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.controller.errors import ControllerError
from odradek.protocol.errors import ErrorCode
from odradek.topic_config import LONG_MAX, ConfigDef, ConfigType, InvalidConfigError, resolve

_INT, _LONG, _SHORT, _BOOL, _DOUBLE, _STRING, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.SHORT,
    ConfigType.BOOLEAN,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
)


@dataclass(frozen=True)
class BrokerConfig:
    name: str
    type: ConfigType
    default: str | None  # None: unset unless configured (Kafka's null default)
    dynamic: bool = False  # may be altered at run time on the cluster default resource
    at_least: int | None = None

    def parse(self, raw: str) -> object:
        """Check type and lower bound; raise INVALID_CONFIG as Kafka words it."""
        definition = ConfigDef(self.name, self.type, "", "", at_least=self.at_least)
        try:
            return definition.parse(raw)
        except InvalidConfigError as exc:
            raise ControllerError(ErrorCode.INVALID_CONFIG, exc.message) from None


def _c(
    name: str,
    type_: ConfigType,
    default: object,
    *,
    dynamic: bool = False,
    at_least: int | None = None,
) -> BrokerConfig:
    text = (
        None
        if default is None
        else ("true" if default is True else "false" if default is False else str(default))
    )
    return BrokerConfig(name, type_, text, dynamic, at_least)


BROKER_CONFIGS: dict[str, BrokerConfig] = {
    c.name: c
    for c in (
        # topics and partitions
        _c("num.partitions", _INT, 1, at_least=1),
        _c("default.replication.factor", _SHORT, 1, at_least=1),
        _c("auto.create.topics.enable", _BOOL, True),
        _c("delete.topic.enable", _BOOL, True),
        _c("min.insync.replicas", _INT, 1, dynamic=True, at_least=1),
        _c("unclean.leader.election.enable", _BOOL, False, dynamic=True),
        _c("message.max.bytes", _INT, 1_048_588, dynamic=True, at_least=0),
        _c("compression.type", _STRING, "producer", dynamic=True),
        _c("replica.lag.time.max.ms", _LONG, 30_000, at_least=1),
        _c("auto.leader.rebalance.enable", _BOOL, True),
        _c("leader.imbalance.check.interval.seconds", _LONG, 300, at_least=1),
        _c("leader.imbalance.per.broker.percentage", _INT, 10, at_least=0),
        # consumer groups
        _c("offsets.topic.num.partitions", _INT, 50, at_least=1),
        _c("offsets.topic.replication.factor", _SHORT, 3, at_least=1),
        _c("offsets.topic.segment.bytes", _INT, 104_857_600, at_least=1),
        _c("offsets.retention.minutes", _INT, 10_080, at_least=1),
        _c("offsets.commit.timeout.ms", _INT, 5_000, at_least=1),
        _c("group.initial.rebalance.delay.ms", _INT, 3_000, at_least=0),
        _c("group.min.session.timeout.ms", _INT, 6_000, at_least=0),
        _c("group.max.session.timeout.ms", _INT, 1_800_000, at_least=0),
        _c("group.max.size", _INT, 2_147_483_647, at_least=1),
        # log defaults (topic-level synonyms)
        _c("log.segment.bytes", _INT, 1_073_741_824, dynamic=True, at_least=14),
        _c("log.retention.hours", _INT, 168),
        _c("log.retention.minutes", _INT, None),
        _c("log.retention.ms", _LONG, None, dynamic=True),
        _c("log.retention.bytes", _LONG, -1, dynamic=True),
        _c("log.roll.hours", _INT, 168, at_least=1),
        _c("log.roll.ms", _LONG, None, dynamic=True),
        _c("log.roll.jitter.hours", _INT, 0, at_least=0),
        _c("log.roll.jitter.ms", _LONG, None, dynamic=True),
        _c("log.cleanup.policy", _LIST, "delete", dynamic=True),
        _c("log.index.size.max.bytes", _INT, 10_485_760, dynamic=True, at_least=4),
        _c("log.index.interval.bytes", _INT, 4096, dynamic=True, at_least=0),
        _c("log.flush.interval.messages", _LONG, LONG_MAX, dynamic=True, at_least=1),
        _c("log.flush.interval.ms", _LONG, None, dynamic=True),
        _c("log.message.timestamp.type", _STRING, "CreateTime", dynamic=True),
        _c("log.message.timestamp.before.max.ms", _LONG, LONG_MAX, dynamic=True, at_least=0),
        _c("log.message.timestamp.after.max.ms", _LONG, LONG_MAX, dynamic=True, at_least=0),
        _c("log.cleaner.enable", _BOOL, True),
        _c("log.cleaner.backoff.ms", _LONG, 15_000, dynamic=True, at_least=0),
        _c("log.cleaner.delete.retention.ms", _LONG, 86_400_000, dynamic=True, at_least=0),
        _c("log.cleaner.min.compaction.lag.ms", _LONG, 0, dynamic=True, at_least=0),
        _c("log.cleaner.max.compaction.lag.ms", _LONG, LONG_MAX, dynamic=True, at_least=1),
        _c("log.cleaner.min.cleanable.ratio", _DOUBLE, 0.5, dynamic=True),
        _c("log.segment.delete.delay.ms", _LONG, 60_000, dynamic=True, at_least=0),
        _c("log.preallocate", _BOOL, False, dynamic=True),
        _c("log.retention.check.interval.ms", _LONG, 300_000, at_least=1),
    )
}


def defaults() -> dict[str, str]:
    """Kafka's defaults for every catalogued setting that has one."""
    return {c.name: c.default for c in BROKER_CONFIGS.values() if c.default is not None}


def validate_value(name: str, value: str) -> None:
    """Type, bound and (for log defaults) topic-synonym range checks for one setting."""
    config = BROKER_CONFIGS.get(name)
    if config is None:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown broker config: {name}")
    config.parse(value)
    try:
        resolve(None, {name: value})
    except InvalidConfigError as exc:
        raise ControllerError(ErrorCode.INVALID_CONFIG, exc.message) from None


def static_values(config: Mapping[str, str]) -> dict[str, str]:
    """The catalogued settings present in a service config, validated."""
    out: dict[str, str] = {}
    for name in BROKER_CONFIGS:
        value = config.get(name)
        if value is not None and value != "":
            validate_value(name, value)
            out[name] = value
    return out


def check_dynamic_update(name: str, value: str | None) -> None:
    """Whether AlterConfigs may set (or delete, ``value=None``) this cluster default."""
    config = BROKER_CONFIGS.get(name)
    if config is None:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown broker config: {name}")
    if not config.dynamic:
        raise ControllerError(
            ErrorCode.INVALID_CONFIG, f"Cannot update these configs dynamically: Set({name})"
        )
    if value is not None:
        validate_value(name, value)


def is_list(name: str) -> bool:
    config = BROKER_CONFIGS.get(name)
    return config is not None and config.type is ConfigType.LIST
