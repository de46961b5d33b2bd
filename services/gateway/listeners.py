"""The gateway's Kafka listeners: ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and the security each protocol brings.

Kafka's syntax: ``NAME://host:port,...`` where NAME is a security protocol (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL) or a name that ``listener.security.protocol.map``
(``NAME:PROTOCOL,...``) maps to one. Per-listener settings may be prefixed as Kafka
does (``listener.name.<name lower-case>.ssl.keystore.location``, and for JAAS-like
per-mechanism keys ``listener.name.<name>.<mechanism>.<key>``), falling back to the
plain name.

A gateway serves several listeners at once (docs/security.md, "Listeners"). Each has
its own bootstrap port and its own set of broker ports (docs/brokers.md), all with
that listener's security; Metadata, FindCoordinator and DescribeCluster answer the
endpoints of the listener a client connected on, as Kafka answers the brokers'
endpoints for the request's listener name. Configuration errors carry Kafka's
messages (KafkaConfig / SocketServerConfigs.listenerListToEndPoints).
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.config import Config, ConfigError
from odradek.sasl.scram import MECHANISMS
from odradek.tls import PrincipalMapper, server_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_MECHANISMS = ("PLAIN", *MECHANISMS)
ANONYMOUS = "User:ANONYMOUS"
# Kafka's default listener.security.protocol.map: each protocol names itself.
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What a listener asks of its connections."""

    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    # The listener's ssl.* settings (listener prefix first): each socket of the listener
    # builds its own reloadable context from them (odradek.tls_reload).
    tls_settings: Callable[[str], str | None] | None = None
    mechanisms: tuple[str, ...] = ()  # SASL mechanisms enabled (empty: no SASL)
    principal_mapper: PrincipalMapper = field(default_factory=lambda: PrincipalMapper(None))
    auth_timeout_s: float = 10.0  # TLS handshake plus SASL exchange must finish by then
    # connections.max.reauth.ms (KIP-368): a SASL session lasts this long (0: forever)
    reauth_ms: int = 0

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


@dataclass(frozen=True, slots=True)
class Listener:
    """One entry of ``listeners``: where it binds, what it advertises, its security."""

    name: str
    host: str
    port: int  # 0: ephemeral
    security: ListenerSecurity
    advertised_host: str
    advertised_port: int  # 0: the bound port
    # Fixed broker ports from this number (0: ephemeral; docs/brokers.md).
    broker_port_start: int = 0


def _split(value: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` (urlsplit refuses the underscore of SASL_SSL)."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        if not sep:
            name, address = "PLAINTEXT", item
        host, colon, port = address.rpartition(":")
        host = host.strip("[]")
        if not colon or not port.isdigit() or not name:
            raise ConfigError(f"Invalid listener {item!r}: expected NAME://host:port")
        out.append((name.upper(), host or "0.0.0.0", int(port)))
    return out


def _check_distinct(value: str, endpoints: list[tuple[str, str, int]]) -> None:
    """Kafka's listenerListToEndPoints: distinct names, distinct ports (0 excepted)."""
    ports = [port for _name, _host, port in endpoints if port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"Each listener must have a different port, listeners: {value}")
    names = [name for name, _host, _port in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener must have a different name, listeners: {value}")


def protocol_map(value: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``; unset, Kafka's default maps each protocol
    to itself (set, it replaces the default, as in Kafka)."""
    if not value or not value.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in PROTOCOLS:
            raise ConfigError(f"Invalid listener.security.protocol.map entry {item!r}")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def listener_security(config: Config, name: str, protocol: str) -> ListenerSecurity:
    """The security of listener ``name``: its ``listener.name.<name>.`` settings, else
    the plain ones."""
    prefix = f"listener.name.{name.lower()}."

    def get(key: str) -> str | None:
        return config.get(prefix + key) or config.get(key)

    ctx = server_context(get) if protocol in ("SSL", "SASL_SSL") else None
    mechanisms: tuple[str, ...] = ()
    if protocol.startswith("SASL_"):
        wanted = get("sasl.enabled.mechanisms") or ",".join(SERVED_MECHANISMS)
        mechanisms = tuple(m.strip().upper() for m in wanted.split(",") if m.strip())
        unknown = [m for m in mechanisms if m not in SERVED_MECHANISMS]
        if unknown or not mechanisms:
            raise ConfigError(
                f"{prefix}sasl.enabled.mechanisms: {', '.join(unknown) or 'none'} not "
                f"supported (served: {', '.join(SERVED_MECHANISMS)})"
            )
    timeout = int(get("authentication.timeout.ms") or 10_000)
    return ListenerSecurity(
        name=name,
        protocol=protocol,
        ssl_context=ctx,
        tls_settings=get if ctx is not None else None,
        mechanisms=mechanisms,
        principal_mapper=PrincipalMapper(get("ssl.principal.mapping.rules")),
        auth_timeout_s=max(0.05, timeout / 1000.0),
        reauth_ms=int(get("connections.max.reauth.ms") or 0),
    )


def parse_listeners(
    config: Config, broker_port_start: int = 0, broker_port_count: int = 0
) -> list[Listener]:
    """The gateway's listeners, in the order of ``listeners``.

    ``broker_port_start`` > 0 (fixed broker ports): the first listener takes that range,
    listener ``i`` the range ``broker_port_start + i * broker_port_count``, unless
    ``listener.name.<name>.broker.port.start`` says otherwise; ranges may not overlap.
    """
    value = config.str("listeners")
    protocols = protocol_map(config.get("listener.security.protocol.map"))
    endpoints = _split(value)
    if not endpoints:
        raise ConfigError("listeners: at least one listener is needed")
    for name, _host, _port in endpoints:
        if name not in protocols:
            raise ConfigError(
                f"Error creating broker listeners from '{value}': "
                f"No security protocol defined for listener {name}"
            )
    _check_distinct(value, endpoints)
    advertised_value = config.get("advertised.listeners") or ""
    advertised: dict[str, tuple[str, int]] = {}
    if advertised_value.strip():
        entries = _split(advertised_value)
        names = [name for name, _h, _p in entries]
        if len(set(names)) != len(names):
            raise ConfigError(
                f"Each listener must have a different name, listeners: {advertised_value}"
            )
        listed = {name for name, _h, _p in endpoints}
        if not set(names) <= listed:
            raise ConfigError(
                "advertised.listeners listener names must be equal to or a subset of the "
                f"ones defined in listeners. Found {','.join(names)}. The valid options "
                f"based on the current configuration are {','.join(n for n, _h, _p in endpoints)}"
            )
        for name, host, port in entries:
            if host in ("0.0.0.0", "::"):
                raise ConfigError(
                    "advertised.listeners cannot use the nonroutable meta-address "
                    f"{host}. Use a routable IP address."
                )
            advertised[name] = (host, port)
    out: list[Listener] = []
    for index, (name, host, port) in enumerate(endpoints):
        own = config.get(f"listener.name.{name.lower()}.broker.port.start")
        start = int(own) if own else 0
        if not own and broker_port_start:
            start = broker_port_start + index * broker_port_count
        adv_host, adv_port = advertised.get(name, (host, 0))
        out.append(
            Listener(
                name=name,
                host=host,
                port=port,
                security=listener_security(config, name, protocols[name]),
                advertised_host=adv_host,
                advertised_port=adv_port,
                broker_port_start=start,
            )
        )
    ranges = sorted((lst.broker_port_start, lst.name) for lst in out if lst.broker_port_start)
    for (low, first), (high, second) in itertools.pairwise(ranges):
        if high < low + broker_port_count:
            raise ConfigError(
                f"the broker ports of listeners {first} and {second} overlap (from {low} "
                f"and {high}, broker.port.count={broker_port_count}): set "
                f"listener.name.{second.lower()}.broker.port.start"
            )
    return out
