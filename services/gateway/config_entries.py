"""What DescribeConfigs (and CreateTopics v5+) report for a config: value, source, synonyms.

Pure code: metadata in, entries out, so every rule here is unit-tested without a
cluster. Names and values come from the two catalogs that already exist
(:mod:`odradek.topic_config` for topic configs, the controller's
``broker_defaults`` for cluster-wide broker configs); this module only decides
*where each value comes from*, the way Kafka's ``ConfigHelper`` does:

- a topic override is DYNAMIC_TOPIC_CONFIG;
- a broker config set through AlterConfigs on the cluster default resource
  (``""``) is DYNAMIC_DEFAULT_BROKER_CONFIG;
- a broker config set in the controller's configuration is STATIC_BROKER_CONFIG;
- anything else is Kafka's default, DEFAULT_CONFIG.

Synonyms are listed in that order of precedence (docs/compatibility.md C19: clients
expect defaults to be listed, with their source).

The controller publishes ``cluster_configs`` as the effective broker values
(Kafka's defaults, static settings and dynamic overrides merged). A value equal to
Kafka's default is reported as DEFAULT_CONFIG; the others are dynamic when the
snapshot says so (``dynamic_cluster_configs``, when the controller publishes it)
and static otherwise.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.definition import ConfigType
from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.rpc.v1 import common_pb2
from odradek.topic_config import ConfigSource, ConfigSynonym, DescribedConfig, describe

__all__ = [
    "BrokerSetting",
    "ResourceType",
    "broker_config_entries",
    "broker_name_problem",
    "broker_settings",
    "selected",
    "settings_of",
    "topic_config_entries",
]


class ResourceType(IntEnum):
    """Kafka's ``ConfigResource.Type`` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32

    @classmethod
    def name_of(cls, value: int) -> str:
        try:
            return cls(value).name
        except ValueError:
            return "UNKNOWN"


# Kafka's precedence: per-broker dynamic, cluster-default dynamic, static, default.
_RANK = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG: 0,
    ConfigSource.DYNAMIC_BROKER_CONFIG: 1,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: 2,
    ConfigSource.STATIC_BROKER_CONFIG: 3,
    ConfigSource.DEFAULT_CONFIG: 4,
}


@dataclass(frozen=True)
class BrokerSetting:
    """A broker config set above Kafka's default, and how it was set."""

    value: str
    source: ConfigSource


def _kafka_default(name: str) -> str | None:
    cfg = BROKER_CONFIGS.get(name)
    return cfg.default_text if cfg is not None else None


def broker_settings(
    cluster_configs: Mapping[str, str], dynamic: Mapping[str, str] | None = None
) -> dict[str, BrokerSetting]:
    """The broker configs that differ from Kafka's defaults, with their source.

    ``dynamic`` holds the overrides set through AlterConfigs on the cluster default
    resource; None when the metadata does not tell them apart from static settings.
    """
    dynamic = dynamic or {}
    out: dict[str, BrokerSetting] = {}
    for name, value in cluster_configs.items():
        if name in dynamic:
            out[name] = BrokerSetting(dynamic[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        elif value != _kafka_default(name):
            out[name] = BrokerSetting(value, ConfigSource.STATIC_BROKER_CONFIG)
    for name, value in dynamic.items():
        if name not in out:
            out[name] = BrokerSetting(value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    return out


def settings_of(metadata: common_pb2.ClusterMetadata) -> dict[str, BrokerSetting]:
    """:func:`broker_settings` of a ``ClusterMetadata`` snapshot."""
    dynamic = getattr(metadata, "dynamic_cluster_configs", None)
    return broker_settings(
        dict(metadata.cluster_configs), dict(dynamic) if dynamic is not None else None
    )


def broker_name_problem(
    name: str, own_id: int, gateway_ids: Collection[int], *, empty_allowed: bool
) -> str | None:
    """Why a BROKER resource name names no gateway (Kafka's INVALID_REQUEST message), or None.

    Every online gateway's id is accepted: they all share one configuration.
    """
    if not name:
        return None if empty_allowed else "Broker id must not be empty"
    try:
        broker_id = int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    if broker_id == own_id or broker_id in gateway_ids:
        return None
    expected = f"{own_id} or empty string" if empty_allowed else str(own_id)
    return f"Unexpected broker id, expected {expected}, but received {name}"


def selected(keys: Collection[str] | None) -> frozenset[str] | None:
    """The ``configuration_keys`` filter: None or empty means every config (as Kafka)."""
    return frozenset(keys) if keys else None


def _ranked(synonyms: list[ConfigSynonym]) -> tuple[ConfigSynonym, ...]:
    return tuple(sorted(synonyms, key=lambda s: _RANK.get(s.source, 5)))


def topic_config_entries(
    overrides: Mapping[str, str],
    settings: Mapping[str, BrokerSetting],
    *,
    include_synonyms: bool,
    keys: frozenset[str] | None = None,
) -> list[DescribedConfig]:
    """Every topic config of one topic, sorted by name, as DescribeConfigs lists them.

    Raises :class:`odradek.config_catalog.definition.InvalidConfigError` if stored values are
    invalid (the controller validates them, so that is a bug worth surfacing).
    """
    broker_values = {name: s.value for name, s in settings.items()}
    out: list[DescribedConfig] = []
    for entry in describe(overrides, broker_values, include_synonyms=True):
        if keys is not None and entry.name not in keys:
            continue
        source = entry.source
        if source is ConfigSource.STATIC_BROKER_CONFIG:
            # The catalog resolved the value from the first broker synonym that is set.
            for syn in TOPIC_CONFIGS[entry.name].synonyms:
                if syn.name in settings:
                    source = settings[syn.name].source
                    break
        synonyms = [
            replace(s, source=settings[s.name].source)
            if s.source is ConfigSource.STATIC_BROKER_CONFIG and s.name in settings
            else s
            for s in entry.synonyms
        ]
        out.append(
            replace(
                entry,
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                synonyms=_ranked(synonyms) if include_synonyms else (),
            )
        )
    return out


def broker_config_entries(
    settings: Mapping[str, BrokerSetting],
    *,
    include_synonyms: bool,
    dynamic_defaults_only: bool = False,
    keys: frozenset[str] | None = None,
) -> list[DescribedConfig]:
    """The cluster-wide broker configs, sorted by name.

    ``dynamic_defaults_only`` answers the cluster default resource (name ``""``):
    Kafka lists only what was set dynamically there, with only those synonyms.
    """
    names = sorted(set(BROKER_CONFIGS) | set(settings))
    out: list[DescribedConfig] = []
    for name in names:
        if keys is not None and name not in keys:
            continue
        cfg = BROKER_CONFIGS.get(name)
        setting = settings.get(name)
        default = cfg.default_text if cfg is not None else None
        synonyms: list[ConfigSynonym] = []
        if setting is not None:
            synonyms.append(ConfigSynonym(name, setting.value, setting.source))
        if default is not None:
            synonyms.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
        if dynamic_defaults_only:
            synonyms = [
                s for s in synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            ]
            if not synonyms:
                continue
        value, source = (
            (setting.value, setting.source)
            if setting is not None
            else (default, ConfigSource.DEFAULT_CONFIG)
        )
        out.append(
            DescribedConfig(
                name=name,
                value=value,
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                is_sensitive=False,
                read_only=cfg is None or not cfg.dynamic,
                synonyms=_ranked(synonyms) if include_synonyms else (),
                config_type=cfg.type if cfg is not None else ConfigType.UNKNOWN,
                documentation="",
            )
        )
    return out
