"""Mutual TLS between services: the cluster CA, this process's member certificate, and
who a caller is (docs/security.md, "Between services").

Off by default: with no ``internal.tls.*`` setting every gRPC channel and server is
plaintext, as a local ``odradek up`` has always run. With ``internal.tls.ca``,
``internal.tls.cert`` and ``internal.tls.key`` (PEM files; environment
``ODRADEK_INTERNAL_TLS_CA`` ...) every server requires a client certificate signed by
the cluster CA and every channel presents this process's certificate.

A member certificate names its holder in a subject alternative name URI
``odradek://<kind>/<node id>`` (``odradek://storage/100``, ``odradek://gateway/0``;
tools use ``odradek://admin/0``), or a whole kind, ``odradek://gateway/*`` (for
Kubernetes Deployments, whose node ids come from pod names; never for storage nodes).
Kinds: :data:`KINDS`. Servers are reached by IP or
pod name, which certificates made once cannot list, so clients check the server
certificate against one cluster-wide DNS name instead, ``internal.tls.server.name``
(default ``odradek.internal``), which every member certificate carries: the CA and
that name prove the server is a member; what a caller may do is decided by the
server from the caller's URI (:mod:`odradek.rpc.peer_auth`).

The settings are process-wide (one process, one identity): :func:`configure` is
called once by the service shell (:mod:`odradek.service`) or a tool, and
:func:`active` is read wherever a channel or server is built.
"""

from __future__ import annotations

import functools
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509

from odradek.certs import IssuedCert, issue
from odradek.config import ConfigError

log = logging.getLogger(__name__)

CA = "internal.tls.ca"
CERT = "internal.tls.cert"
KEY = "internal.tls.key"
SERVER_NAME = "internal.tls.server.name"
CHECK_INTERVAL = "internal.tls.check.interval.ms"
DEFAULT_SERVER_NAME = "odradek.internal"
SCHEME = "odradek"
KINDS = (
    "controller",
    "storage",
    "gateway",
    "coordinator",
    "offsets",
    "transactions",
    "console",
    "admin",
)

Lookup = Callable[[str], str | None]


# Kinds whose certificates must name one node id: a storage node's id is its data.
EXACT_KINDS = ("storage",)


@dataclass(frozen=True, slots=True)
class Member:
    """A caller or server named by its certificate: ``odradek://<kind>/<node_id>``, or
    ``odradek://<kind>/*`` (``node_id`` None) for a kind-wide certificate: Kubernetes
    Deployments derive node ids from pod names, unknown when certificates are made.
    Storage certificates always name their id (:data:`EXACT_KINDS`)."""

    kind: str
    node_id: int | None

    @property
    def uri(self) -> str:
        return f"{SCHEME}://{self.kind}/{'*' if self.node_id is None else self.node_id}"

    def is_node(self, node_id: int) -> bool:
        """Whether this certificate may speak for node ``node_id``."""
        return self.node_id is None or self.node_id == node_id

    def __str__(self) -> str:
        return self.uri


def parse_member(uri: str) -> Member | None:
    prefix = f"{SCHEME}://"
    if not uri.startswith(prefix):
        return None
    kind, _, node_id = uri[len(prefix) :].partition("/")
    if kind not in KINDS:
        return None
    if node_id == "*":
        return None if kind in EXACT_KINDS else Member(kind, None)
    if not node_id.isdigit():
        return None
    return Member(kind, int(node_id))


@functools.lru_cache(maxsize=256)
def member_of_certificate(pem: bytes) -> Member | None:
    """The member a (leaf) certificate names, None when it names none."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    for uri in sans.get_values_for_type(x509.UniformResourceIdentifier):
        member = parse_member(uri)
        if member is not None:
            return member
    return None


@dataclass(frozen=True)
class InternalTls:
    """The cluster CA and this process's certificate and key (PEM bytes)."""

    ca: bytes
    cert: bytes
    key: bytes
    server_name: str = DEFAULT_SERVER_NAME
    files: tuple[str, str, str] = ("", "", "")  # ca, cert, key paths (for ssl contexts)
    # internal.tls.check.interval.ms: gRPC servers re-read changed files (0: never).
    check_interval_s: float = 30.0

    @classmethod
    def from_settings(cls, get: Lookup) -> InternalTls | None:
        """None when none of ``internal.tls.{ca,cert,key}`` is set; all three or an error."""
        paths = {name: (get(name) or "").strip() for name in (CA, CERT, KEY)}
        if not any(paths.values()):
            return None
        missing = [name for name, value in paths.items() if not value]
        if missing:
            raise ConfigError(f"internal TLS needs {CA}, {CERT} and {KEY}; missing {missing}")
        data = {}
        for name, path in paths.items():
            try:
                data[name] = Path(path).read_bytes()
            except OSError as exc:
                raise ConfigError(f"{name}={path}: {exc}") from None
        tls = cls(
            data[CA],
            data[CERT],
            data[KEY],
            (get(SERVER_NAME) or DEFAULT_SERVER_NAME).strip(),
            (paths[CA], paths[CERT], paths[KEY]),
            int(get(CHECK_INTERVAL) or 30_000) / 1000.0,
        )
        if tls.member is None:
            raise ConfigError(
                f"{CERT}={paths[CERT]}: the certificate names no member "
                f"(a SAN URI {SCHEME}://<kind>/<id>, kind one of {', '.join(KINDS)})"
            )
        return tls

    @property
    def member(self) -> Member | None:
        return member_of_certificate(self.cert)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """What a new channel presents: the files as last read (:meth:`client_generation`)."""
        ca, cert, key = _client_certificates(self).current()
        return grpc.ssl_channel_credentials(ca, key, cert)

    def client_generation(self) -> int:
        """Bumped when renewed ``internal.tls.*`` files were read for new channels (checked
        at most every ``check_interval_s``): channels kept per node are re-opened then
        (odradek.rpc.channel.Channels), as gRPC keeps a channel's credentials."""
        watcher = _client_certificates(self)
        watcher.current()
        return watcher.generation

    def channel_options(self) -> list[tuple[str, Any]]:
        """Check the server against the cluster name, whatever address was dialled."""
        return [("grpc.ssl_target_name_override", self.server_name)]

    def server_credentials(self) -> grpc.ServerCredentials:
        """Mutual TLS whose key, certificate and CA follow their files: gRPC asks
        :class:`_ServerCertificates` on new handshakes (``grpc.dynamic_ssl_server_
        credentials``); open connections keep what they negotiated."""
        initial = grpc.ssl_server_certificate_configuration(
            [(self.key, self.cert)], root_certificates=self.ca
        )
        fetch = _ServerCertificates(self).fetch
        return grpc.dynamic_ssl_server_credentials(
            initial, fetch, require_client_authentication=True
        )

    def ssl_server_context(self) -> ssl.SSLContext:
        """The same rules for a plain TCP listener (the storage data link), following
        renewed files as gRPC servers do (:class:`_ReloadingSslServer`)."""
        return _ReloadingSslServer(self).context

    def ssl_client_context(self) -> ssl.SSLContext:
        """For one new connection (the data link's client side): the files as they are
        now, so a renewed certificate or CA is presented from the next connection on."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.files[1], self.files[2])
        ctx.load_verify_locations(cafile=self.files[0])
        return ctx


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class _RenewedFiles:
    """The ``internal.tls.*`` files of one user of them (a gRPC server, the data link
    listener, gRPC clients), watched: at most every ``check_interval_s`` their mtime,
    size and inode are compared with what was last read."""

    def __init__(self, tls: InternalTls) -> None:
        self.tls = tls
        self.stamps = [_stamp(path) for path in tls.files]
        self.checked = time.monotonic()

    def renewed(self) -> tuple[bytes, bytes, bytes] | None:
        """CA, certificate and key when the files changed since they were last read and
        load (a certificate naming a member, a key that matches it); None otherwise (a
        half-written file or a stranger's certificate keeps the old ones, retried at the
        next check)."""
        interval = self.tls.check_interval_s
        now = time.monotonic()
        if interval <= 0 or not all(self.tls.files) or now - self.checked < interval:
            return None
        self.checked = now
        stamps = [_stamp(path) for path in self.tls.files]
        if stamps == self.stamps:
            return None
        ca_path, cert_path, key_path = self.tls.files
        try:
            ca, cert, key = (Path(p).read_bytes() for p in (ca_path, cert_path, key_path))
            if member_of_certificate(cert) is None:
                raise ValueError(f"{cert_path} names no member")
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_path, key_path)
        except (OSError, ValueError, ssl.SSLError) as exc:
            log.warning("internal TLS: keeping the old certificate: %s", exc)
            return None
        self.stamps = stamps
        return ca, cert, key


class _ServerCertificates:
    """The certificate fetcher of one gRPC server: renewed files
    (:class:`_RenewedFiles`) answer a new configuration."""

    def __init__(self, tls: InternalTls) -> None:
        self.files = _RenewedFiles(tls)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        renewed = self.files.renewed()
        if renewed is None:
            return None
        ca, cert, key = renewed
        log.info("internal TLS: serving the renewed certificate of %s", self.files.tls.files[1])
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)


def _ssl_server_context(ca_file: str, cert_file: str, key_file: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    ctx.load_verify_locations(cafile=ca_file)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class _ReloadingSslServer:
    """An ``ssl`` server context (the storage data link) that serves renewed files
    (:class:`_RenewedFiles`) to new handshakes, as gRPC servers do. asyncio keeps the
    context a server was created with, so its SNI callback (called on every
    ClientHello, also without SNI) moves the handshake onto the newest context (as
    odradek.tls_reload does for listeners)."""

    def __init__(self, tls: InternalTls) -> None:
        self.files = _RenewedFiles(tls)
        self.context = _ssl_server_context(*tls.files)
        self.current = self.context
        self.context.sni_callback = self._choose

    def _choose(self, sslobj: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
        if self.files.renewed() is not None:
            try:
                self.current = _ssl_server_context(*self.files.tls.files)
                log.info("internal TLS (data link): serving the renewed certificate")
            except (OSError, ssl.SSLError) as exc:
                log.warning("internal TLS (data link): keeping the old certificate: %s", exc)
        if self.current is not self.context:
            sslobj.context = self.current


class _ClientCertificates:
    """What this process presents as a gRPC client: renewed files
    (:class:`_RenewedFiles`) replace it and bump :attr:`generation`. Locked: the
    controller heartbeat thread (odradek.controller_client) asks too, and one renewal
    must bump the generation once."""

    def __init__(self, tls: InternalTls) -> None:
        self.files = _RenewedFiles(tls)
        self.pems = (tls.ca, tls.cert, tls.key)
        self.generation = 0
        self._lock = threading.Lock()

    def current(self) -> tuple[bytes, bytes, bytes]:
        with self._lock:
            renewed = self.files.renewed()
            if renewed is not None:
                self.pems = renewed
                self.generation += 1
                log.info("internal TLS: presenting the renewed certificate as a client")
            return self.pems


_clients: dict[tuple[bytes, bytes, bytes, tuple[str, str, str]], _ClientCertificates] = {}


def _client_certificates(tls: InternalTls) -> _ClientCertificates:
    key = (tls.ca, tls.cert, tls.key, tls.files)
    watcher = _clients.get(key)
    if watcher is None or watcher.files.tls.check_interval_s != tls.check_interval_s:
        watcher = _clients[key] = _ClientCertificates(tls)
    return watcher


_active: InternalTls | None = None


def configure(tls: InternalTls | None) -> None:
    """Set this process's internal TLS (None: plaintext)."""
    global _active
    _active = tls


def active() -> InternalTls | None:
    return _active


def configure_from(get: Lookup) -> InternalTls | None:
    tls = InternalTls.from_settings(get)
    configure(tls)
    return tls


def issue_member(
    directory: Path, kind: str, node_id: int | None, server_name: str = DEFAULT_SERVER_NAME
) -> IssuedCert:
    """A member certificate ``<kind>-<id>`` under ``directory`` (its CA made if missing);
    ``node_id`` None: a kind-wide one, ``<kind>``."""
    if kind not in KINDS:
        raise ValueError(f"unknown member kind {kind!r}: expected one of {', '.join(KINDS)}")
    if node_id is None and kind in EXACT_KINDS:
        raise ValueError(f"a {kind} certificate names its node id")
    member = Member(kind, node_id)
    return issue(
        directory,
        kind if node_id is None else f"{kind}-{node_id}",
        common_name=member.uri,
        hosts=(server_name,),
        uris=(member.uri,),
    )


def settings_for(directory: Path, cert: IssuedCert) -> dict[str, str]:
    """The ``internal.tls.*`` settings of a member whose certificate is ``cert``."""
    return {CA: str(directory / "ca.crt"), CERT: str(cert.cert), KEY: str(cert.key)}
