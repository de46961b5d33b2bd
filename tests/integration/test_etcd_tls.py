"""The controller's etcd client over TLS with a client certificate (issue 15).

A real etcd (Debian's etcd-server) started with ``--cert-file``, ``--key-file``,
``--trusted-ca-file`` and ``--client-cert-auth``: the metadata store client with
``metadata.store.tls.*`` reads and writes; without TLS, or with a certificate from
another CA, it gets no answer. Its peer port speaks TLS too and takes only
certificates of the cluster CA (``--peer-client-cert-auth``). Then a whole controller
process keeps its metadata there (``odradek up --etcd --internal-tls`` wires the same).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.certs import issue
from odradek.controller.etcd_store import EtcdStore, EtcdTls
from odradek.controller.store import Put, StoreError
from odradek.tools.etcd_server import EtcdServer, EtcdServerTls, etcd_binary
from odradek.tools.launcher import Cluster


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EtcdServer, Path]]:
    if etcd_binary() is None:
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    root = tmp_path_factory.mktemp("etcd-tls")
    certs = root / "certs"
    server = issue(certs, "etcd", hosts=("127.0.0.1", "localhost"))
    issue(certs, "controller", server=False)
    etcd = EtcdServer(
        root / "etcd", fast=True, tls=EtcdServerTls(certs / "ca.crt", server.cert, server.key)
    )
    etcd.start()
    yield etcd, certs
    etcd.stop()


def _settings(certs: Path, name: str, ca: Path | None = None) -> Callable[[str], str | None]:
    values = {
        "metadata.store.tls.ca": str(ca or certs / "ca.crt"),
        "metadata.store.tls.cert": str(certs / f"{name}.crt"),
        "metadata.store.tls.key": str(certs / f"{name}.key"),
    }
    return values.get


async def test_store_client_speaks_tls_with_a_client_certificate(
    tls_etcd: tuple[EtcdServer, Path],
) -> None:
    etcd, certs = tls_etcd
    tls = EtcdTls.from_settings(_settings(certs, "controller"))
    assert tls is not None and tls.cert is not None
    store = await EtcdStore.connect([etcd.endpoint], timeout=5.0, wait=10.0, tls=tls)
    try:
        await store.txn([], [Put("/tls-test/k", b"v")])
        kv = await store.get("/tls-test/k")
        assert kv is not None and kv.value == b"v"
    finally:
        await store.close()


async def test_plaintext_client_gets_no_answer(tls_etcd: tuple[EtcdServer, Path]) -> None:
    etcd, _ = tls_etcd
    store = await EtcdStore.connect([etcd.endpoint], timeout=2.0)
    try:
        with pytest.raises(StoreError):
            await store.get("/tls-test/k")
    finally:
        await store.close()


REQUEST = b"GET /version HTTP/1.1\r\nHost: etcd\r\nConnection: close\r\n\r\n"


def _peer_handshake(etcd: EtcdServer, certs: Path, client: Path | None) -> str:
    """A TLS handshake with etcd's peer port; the HTTP status line of GET /version
    ("" when the handshake or the connection fails)."""
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    if client is not None:
        ctx.load_cert_chain(str(client / "controller.crt"), str(client / "controller.key"))
    try:
        with socket.create_connection((etcd.host, etcd.peer_port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(REQUEST)
                return tls.recv(4096).decode(errors="replace").split("\r\n", 1)[0]
    except (ssl.SSLError, ConnectionError):
        return ""


def test_peer_port_is_tls_with_client_certificates(
    tls_etcd: tuple[EtcdServer, Path], tmp_path: Path
) -> None:
    etcd, certs = tls_etcd
    # Members present CA-signed certificates to each other (the controller's here).
    issue(certs, "controller", server=False)
    assert _peer_handshake(etcd, certs, certs).startswith("HTTP/1.1 200")
    assert _peer_handshake(etcd, certs, None) == ""
    issue(tmp_path, "controller", server=False)  # another CA
    assert _peer_handshake(etcd, certs, tmp_path) == ""
    # Plaintext HTTP on the peer port gets no etcd answer.
    with socket.create_connection((etcd.host, etcd.peer_port), timeout=5) as raw:
        raw.sendall(REQUEST)
        assert b"etcdserver" not in raw.recv(4096)


async def test_certificate_from_another_ca_is_refused(
    tls_etcd: tuple[EtcdServer, Path], tmp_path: Path
) -> None:
    etcd, certs = tls_etcd
    issue(tmp_path, "intruder", server=False)
    tls = EtcdTls.from_settings(_settings(tmp_path, "intruder", ca=certs / "ca.crt"))
    store = await EtcdStore.connect([etcd.endpoint], timeout=2.0, tls=tls)
    try:
        with pytest.raises(StoreError):
            await store.get("/tls-test/k")
    finally:
        await store.close()


def test_a_cluster_keeps_its_metadata_in_etcd_over_tls(
    tls_etcd: tuple[EtcdServer, Path], cluster_factory: Callable[..., Cluster]
) -> None:
    etcd, certs = tls_etcd
    cluster = cluster_factory(
        metadata=f"etcd://{etcd.endpoint}/tls-cluster",
        with_groups=False,
        console=False,
        settings={
            "metadata.store.tls.ca": str(certs / "ca.crt"),
            "metadata.store.tls.cert": str(certs / "controller.crt"),
            "metadata.store.tls.key": str(certs / "controller.key"),
        },
    )
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    brokers = admin.list_topics(timeout=20).brokers
    assert 100 in brokers
