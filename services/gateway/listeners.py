"""The gateway's Kafka listener: ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and the security each protocol brings.

Kafka's syntax: ``NAME://host:port`` where NAME is a security protocol (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL) or a name that ``listener.security.protocol.map``
(``NAME:PROTOCOL,...``) maps to one. Per-listener settings may be prefixed as Kafka
does (``listener.name.<name lower-case>.ssl.keystore.location``), falling back to
the plain name.

One listener per gateway: its security applies to the bootstrap port and to every
broker port (docs/brokers.md), since Metadata advertises the broker ports to the
clients of that listener. Several listeners (e.g. PLAINTEXT and SASL_SSL side by
side) would need a set of broker ports per listener; until then a second listener
is refused at start-up rather than silently ignored.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from odradek.config import Config, ConfigError
from odradek.sasl.scram import MECHANISMS
from odradek.tls import PrincipalMapper, server_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_MECHANISMS = ("PLAIN", *MECHANISMS)
ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What a listener asks of its connections."""

    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()  # SASL mechanisms enabled (empty: no SASL)
    principal_mapper: PrincipalMapper = field(default_factory=lambda: PrincipalMapper(None))
    auth_timeout_s: float = 10.0  # TLS handshake plus SASL exchange must finish by then
    # connections.max.reauth.ms (KIP-368): a SASL session lasts this long (0: forever)
    reauth_ms: int = 0

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


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


def protocol_map(value: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``; Kafka's default maps each protocol to itself."""
    out = {p: p for p in PROTOCOLS}
    for item in (v.strip() for v in (value or "").split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in PROTOCOLS:
            raise ConfigError(f"Invalid listener.security.protocol.map entry {item!r}")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def parse_listener(config: Config) -> tuple[str, int, ListenerSecurity]:
    """(host, port, security) of the gateway's listener."""
    listeners = _split(config.str("listeners"))
    if len(listeners) != 1:
        raise ConfigError(
            f"listeners={config.str('listeners')}: a gateway serves exactly one listener "
            "(its broker ports share its security; docs/security.md)"
        )
    name, host, port = listeners[0]
    protocols = protocol_map(config.get("listener.security.protocol.map"))
    if name not in protocols:
        raise ConfigError(
            f"listener {name} has no security protocol in listener.security.protocol.map"
        )
    protocol = protocols[name]
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
                f"sasl.enabled.mechanisms: {', '.join(unknown) or 'none'} not supported "
                f"(served: {', '.join(SERVED_MECHANISMS)})"
            )
    timeout = int(get("authentication.timeout.ms") or 10_000)
    security = ListenerSecurity(
        name=name,
        protocol=protocol,
        ssl_context=ctx,
        mechanisms=mechanisms,
        principal_mapper=PrincipalMapper(get("ssl.principal.mapping.rules")),
        auth_timeout_s=max(0.05, timeout / 1000.0),
        reauth_ms=int(get("connections.max.reauth.ms") or 0),
    )
    return host, port, security


def parse_advertised(value: str | None, host: str) -> tuple[str, int]:
    """(host, port) of ``advertised.listeners`` (port 0: the bound port)."""
    if not value:
        return host, 0
    listeners = _split(value)
    if len(listeners) != 1:
        raise ConfigError(f"advertised.listeners={value}: expected one listener")
    return listeners[0][1], listeners[0][2]
