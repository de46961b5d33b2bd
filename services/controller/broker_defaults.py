"""Checking the cluster-wide broker settings the controller owns and publishes.

The settings themselves (names, types, Kafka's defaults, which may change at run time)
are the catalog :data:`odradek.config_catalog.broker.BROKER_CONFIGS`; the controller is
the one place they are configured, and publishes the effective values in
``ClusterMetadata.cluster_configs``. This module validates them as Kafka does, with
INVALID_CONFIG errors: type and bound, then the range of the topic config a ``log.*``
synonym sets (``log.segment.bytes`` -> ``segment.bytes``, through
:mod:`odradek.topic_config`).
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.definition import ConfigDef, ConfigType, InvalidConfigError
from odradek.controller.errors import ControllerError
from odradek.protocol.errors import ErrorCode
from odradek.tls_reload import RECONFIGURABLE, listener_setting
from odradek.topic_config import resolve


def _parse(config: ConfigDef, raw: str) -> object:
    """Check type and lower bound; raise INVALID_CONFIG as Kafka words it."""
    try:
        return config.parse(raw)
    except InvalidConfigError as exc:
        raise ControllerError(ErrorCode.INVALID_CONFIG, exc.message) from None


def validate_value(name: str, value: str) -> None:
    """Type, bound and (for log defaults) topic-synonym range checks for one setting."""
    config = BROKER_CONFIGS.get(name)
    if config is None:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown broker config: {name}")
    _parse(config, value)
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


def check_dynamic_update(name: str, value: str | None, *, per_broker: bool = False) -> None:
    """Whether AlterConfigs may set (or delete, ``value=None``) this cluster default, or
    with ``per_broker`` this one broker's config.

    A listener's reconfigurable TLS settings (``listener.name.<l>.ssl.keystore.location``
    and the rest of Kafka's ``SslConfigs.RECONFIGURABLE_CONFIGS``, KIP-226) are per
    broker only, and only with the listener prefix, as Kafka's
    ``DynamicBrokerConfig.validateConfigs`` demands; the gateways apply them
    (docs/security.md, "Certificate reload").
    """
    if listener_setting(name) is not None:
        if not per_broker:
            raise ControllerError(
                ErrorCode.INVALID_CONFIG,
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: Set({name})",
            )
        return
    if name in RECONFIGURABLE:
        raise ControllerError(
            ErrorCode.INVALID_CONFIG,
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: Set({name})",
        )
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
