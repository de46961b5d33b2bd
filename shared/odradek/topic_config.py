"""A topic's effective configs: override, else broker synonym, else Kafka's default.

The definitions (types, defaults, valid values, broker synonyms) are the catalog
:data:`odradek.config_catalog.topic.TOPIC_CONFIGS`; this module serves
CreateTopics/AlterConfigs validation, DescribeConfigs (value, source and synonyms as
Kafka reports them) and the log layer (:class:`LogConfig`). A topic value comes from,
in order: the topic override (DYNAMIC_TOPIC_CONFIG), the first broker synonym that is
set (STATIC_BROKER_CONFIG, e.g. ``log.retention.ms`` before ``log.retention.minutes``
before ``log.retention.hours``), else Kafka's default (DEFAULT_CONFIG).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from odradek.config_catalog.definition import (
    ConfigDef,
    ConfigType,
    InvalidConfigError,
    TypedValue,
    to_config_string,
)
from odradek.config_catalog.topic import TOPIC_CONFIGS


class ConfigSource(IntEnum):
    """DescribeConfigs ``config_source`` values."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


def _check_cross(values: Mapping[str, TypedValue]) -> None:
    lo = values.get("min.compaction.lag.ms")
    hi = values.get("max.compaction.lag.ms")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        raise InvalidConfigError(
            "min.compaction.lag.ms",
            f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
            f"max.compaction.lag.ms ({hi})",
        )


def validate_topic_configs(configs: Mapping[str, object]) -> dict[str, TypedValue]:
    """Validate CreateTopics/AlterConfigs entries; return them typed.

    ``None`` values are rejected as in Kafka ("Null value not supported").
    """
    typed: dict[str, TypedValue] = {}
    for name, raw in configs.items():
        cfg = TOPIC_CONFIGS.get(name)
        if cfg is None:
            raise InvalidConfigError(name, f"Unknown topic config name: {name}")
        if raw is None:
            raise InvalidConfigError(name, f"Null value not supported for topic configs: {name}")
        typed[name] = cfg.parse(raw)
    _check_cross(typed)
    return typed


def _broker_value(cfg: ConfigDef, broker: Mapping[str, object]) -> tuple[str, TypedValue] | None:
    """The first broker synonym set in ``broker``, converted to the topic's unit."""
    for syn in cfg.synonyms:
        if syn.name in broker and broker[syn.name] is not None:
            raw = broker[syn.name]
            if syn.scale != 1:
                try:
                    scaled: object = int(str(raw).strip()) * syn.scale
                except ValueError:
                    raise InvalidConfigError(
                        syn.name,
                        f"Invalid value {raw} for configuration {syn.name}: Not a number of type LONG",
                    ) from None
            else:
                scaled = raw
            return syn.name, cfg.parse(scaled)
    return None


def resolve(
    overrides: Mapping[str, object] | None = None,
    broker_defaults: Mapping[str, object] | None = None,
) -> dict[str, TypedValue]:
    """Effective typed value of every topic config."""
    topic = validate_topic_configs(overrides or {})
    broker = broker_defaults or {}
    out: dict[str, TypedValue] = {}
    for name, cfg in TOPIC_CONFIGS.items():
        if name in topic:
            out[name] = topic[name]
            continue
        found = _broker_value(cfg, broker)
        out[name] = found[1] if found is not None else TOPIC_CONFIGS.value(name)
    _check_cross(out)
    return out


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class DescribedConfig:
    """One DescribeConfigs entry (fields named as in the response)."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    is_sensitive: bool
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: ConfigType = ConfigType.UNKNOWN
    documentation: str = ""

    def __iter__(self) -> Iterator[Any]:
        """Unpacks as ``(name, value, source, is_default, is_sensitive, read_only, synonyms)``."""
        return iter(
            (
                self.name,
                self.value,
                self.source,
                self.is_default,
                self.is_sensitive,
                self.read_only,
                self.synonyms,
            )
        )


def describe(
    overrides: Mapping[str, object] | None = None,
    broker_defaults: Mapping[str, object] | None = None,
    *,
    include_synonyms: bool = True,
) -> list[DescribedConfig]:
    """Every topic config with its effective value, source and synonyms, sorted by name.

    Unpacks as ``(name, value, source, is_default, is_sensitive, read_only, synonyms, ...)``.
    """
    topic = validate_topic_configs(overrides or {})
    broker = broker_defaults or {}
    result: list[DescribedConfig] = []
    for name in sorted(TOPIC_CONFIGS):
        cfg = TOPIC_CONFIGS[name]
        syns: list[ConfigSynonym] = []
        if name in topic:
            syns.append(
                ConfigSynonym(
                    name, to_config_string(topic[name]), ConfigSource.DYNAMIC_TOPIC_CONFIG
                )
            )
        for syn in cfg.synonyms:
            if syn.name in broker and broker[syn.name] is not None:
                syns.append(
                    ConfigSynonym(
                        syn.name,
                        to_config_string(broker[syn.name]),
                        ConfigSource.STATIC_BROKER_CONFIG,
                    )
                )
        if cfg.default_synonym is not None:
            syns.append(
                ConfigSynonym(
                    cfg.default_synonym[0], cfg.default_synonym[1], ConfigSource.DEFAULT_CONFIG
                )
            )
        if name in topic:
            value: TypedValue = topic[name]
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            found = _broker_value(cfg, broker)
            if found is not None:
                value, source = found[1], ConfigSource.STATIC_BROKER_CONFIG
            else:
                value, source = TOPIC_CONFIGS.value(name), ConfigSource.DEFAULT_CONFIG
        result.append(
            DescribedConfig(
                name=name,
                value=to_config_string(value),
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                is_sensitive=False,
                read_only=False,
                synonyms=tuple(syns) if include_synonyms else (),
                config_type=cfg.type,
                documentation=cfg.doc,
            )
        )
    return result


_TOPIC = TOPIC_CONFIGS


def _attr(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class LogConfig:
    """Effective topic configs as the log layer reads them (Kafka names with ``_`` for ``.``).

    Defaults are the catalog's (Kafka's); tests build small logs with
    ``LogConfig(segment_bytes=4096, ...)``.
    """

    cleanup_policy: tuple[str, ...] = _TOPIC.strings("cleanup.policy")
    compression_type: str = _TOPIC.str("compression.type")
    compression_gzip_level: int = _TOPIC.int("compression.gzip.level")
    compression_lz4_level: int = _TOPIC.int("compression.lz4.level")
    compression_zstd_level: int = _TOPIC.int("compression.zstd.level")
    delete_retention_ms: int = _TOPIC.int("delete.retention.ms")
    file_delete_delay_ms: int = _TOPIC.int("file.delete.delay.ms")
    flush_messages: int = _TOPIC.int("flush.messages")
    flush_ms: int = _TOPIC.int("flush.ms")
    follower_replication_throttled_replicas: tuple[str, ...] = _TOPIC.strings(
        "follower.replication.throttled.replicas"
    )
    index_interval_bytes: int = _TOPIC.int("index.interval.bytes")
    leader_replication_throttled_replicas: tuple[str, ...] = _TOPIC.strings(
        "leader.replication.throttled.replicas"
    )
    max_compaction_lag_ms: int = _TOPIC.int("max.compaction.lag.ms")
    max_message_bytes: int = _TOPIC.int("max.message.bytes")
    message_timestamp_after_max_ms: int = _TOPIC.int("message.timestamp.after.max.ms")
    message_timestamp_before_max_ms: int = _TOPIC.int("message.timestamp.before.max.ms")
    message_timestamp_type: str = _TOPIC.str("message.timestamp.type")
    min_cleanable_dirty_ratio: float = _TOPIC.float("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _TOPIC.int("min.compaction.lag.ms")
    min_insync_replicas: int = _TOPIC.int("min.insync.replicas")
    preallocate: bool = _TOPIC.bool("preallocate")
    retention_bytes: int = _TOPIC.int("retention.bytes")
    retention_ms: int = _TOPIC.int("retention.ms")
    segment_bytes: int = _TOPIC.int("segment.bytes")
    segment_index_bytes: int = _TOPIC.int("segment.index.bytes")
    segment_jitter_ms: int = _TOPIC.int("segment.jitter.ms")
    segment_ms: int = _TOPIC.int("segment.ms")
    unclean_leader_election_enable: bool = _TOPIC.bool("unclean.leader.election.enable")
    overrides: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @classmethod
    def from_topic_configs(
        cls,
        overrides: Mapping[str, object] | None = None,
        broker_defaults: Mapping[str, object] | None = None,
    ) -> LogConfig:
        values = resolve(overrides, broker_defaults)
        kwargs: dict[str, Any] = {}
        for name, value in values.items():
            kwargs[_attr(name)] = tuple(value) if isinstance(value, list) else value
        kwargs["overrides"] = tuple(
            sorted((k, to_config_string(v)) for k, v in (overrides or {}).items() if v is not None)
        )
        return cls(**kwargs)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def max_index_entries(self, entry_size: int) -> int:
        return max(1, self.segment_index_bytes // entry_size)
