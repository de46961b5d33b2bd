"""TLS contexts from Kafka's ``ssl.*`` settings, and the principal of a client certificate.

PEM only (``ssl.keystore.type=PEM``, ``ssl.truststore.type=PEM``):

- the server's key and chain: ``ssl.keystore.location`` (one PEM file holding the
  private key and the certificate chain) or ``ssl.keystore.certificate.chain`` plus
  ``ssl.keystore.key`` (PEM text, as Kafka takes them; a value that is not PEM text
  is read as a file path, an Odradek convenience); ``ssl.key.password`` if encrypted;
- trusted CAs: ``ssl.truststore.location`` (a PEM file) or
  ``ssl.truststore.certificates`` (PEM text);
- ``ssl.client.auth``: none / requested / required;
- ``ssl.enabled.protocols``: TLSv1.2 and TLSv1.3 by default, as Kafka.

``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``): comma-separated
``RULE:pattern/replacement/[LU]`` entries and ``DEFAULT`` (the full subject DN);
the first rule whose pattern matches the whole DN gives the user name.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from odradek.config import ConfigError

Lookup = Callable[[str], str | None]

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _pem_or_file(value: str) -> str:
    if "-----BEGIN" in value:
        return value
    try:
        with open(value) as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {value}: {exc}") from None


def _load_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # The ssl module loads keys from files only: a private temporary file, removed at once.
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def server_context(get: Lookup) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener (``get`` reads one setting)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, get("ssl.enabled.protocols"))
    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        if (get(kind) or "PEM").upper() != "PEM":
            raise ConfigError(f"{kind}={get(kind)}: only PEM is supported")
    password = get("ssl.key.password") or None
    location, chain, key = (
        get("ssl.keystore.location"),
        get("ssl.keystore.certificate.chain"),
        get("ssl.keystore.key"),
    )
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif chain and key:
            _load_chain(ctx, _pem_or_file(chain), _pem_or_file(key), password)
        else:
            raise ConfigError(
                "an SSL listener needs ssl.keystore.location or ssl.keystore.certificate.chain "
                "and ssl.keystore.key"
            )
        trust = get("ssl.truststore.location")
        trust_text = get("ssl.truststore.certificates")
        if trust:
            ctx.load_verify_locations(cafile=trust)
        elif trust_text:
            ctx.load_verify_locations(cadata=_pem_or_file(trust_text))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"cannot load the TLS key or certificates: {exc}") from None
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in ("none", "requested", "required"):
        raise ConfigError(f"ssl.client.auth={auth}: expected none, requested or required")
    if auth != "none" and not (trust or trust_text):
        raise ConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location")
    ctx.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[auth]
    return ctx


def _protocols(ctx: ssl.SSLContext, value: str | None) -> None:
    names = [p.strip() for p in (value or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    unknown = [n for n in names if n not in _PROTOCOLS]
    if unknown or not names:
        raise ConfigError(f"ssl.enabled.protocols: unsupported {', '.join(unknown) or 'empty'}")
    versions = sorted(_PROTOCOLS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: a certificate's subject DN to a user name."""

    _RULE = re.compile(r"\s*RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)\s*")

    def __init__(self, rules: str | None) -> None:
        self.rules: list[_Rule] = []
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            if text.startswith("DEFAULT", pos):
                self.rules.append(_Rule(None))
                pos += len("DEFAULT")
            else:
                m = self._RULE.match(text, pos)
                if m is None:
                    raise ConfigError(
                        f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}"
                    )
                replacement = re.sub(r"\$(\d)", r"\\\1", m.group(2).replace("\\/", "/"))
                self.rules.append(
                    _Rule(re.compile(m.group(1).replace("\\/", "/")), replacement, m.group(3))
                )
                pos = m.end()
            while pos < len(text) and text[pos] in ", \t":
                pos += 1

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return dn
            if rule.pattern.fullmatch(dn):
                out = rule.pattern.sub(rule.replacement, dn, count=1)
                return out.lower() if rule.case == "L" else out.upper() if rule.case == "U" else out
        raise ValueError(f"No rule applies to {dn}")
