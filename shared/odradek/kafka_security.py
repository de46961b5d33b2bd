"""Client-side security for :mod:`odradek.kafka_client`: TLS contexts and SASL exchanges.

Settings use Kafka's client names (``security.protocol``, ``sasl.mechanism``,
``ssl.*``): PEM files only (a Java keystore must be converted first, as librdkafka
also requires). SASL mechanisms: ``PLAIN`` (RFC 4616) and ``SCRAM-SHA-256`` /
``SCRAM-SHA-512`` (RFC 5802 / RFC 7677, as Kafka's ``ScramSaslClient`` speaks them,
KIP-84); credentials come from ``sasl.username``/``sasl.password`` (librdkafka's
names) or a Java ``sasl.jaas.config`` line. GSSAPI and OAUTHBEARER are refused at
start-up with the way out.

:class:`ScramClient` is the SCRAM state machine without I/O; the connection sends its
messages in SaslAuthenticate requests (KIP-152) after a SaslHandshake v1.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's ScramMechanism.minIterations: a server asking for fewer is not trusted.
SCRAM_MIN_ITERATIONS = 4096

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SecurityConfigError(ValueError):
    """A security setting that cannot work, named with its Kafka name."""


@dataclass(frozen=True, kw_only=True)
class SecuritySettings:
    """How to reach one cluster: transport and authentication, by Kafka's names."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = ""
    ssl_ca_location: str = ""
    ssl_certificate_location: str = ""
    ssl_key_location: str = ""
    ssl_key_password: str = ""
    ssl_check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_jaas_credentials(jaas: str) -> tuple[str, str]:
    """``username``/``password`` options of a Java ``sasl.jaas.config`` line."""
    options = {k: v.replace('\\"', '"') for k, v in _JAAS_OPTION.findall(jaas)}
    return options.get("username", ""), options.get("password", "")


def security_from_properties(props: Mapping[str, str]) -> SecuritySettings:
    """Kafka client properties (Java or librdkafka spelling) as :class:`SecuritySettings`;
    raises :class:`SecurityConfigError` for what cannot work."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper() or "PLAINTEXT"
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(
            f"Invalid value {protocol} for configuration security.protocol: "
            f"expected one of {', '.join(PROTOCOLS)}"
        )
    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "")).strip().upper()
    username = props.get("sasl.username", "")
    password = props.get("sasl.password", "")
    if props.get("sasl.jaas.config") and not username:
        username, password = parse_jaas_credentials(props["sasl.jaas.config"])
    if protocol.startswith("SASL"):
        mechanism = mechanism or "GSSAPI"  # Kafka's default sasl.mechanism
        if mechanism not in MECHANISMS:
            raise SecurityConfigError(
                f"sasl.mechanism {mechanism} is not supported (supported: "
                f"{', '.join(MECHANISMS)}); use SCRAM or PLAIN credentials for this cluster"
            )
        if not username:
            raise SecurityConfigError(
                "SASL needs credentials: set sasl.username and sasl.password "
                "(or sasl.jaas.config with username and password)"
            )
    ca = props.get("ssl.ca.location", "")
    if not ca and props.get("ssl.truststore.location"):
        ca = _pem_store(props, "truststore")
    cert = props.get("ssl.certificate.location", "")
    if not cert and props.get("ssl.keystore.location"):
        cert = _pem_store(props, "keystore")
    key = props.get("ssl.key.location", "") or cert
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    verify = props.get("enable.ssl.certificate.verification", "true").strip().lower()
    return SecuritySettings(
        security_protocol=protocol,
        sasl_mechanism=mechanism if protocol.startswith("SASL") else "",
        sasl_username=username,
        sasl_password=password,
        ssl_ca_location=ca,
        ssl_certificate_location=cert,
        ssl_key_location=key if cert else "",
        ssl_key_password=props.get("ssl.key.password", props.get("ssl.keystore.password", "")),
        ssl_check_hostname=algorithm == "https" and verify != "false",
    )


def _pem_store(props: Mapping[str, str], store: str) -> str:
    kind = props.get(f"ssl.{store}.type", "PEM").strip().upper()
    if kind != "PEM":
        raise SecurityConfigError(
            f"ssl.{store}.type {kind} is not supported: convert the store to PEM "
            f"(keytool -importkeystore ... -deststoretype PKCS12, then openssl pkcs12 -nodes) "
            f"and set ssl.{store}.type=PEM"
        )
    return props[f"ssl.{store}.location"]


def ssl_context(settings: SecuritySettings) -> ssl.SSLContext | None:
    """The TLS context for SSL / SASL_SSL, None for plaintext protocols."""
    if not settings.uses_tls:
        return None
    context = ssl.create_default_context(cafile=settings.ssl_ca_location or None)
    context.check_hostname = settings.ssl_check_hostname
    if not settings.ssl_check_hostname:
        # Kafka's ssl.endpoint.identification.algorithm="" keeps chain verification.
        context.verify_mode = ssl.CERT_REQUIRED
    if settings.ssl_certificate_location:
        context.load_cert_chain(
            settings.ssl_certificate_location,
            settings.ssl_key_location or None,
            settings.ssl_key_password or None,
        )
    return context


def plain_initial_response(username: str, password: str) -> bytes:
    """RFC 4616: authzid (empty) NUL authcid NUL passwd."""
    return b"\0" + username.encode() + b"\0" + password.encode()


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        if len(part) >= 2 and part[1] == "=":
            out[part[0]] = part[2:]
    return out


class ScramError(Exception):
    """The server's SCRAM messages failed a check (or it reported an error)."""


class ScramClient:
    """One SCRAM-SHA-256/512 client exchange: first, final, verify (RFC 5802 section 3)."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.hash_name = "sha256" if mechanism.endswith("256") else "sha512"
        self.password = password.encode()
        self.nonce = nonce or secrets.token_urlsafe(24)
        self.first_bare = f"n={_saslname(username)},r={self.nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return ("n,," + self.first_bare).encode()

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attributes(text)
        if "e" in attrs:
            raise ScramError(f"SCRAM: the server refused: {attrs['e']}")
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self.nonce) or len(nonce) <= len(self.nonce):
            raise ScramError("SCRAM: the server nonce does not extend the client nonce")
        if not iterations.isdigit() or int(iterations) < SCRAM_MIN_ITERATIONS:
            raise ScramError(f"SCRAM: refusing an iteration count of {iterations!r}")
        salted = hashlib.pbkdf2_hmac(
            self.hash_name, self.password, base64.b64decode(salt), int(iterations)
        )
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.first_bare},{text},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"SCRAM: the server refused: {attrs['e']}")
        expected = base64.b64encode(self._server_signature).decode()
        if not self._server_signature or not hmac.compare_digest(attrs.get("v", ""), expected):
            raise ScramError("SCRAM: the server signature does not match (wrong server?)")
