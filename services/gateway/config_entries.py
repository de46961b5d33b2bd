"""What DescribeConfigs (and CreateTopics v5+) report for a config: value, source, synonyms.

Pure code: metadata in, entries out, so every rule here is unit-tested without a
cluster. Names and values come from the two catalogs that already exist
(:mod:`odradek.topic_config` for topic configs, the controller's
``broker_defaults`` for cluster-wide broker configs); this module only decides
*where each value comes from*, the way Kafka's ``ConfigHelper`` does:

- a topic override is DYNAMIC_TOPIC_CONFIG;
- a broker config set through AlterConfigs on one broker (``BROKER <storage node
  id>``) is DYNAMIC_BROKER_CONFIG, for that broker only;
- a broker config set through AlterConfigs on the cluster default resource
  (``""``) is DYNAMIC_DEFAULT_BROKER_CONFIG;
- a broker config set in the controller's configuration is STATIC_BROKER_CONFIG;
- anything else is Kafka's default, DEFAULT_CONFIG.

Synonyms are listed in that order of precedence (docs/compatibility.md C19: clients
expect defaults to be listed, with their source).

The controller publishes ``cluster_configs`` as the effective broker values
(Kafka's defaults, static settings and dynamic overrides merged), what was set
dynamically on the default resource (``dynamic_cluster_configs``) and per broker
(``broker_configs``). A value equal to Kafka's default is reported as DEFAULT_CONFIG;
the others are dynamic when the snapshot says so and static otherwise (a static
value a dynamic default hides is not published, so it is not listed as a synonym).

BROKER resource names follow Kafka's checks on the broker a request reaches
(:func:`broker_name_problem`); the gateway's bootstrap listener, which is no one
broker, accepts any registered storage node id.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.definition import ConfigType
from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import common_pb2
from odradek.tls_reload import SENSITIVE, listener_setting
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
    # The lower-precedence layers this value hides (listed as synonyms).
    hidden: tuple[ConfigSynonym, ...] = field(default=(), compare=False)


def _kafka_default(name: str) -> str | None:
    cfg = BROKER_CONFIGS.get(name)
    return cfg.default_text if cfg is not None else None


def broker_settings(
    cluster_configs: Mapping[str, str],
    dynamic: Mapping[str, str] | None = None,
    per_broker: Mapping[str, str] | None = None,
) -> dict[str, BrokerSetting]:
    """The broker configs that differ from Kafka's defaults, with their source.

    ``dynamic`` holds the overrides set through AlterConfigs on the cluster default
    resource; ``per_broker`` those set on the one broker described (DYNAMIC_BROKER_CONFIG).
    """
    dynamic = dynamic or {}
    per_broker = per_broker or {}
    out: dict[str, BrokerSetting] = {}
    for name in sorted({*cluster_configs, *dynamic, *per_broker}):
        layers: list[ConfigSynonym] = []
        if name in per_broker:
            layers.append(ConfigSynonym(name, per_broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in dynamic:
            layers.append(
                ConfigSynonym(name, dynamic[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            )
        elif name in cluster_configs and cluster_configs[name] != _kafka_default(name):
            layers.append(
                ConfigSynonym(name, cluster_configs[name], ConfigSource.STATIC_BROKER_CONFIG)
            )
        if layers:
            top = layers[0]
            out[name] = BrokerSetting(top.value or "", top.source, tuple(layers[1:]))
    return out


def settings_of(
    metadata: common_pb2.ClusterMetadata, broker_id: int | None = None
) -> dict[str, BrokerSetting]:
    """:func:`broker_settings` of a ``ClusterMetadata`` snapshot, for one broker or
    (``broker_id`` None) for the cluster as a whole."""
    own = metadata.broker_configs.get(broker_id) if broker_id is not None else None
    return broker_settings(
        dict(metadata.cluster_configs),
        dict(metadata.dynamic_cluster_configs),
        dict(own.configs) if own is not None else None,
    )


def broker_name_problem(
    name: str, addressed: int | None, registered: Collection[int] | None, *, alter: bool
) -> tuple[ErrorCode, str] | None:
    """Why a BROKER resource name is refused (Kafka's code and message), or None.

    ``addressed`` is the broker whose port the request came in on: as on a Kafka
    broker, the name must be empty (the cluster default) or that broker's id
    (``ConfigHelper`` for DescribeConfigs, ``ConfigAdminManager`` for the alters).
    On the bootstrap listener (None) any id in ``registered`` is accepted, and an
    unknown one is BROKER_ID_NOT_REGISTERED as Kafka's controller answers it
    (``registered`` None: leave that check to the controller).
    """
    if not name:
        return None
    try:
        broker_id = int(name)
    except ValueError:
        what = "Node" if alter else "Broker"
        return ErrorCode.INVALID_REQUEST, f"{what} id must be an integer, but it is: {name}"
    if addressed is None:
        if registered is None or broker_id in registered:
            return None
        return ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {broker_id} found."
    if broker_id == addressed:
        return None
    expected = str(addressed) if alter else f"{addressed} or empty string"
    return (
        ErrorCode.INVALID_REQUEST,
        f"Unexpected broker id, expected {expected}, but received {name}",
    )


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
    """The broker configs of one broker (``settings`` from :func:`settings_of`), sorted.

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
            synonyms.extend(setting.hidden)
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
        # A listener's reconfigurable TLS setting (per broker, KIP-226; odradek.tls_reload).
        listener_tls = listener_setting(name)
        sensitive = listener_tls is not None and listener_tls[1] in SENSITIVE
        if sensitive:
            value = None
            synonyms = [replace(s, value=None) for s in synonyms]
        out.append(
            DescribedConfig(
                name=name,
                value=value,
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                is_sensitive=sensitive,
                read_only=(cfg is None or not cfg.dynamic) and listener_tls is None,
                synonyms=_ranked(synonyms) if include_synonyms else (),
                config_type=cfg.type if cfg is not None else ConfigType.UNKNOWN,
                documentation="",
            )
        )
    return out
