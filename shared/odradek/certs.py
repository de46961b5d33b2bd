"""A local certificate authority and the certificates it issues (``odradek certs``).

Files under one directory, PEM: ``ca.crt`` / ``ca.key`` (the CA), and per name
``<name>.crt`` (leaf then CA), ``<name>.key`` (PKCS#8, unencrypted, mode 0600) and
``<name>.pem`` (key and chain in one file: what Kafka's ``ssl.keystore.type=PEM``
``ssl.keystore.location`` takes). Keys are EC P-256: fast handshakes, and every
client we test (OpenSSL, Java) accepts them. Re-running never replaces a file that
exists, so certificates survive cluster restarts.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825  # what browsers and the Java client accept for leaf certificates
CA_VALID_DAYS = 3650


@dataclass(frozen=True, slots=True)
class IssuedCert:
    cert: Path
    key: Path
    pem: Path  # key + chain


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def ensure_ca(directory: Path, name: str = "Odradek local CA") -> tuple[Path, Path]:
    """The CA's (cert, key) under ``directory``, created if missing."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "ca.crt", directory / "ca.key"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=CA_VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    _write_private(key_path, _key_pem(key))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def issue(
    directory: Path,
    name: str,
    *,
    common_name: str | None = None,
    hosts: tuple[str, ...] = (),
    server: bool = True,
    client: bool = True,
    organizational_unit: str | None = None,
    uris: tuple[str, ...] = (),
) -> IssuedCert:
    """A certificate for ``name`` signed by the CA in ``directory`` (made if missing).

    ``hosts`` become subject alternative names (IP addresses or DNS names), which
    clients check against the address they dialled (``ssl.endpoint.identification.
    algorithm=https``); ``uris`` become URI names (a service's identity,
    :mod:`odradek.internal_tls`).
    """
    ca_cert_path, ca_key_path = ensure_ca(directory)
    out = IssuedCert(
        directory / f"{name}.crt", directory / f"{name}.key", directory / f"{name}.pem"
    )
    if out.cert.exists() and out.key.exists() and out.pem.exists():
        return out
    ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name or name)]
    if organizational_unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    sans.extend(x509.UniformResourceIdentifier(u) for u in uris)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert_path.read_bytes()
    key_pem = _key_pem(key)
    _write_private(out.key, key_pem)
    out.cert.write_bytes(chain)
    _write_private(out.pem, key_pem + chain)
    return out


def subject_dn(der: bytes) -> str:
    """A certificate's subject as RFC 2253 text (what Java's X500Principal.getName()
    gives Kafka's DEFAULT principal mapping rule)."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
