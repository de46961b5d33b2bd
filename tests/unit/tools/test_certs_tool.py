"""``odradek certs server``: a listener certificate is a server certificate only; with
``--client-auth`` (etcd members, which present theirs to each other over peer TLS) it
is a client certificate too, and wildcard host names become DNS SANs."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from odradek.cli import main


def usages(cert: Path) -> x509.ExtendedKeyUsage:
    loaded = x509.load_pem_x509_certificate(cert.read_bytes())
    return loaded.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value


def test_server_certificate_is_for_servers_only(tmp_path: Path) -> None:
    assert main(["certs", "--dir", str(tmp_path), "server", "listener"]) == 0
    assert list(usages(tmp_path / "listener.crt")) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_client_auth_adds_the_client_usage(tmp_path: Path) -> None:
    headless = "*.demo-odradek-etcd-headless.default.svc"
    args = ["certs", "--dir", str(tmp_path), "server", "etcd", "--host", "demo-odradek-etcd"]
    assert main([*args, "--host", headless, "--client-auth"]) == 0
    cert = tmp_path / "etcd.crt"
    assert set(usages(cert)) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    loaded = x509.load_pem_x509_certificate(cert.read_bytes())
    names = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["demo-odradek-etcd", headless]
