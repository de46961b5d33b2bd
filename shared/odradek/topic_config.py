"""Topic-level configs by Kafka's names: types, defaults, valid values and broker synonyms.

One catalog serves CreateTopics/AlterConfigs validation, DescribeConfigs (value,
source and synonyms as Kafka reports them) and the log layer (:class:`LogConfig`).
A topic value comes from, in order: the topic override (DYNAMIC_TOPIC_CONFIG), the
first broker synonym that is set (STATIC_BROKER_CONFIG, e.g. ``log.retention.ms``
before ``log.retention.minutes`` before ``log.retention.hours``), else Kafka's
default (DEFAULT_CONFIG).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

TypedValue = int | float | bool | str | list[str]


class InvalidConfigError(ValueError):
    """A config name or value Kafka would reject (Kafka: INVALID_CONFIG)."""

    kafka_error = "INVALID_CONFIG"

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


class ConfigSource(IntEnum):
    """DescribeConfigs ``config_source`` values."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type`` values."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True)
class BrokerSynonym:
    """A broker config that sets the topic default; ``scale`` converts its unit to the topic's."""

    name: str
    scale: int = 1


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: TypedValue
    doc: str
    synonyms: tuple[BrokerSynonym, ...] = ()
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str, ...] | None = None  # exact (case-sensitive) allowed strings
    case_insensitive: bool = False
    # The broker config (and its own default) that Kafka lists as the DEFAULT_CONFIG synonym.
    default_synonym: tuple[str, str] | None = None

    def parse(self, raw: object) -> TypedValue:
        """Turn a string (or an already typed value) into the typed value, validating it."""
        value = _parse_type(self, raw)
        _validate(self, value, raw)
        return value


def _fail(cfg: ConfigDef, raw: object, reason: str) -> InvalidConfigError:
    return InvalidConfigError(
        cfg.name, f"Invalid value {_raw_str(raw)} for configuration {cfg.name}: {reason}"
    )


def _raw_str(raw: object) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, list):
        return ",".join(str(x) for x in raw)
    return str(raw)


def _parse_type(cfg: ConfigDef, raw: object) -> TypedValue:
    t = cfg.type
    if t in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        if isinstance(raw, bool):
            raise _fail(cfg, raw, f"Not a number of type {t.name}")
        if isinstance(raw, int):
            number = raw
        else:
            text = str(raw).strip()
            try:
                number = int(text, 10)
            except ValueError:
                raise _fail(cfg, raw, f"Not a number of type {t.name}") from None
        limit = {ConfigType.INT: 31, ConfigType.LONG: 63, ConfigType.SHORT: 15}[t]
        if not -(1 << limit) <= number < (1 << limit):
            raise _fail(cfg, raw, f"Not a number of type {t.name}")
        return number
    if t is ConfigType.DOUBLE:
        if isinstance(raw, bool):
            raise _fail(cfg, raw, "Not a number of type DOUBLE")
        try:
            d = float(str(raw).strip()) if not isinstance(raw, (int, float)) else float(raw)
        except ValueError:
            raise _fail(cfg, raw, "Not a number of type DOUBLE") from None
        if math.isnan(d):
            raise _fail(cfg, raw, "Not a number of type DOUBLE")
        return d
    if t is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
        raise _fail(cfg, raw, "Expected value to be either true or false")
    if t is ConfigType.LIST:
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw]
        text = str(raw).strip()
        return [] if not text else [part.strip() for part in text.split(",")]
    return str(raw).strip()


def _validate(cfg: ConfigDef, value: TypedValue, raw: object) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if cfg.at_least is not None and value < cfg.at_least:
            shown = _bound(cfg, cfg.at_least)
            raise _fail(cfg, raw, f"Value must be at least {shown}")
        if cfg.at_most is not None and value > cfg.at_most:
            shown = _bound(cfg, cfg.at_most)
            raise _fail(cfg, raw, f"Value must be no more than {shown}")
    if cfg.one_of is not None:
        items = value if isinstance(value, list) else [str(value)]
        allowed = cfg.one_of
        for item in items:
            ok = (
                item.lower() in {a.lower() for a in allowed}
                if cfg.case_insensitive
                else item in allowed
            )
            if not ok:
                raise _fail(cfg, raw, f"String must be one of: {', '.join(allowed)}")


def _bound(cfg: ConfigDef, bound: float) -> str:
    return str(float(bound)) if cfg.type is ConfigType.DOUBLE else str(int(bound))


def _def(
    name: str,
    type_: ConfigType,
    default: TypedValue,
    doc: str,
    synonyms: tuple[str | BrokerSynonym, ...] = (),
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    one_of: tuple[str, ...] | None = None,
    case_insensitive: bool = False,
    default_synonym: tuple[str, str] | None = None,
) -> ConfigDef:
    syns = tuple(s if isinstance(s, BrokerSynonym) else BrokerSynonym(s) for s in synonyms)
    if default_synonym is None and syns:
        default_synonym = (syns[0].name, _raw_str(default))
    return ConfigDef(
        name,
        type_,
        default,
        doc,
        syns,
        at_least,
        at_most,
        one_of,
        case_insensitive,
        default_synonym,
    )


_L, _I, _D, _B, _S, _LIST = (
    ConfigType.LONG,
    ConfigType.INT,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
)
_HOUR = 3_600_000
_MINUTE = 60_000

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in (
        _def(
            "cleanup.policy",
            _LIST,
            ["delete"],
            "Retention policy: delete old segments and/or compact by key.",
            ("log.cleanup.policy",),
            one_of=("compact", "delete"),
        ),
        _def(
            "compression.type",
            _S,
            "producer",
            "Final codec of stored batches; 'producer' keeps the producer's.",
            ("compression.type",),
            one_of=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            case_insensitive=True,
        ),
        _def(
            "compression.gzip.level",
            _I,
            -1,
            "gzip level when compression.type=gzip.",
            ("compression.gzip.level",),
            at_least=-1,
            at_most=9,
        ),
        _def(
            "compression.lz4.level",
            _I,
            9,
            "lz4 level when compression.type=lz4.",
            ("compression.lz4.level",),
            at_least=1,
            at_most=17,
        ),
        _def(
            "compression.zstd.level",
            _I,
            3,
            "zstd level when compression.type=zstd.",
            ("compression.zstd.level",),
            at_least=-131072,
            at_most=22,
        ),
        _def(
            "delete.retention.ms",
            _L,
            86_400_000,
            "How long tombstones survive in compacted topics.",
            ("log.cleaner.delete.retention.ms",),
            at_least=0,
        ),
        _def(
            "file.delete.delay.ms",
            _L,
            60_000,
            "Delay before a .deleted segment file is removed.",
            ("log.segment.delete.delay.ms",),
            at_least=0,
        ),
        _def(
            "flush.messages",
            _L,
            LONG_MAX,
            "fsync after this many messages.",
            ("log.flush.interval.messages",),
            at_least=1,
        ),
        _def(
            "flush.ms",
            _L,
            LONG_MAX,
            "fsync when data is older than this.",
            ("log.flush.interval.ms",),
            at_least=0,
        ),
        _def(
            "follower.replication.throttled.replicas",
            _LIST,
            [],
            "Throttled follower replicas.",
            ("follower.replication.throttled.replicas",),
        ),
        _def(
            "index.interval.bytes",
            _I,
            4096,
            "Bytes of log between offset index entries.",
            ("log.index.interval.bytes",),
            at_least=0,
        ),
        _def(
            "leader.replication.throttled.replicas",
            _LIST,
            [],
            "Throttled leader replicas.",
            ("leader.replication.throttled.replicas",),
        ),
        _def(
            "max.compaction.lag.ms",
            _L,
            LONG_MAX,
            "Longest a record may stay uncompacted.",
            ("log.cleaner.max.compaction.lag.ms",),
            at_least=1,
        ),
        _def(
            "max.message.bytes",
            _I,
            1_048_588,
            "Largest record batch the topic accepts.",
            ("message.max.bytes",),
            at_least=0,
        ),
        _def(
            "message.timestamp.after.max.ms",
            _L,
            LONG_MAX,
            "Largest allowed lead of a CreateTime over the broker clock.",
            ("log.message.timestamp.after.max.ms",),
            at_least=0,
        ),
        _def(
            "message.timestamp.before.max.ms",
            _L,
            LONG_MAX,
            "Largest allowed lag of a CreateTime behind the broker clock.",
            ("log.message.timestamp.before.max.ms",),
            at_least=0,
        ),
        _def(
            "message.timestamp.type",
            _S,
            "CreateTime",
            "Whether batches keep CreateTime or get LogAppendTime.",
            ("log.message.timestamp.type",),
            one_of=("CreateTime", "LogAppendTime"),
        ),
        _def(
            "min.cleanable.dirty.ratio",
            _D,
            0.5,
            "Dirty fraction of the log that triggers compaction.",
            ("log.cleaner.min.cleanable.ratio",),
            at_least=0.0,
            at_most=1.0,
        ),
        _def(
            "min.compaction.lag.ms",
            _L,
            0,
            "Records younger than this are not compacted.",
            ("log.cleaner.min.compaction.lag.ms",),
            at_least=0,
        ),
        _def(
            "min.insync.replicas",
            _I,
            1,
            "Replicas that must acknowledge an acks=all write.",
            ("min.insync.replicas",),
            at_least=1,
        ),
        _def(
            "preallocate",
            _B,
            False,
            "Preallocate segment files at roll.",
            ("log.preallocate",),
        ),
        _def(
            "retention.bytes",
            _L,
            -1,
            "Size above which old segments are deleted (-1: no limit).",
            ("log.retention.bytes",),
        ),
        _def(
            "retention.ms",
            _L,
            604_800_000,
            "Age after which old segments are deleted (-1: no limit).",
            (
                "log.retention.ms",
                BrokerSynonym("log.retention.minutes", _MINUTE),
                BrokerSynonym("log.retention.hours", _HOUR),
            ),
            at_least=-1,
            default_synonym=("log.retention.hours", "168"),
        ),
        _def(
            "segment.bytes",
            _I,
            1_073_741_824,
            "Size at which a segment is rolled.",
            ("log.segment.bytes",),
            at_least=14,
        ),
        _def(
            "segment.index.bytes",
            _I,
            10_485_760,
            "Preallocated size of each segment's indexes.",
            ("log.index.size.max.bytes",),
            at_least=4,
        ),
        _def(
            "segment.jitter.ms",
            _L,
            0,
            "Random jitter subtracted from segment.ms.",
            ("log.roll.jitter.ms", BrokerSynonym("log.roll.jitter.hours", _HOUR)),
            at_least=0,
            default_synonym=("log.roll.jitter.hours", "0"),
        ),
        _def(
            "segment.ms",
            _L,
            604_800_000,
            "Age at which a segment is rolled.",
            ("log.roll.ms", BrokerSynonym("log.roll.hours", _HOUR)),
            at_least=1,
            default_synonym=("log.roll.hours", "168"),
        ),
        _def(
            "unclean.leader.election.enable",
            _B,
            False,
            "Allow out-of-sync replicas to become leader.",
            ("unclean.leader.election.enable",),
        ),
    )
}


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
        out[name] = found[1] if found is not None else cfg.default
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


def to_config_string(value: TypedValue) -> str:
    """Kafka's string form of a typed value (lists comma-joined, booleans lower-case)."""
    return _raw_str(value)


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
                        syn.name, _raw_str(broker[syn.name]), ConfigSource.STATIC_BROKER_CONFIG
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
                value, source = cfg.default, ConfigSource.DEFAULT_CONFIG
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


def _attr(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class LogConfig:
    """Effective topic configs as the log layer reads them (Kafka names with ``_`` for ``.``).

    Defaults are Kafka's; tests build small logs with ``LogConfig(segment_bytes=4096, ...)``.
    """

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000
    unclean_leader_election_enable: bool = False
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
            sorted((k, _raw_str(v)) for k, v in (overrides or {}).items() if v is not None)
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
