"""``odradek up --security ssl|sasl_ssl``: what a secured local cluster needs.

- a CA and certificates under ``DATA/certs`` (:mod:`odradek.certs`): ``gateway``
  (server, SANs for the listener host, 127.0.0.1 and localhost) and ``admin``
  (client certificate, CN=admin, for the SSL listener's client authentication);
- the super user ``admin``: a generated password kept in ``DATA/certs/admin.password``
  (mode 0600, reused on restart) whose SCRAM-SHA-256 and -512 credentials are handed
  to the controller before any gateway starts (Kafka's ``kafka-storage format
  --add-scram``: the salted keys only);
- the gateway settings: the listener, PEM key store and trust store,
  ``ssl.client.auth`` (required for ``ssl``), ``authorizer.class.name`` with
  ``allow.everyone.if.no.acl.found=false`` and ``super.users=User:admin``;
- client files for the super user: ``DATA/client.properties`` (Java client) and
  ``DATA/librdkafka.conf`` (librdkafka, ``kcat -F``);
- mutual TLS between services (also alone: ``odradek up --internal-tls``; a local
  ``--etcd`` then serves TLS, requiring client certificates of the same CA): a member
  certificate per service, ``<kind>-<node id>`` (:mod:`odradek.internal_tls`), and
  ``admin-0`` for the launcher's own calls;
- for ``sasl_ssl``, the web console's settings: a Kafka client over SASL_SSL trusting
  the CA (users log in with their own SCRAM credentials) and HTTPS for the UI with a
  ``console`` server certificate, as the login form carries passwords. ``ssl`` (client
  certificates) has no console: nothing a browser user types maps to a certificate.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odradek import internal_tls
from odradek.certs import IssuedCert, ensure_ca, issue
from odradek.controller_client import ControllerClient
from odradek.internal_tls import InternalTls
from odradek.rpc.v1 import common_pb2, controller_pb2
from odradek.sasl.scram import ScramMechanism, credential_from_password
from odradek.tools.etcd_server import EtcdServerTls

if TYPE_CHECKING:
    from odradek.tools.launcher import ServiceSpec

SECURITY_MODES = ("plaintext", "ssl", "sasl_ssl")
SUPER_USER = "admin"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_ITERATIONS = 4096


@dataclass(frozen=True)
class SecuritySetup:
    mode: str  # "ssl" or "sasl_ssl"
    certs_dir: Path
    ca_file: Path
    gateway: IssuedCert
    admin: IssuedCert
    password: str
    console: IssuedCert | None = None

    @property
    def protocol(self) -> str:
        return self.mode.upper()

    def gateway_settings(self) -> dict[str, str]:
        out = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.gateway.pem),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "ssl.client.auth": "required" if self.mode == "ssl" else "none",
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{SUPER_USER}" if self.mode == "sasl_ssl" else "User:CN=admin",
        }
        if self.mode == "sasl_ssl":
            out["sasl.enabled.mechanisms"] = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
        return out

    def console_settings(self) -> dict[str, str]:
        """The web console's: users log in over HTTPS and act as themselves."""
        assert self.console is not None
        return {
            "security.protocol": self.protocol,
            "ssl.truststore.location": str(self.ca_file),
            "console.ssl.keystore.location": str(self.console.pem),
        }


def prepare(data_dir: Path, mode: str, hosts: tuple[str, ...]) -> SecuritySetup:
    certs = data_dir / "certs"
    ca, _ = ensure_ca(certs)
    names = tuple(dict.fromkeys((*hosts, "127.0.0.1", "localhost")))
    gateway = issue(certs, "gateway", hosts=names)
    admin = issue(certs, SUPER_USER, server=False)
    pw_file = certs / "admin.password"
    if pw_file.exists():
        password = pw_file.read_text().strip()
    else:
        password = secrets.token_urlsafe(18)
        fd = os.open(pw_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
    console = issue(certs, "console", hosts=names) if mode == "sasl_ssl" else None
    return SecuritySetup(mode, certs, ca, gateway, admin, password, console)


def member_certificates(
    data_dir: Path, specs: list[ServiceSpec], etcd: bool = False
) -> InternalTls:
    """Certificates under ``DATA/certs`` for every service in ``specs`` (their
    ``internal.tls.*`` settings set), and the launcher's own ``admin`` identity. With
    ``etcd`` (a local etcd under the same CA) controllers present theirs to etcd too."""
    certs = data_dir / "certs"
    for spec in specs:
        node_id = int(spec.settings.get("node.id", "0"))
        issued = internal_tls.issue_member(certs, spec.kind, node_id)
        spec.settings.update(internal_tls.settings_for(certs, issued))
        if etcd and spec.kind == "controller":
            spec.settings.update(
                {
                    "metadata.store.tls.ca": str(certs / "ca.crt"),
                    "metadata.store.tls.cert": str(issued.cert),
                    "metadata.store.tls.key": str(issued.key),
                }
            )
    admin = internal_tls.issue_member(certs, "admin", 0)
    tls = internal_tls.InternalTls.from_settings(internal_tls.settings_for(certs, admin).get)
    assert tls is not None
    return tls


def etcd_certificates(data_dir: Path, host: str) -> EtcdServerTls:
    """etcd's server certificate under ``DATA/certs`` (the cluster CA: it then requires
    client certificates of that CA, which the controllers' member certificates are)."""
    certs = data_dir / "certs"
    issued = issue(certs, "etcd", hosts=tuple(dict.fromkeys((host, "127.0.0.1", "localhost"))))
    return EtcdServerTls(certs / "ca.crt", issued.cert, issued.key)


def add_super_user(
    setup: SecuritySetup,
    controller_address: str,
    tls: InternalTls | None = None,
    timeout: float = 30.0,
) -> None:
    """Give the controller the super user's SCRAM credentials (both mechanisms)."""
    creds = [credential_from_password(m, setup.password, SCRAM_ITERATIONS) for m in ScramMechanism]
    request = controller_pb2.AlterScramCredentialsRequest(
        upsertions=[
            common_pb2.ScramCredential(
                user=SUPER_USER,
                mechanism=int(c.mechanism),
                salt=c.salt,
                stored_key=c.stored_key,
                server_key=c.server_key,
                iterations=c.iterations,
            )
            for c in creds
        ]
    )

    async def run() -> None:
        client = ControllerClient(controller_address, tls)
        try:
            answer = await client.call(lambda s: s.AlterScramCredentials, request, timeout=timeout)
            for r in answer.results:
                if r.error_code:
                    raise RuntimeError(f"cannot create user {r.user}: {r.error_message}")
        finally:
            await client.close()

    asyncio.run(run())


def write_client_files(setup: SecuritySetup, data_dir: Path) -> tuple[Path, Path]:
    """DATA/client.properties (Java) and DATA/librdkafka.conf for the super user."""
    java = data_dir / "client.properties"
    rdkafka = data_dir / "librdkafka.conf"
    lines = [
        f"security.protocol={setup.protocol}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={setup.ca_file}",
    ]
    rd = [f"security.protocol={setup.mode}", f"ssl.ca.location={setup.ca_file}"]
    if setup.mode == "sasl_ssl":
        lines += [
            "sasl.mechanism=SCRAM-SHA-512",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SUPER_USER}" password="{setup.password}";',
        ]
        rd += [
            "sasl.mechanisms=SCRAM-SHA-512",
            f"sasl.username={SUPER_USER}",
            f"sasl.password={setup.password}",
        ]
    else:
        lines += [
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={setup.admin.pem}",
        ]
        rd += [
            f"ssl.certificate.location={setup.admin.cert}",
            f"ssl.key.location={setup.admin.key}",
        ]
    for path, body in ((java, lines), (rdkafka, rd)):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(body) + "\n")
    return java, rdkafka
