"""A gRPC server's internal TLS certificate renewed without a restart
(``InternalTls.server_credentials``: grpc's dynamic server credentials).

A real ``grpc.aio`` server with mutual TLS; a client holding a member certificate
handshakes with Python's ``ssl`` to read the serial the server presents:

- after the server's certificate and key files are replaced, a handshake once
  ``internal.tls.check.interval.ms`` has passed gets the new serial;
- with the interval 0 (off) the old one keeps being served;
- a replacement certificate that names no member is not served.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from odradek.certs import IssuedCert, issue
from odradek.internal_tls import CA, CERT, KEY, InternalTls, issue_member, settings_for


def serial_of(pem: Path) -> int:
    return x509.load_pem_x509_certificate(pem.read_bytes()).serial_number


def served_serial(port: int, certs: Path, client: IssuedCert) -> int:
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(client.cert), str(client.key))
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


class Served:
    def __init__(self, certs: Path, tls: InternalTls, port: int) -> None:
        self.certs, self.tls, self.port = certs, tls, port
        self.client = issue_member(certs, "admin", 0)

    async def serial(self) -> int:
        return await asyncio.to_thread(served_serial, self.port, self.certs, self.client)

    def replace_files(self, new: IssuedCert) -> None:
        """What a renewal does: new certificate and key at the configured paths."""
        shutil.copy(new.cert, self.tls.files[1])
        shutil.copy(new.key, self.tls.files[2])


async def serve(tmp_path: Path, interval_s: float) -> AsyncIterator[Served]:
    certs = tmp_path / "certs"
    first = issue_member(certs, "storage", 100)
    # Copies at paths of their own, so a renewal can overwrite them.
    live = certs / "live"
    live.mkdir()
    cert, key = live / "server.crt", live / "server.key"
    shutil.copy(first.cert, cert)
    shutil.copy(first.key, key)
    settings = {**settings_for(certs, first), CERT: str(cert), KEY: str(key)}
    tls = InternalTls.from_settings(settings.get)
    assert tls is not None and settings[CA]
    tls = dataclasses.replace(tls, check_interval_s=interval_s)
    server = grpc.aio.server()
    port = server.add_secure_port("127.0.0.1:0", tls.server_credentials())
    await server.start()
    try:
        yield Served(certs, tls, port)
    finally:
        await server.stop(0)


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[Served]:
    async for served in serve(tmp_path, 0.2):
        yield served


@pytest.fixture
async def unwatched(tmp_path: Path) -> AsyncIterator[Served]:
    async for served in serve(tmp_path, 0.0):
        yield served


async def eventually(served: Served, want: int, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (seen := await served.serial()) != want:
        assert loop.time() < deadline, f"still serving {seen}, want {want}"
        await asyncio.sleep(0.1)


async def test_renewed_files_are_served_to_new_handshakes(watched: Served) -> None:
    first = serial_of(Path(watched.tls.files[1]))
    assert await watched.serial() == first
    renewed = issue(watched.certs, "storage-100-renewed", uris=("odradek://storage/100",))
    watched.replace_files(renewed)
    await eventually(watched, serial_of(renewed.cert))


async def test_interval_zero_never_reloads(unwatched: Served) -> None:
    first = serial_of(Path(unwatched.tls.files[1]))
    renewed = issue(unwatched.certs, "storage-100-renewed", uris=("odradek://storage/100",))
    unwatched.replace_files(renewed)
    await asyncio.sleep(0.5)
    assert await unwatched.serial() == first


async def test_a_certificate_naming_no_member_is_not_served(watched: Served) -> None:
    first = serial_of(Path(watched.tls.files[1]))
    stranger = issue(watched.certs, "stranger")
    watched.replace_files(stranger)
    await asyncio.sleep(0.5)
    assert await watched.serial() == first
    assert await watched.serial() == first


# -- the storage data link (an asyncio TLS listener, not gRPC) -------------------------------
async def _data_link_served_serial(tmp_path: Path, interval_s: float, renew: str) -> int:
    """The serial a storage node's data link listener presents to a new handshake after
    its files were replaced by a certificate ``renew`` (naming storage 100 or nobody)."""
    certs = tmp_path / "certs"
    first = issue_member(certs, "storage", 100)
    live = certs / "live"
    live.mkdir()
    cert, key = live / "server.crt", live / "server.key"
    shutil.copy(first.cert, cert)
    shutil.copy(first.key, key)
    settings = {**settings_for(certs, first), CERT: str(cert), KEY: str(key)}
    tls = InternalTls.from_settings(settings.get)
    assert tls is not None
    tls = dataclasses.replace(tls, check_interval_s=interval_s)
    server = await asyncio.get_running_loop().create_server(
        asyncio.Protocol, "127.0.0.1", 0, ssl=tls.ssl_server_context()
    )
    try:
        served = Served(certs, tls, server.sockets[0].getsockname()[1])
        assert await served.serial() == serial_of(first.cert)
        uris = ("odradek://storage/100",) if renew == "member" else ()
        served.replace_files(issue(certs, f"renewed-{renew}", uris=uris))
        await asyncio.sleep(max(interval_s, 0.3) + 0.1)
        return await served.serial()
    finally:
        server.close()


async def test_data_link_serves_renewed_files(tmp_path: Path) -> None:
    serial = await _data_link_served_serial(tmp_path, 0.2, "member")
    assert serial == serial_of(tmp_path / "certs" / "renewed-member.crt")


async def test_data_link_with_interval_zero_keeps_its_certificate(tmp_path: Path) -> None:
    serial = await _data_link_served_serial(tmp_path, 0.0, "member")
    assert serial == serial_of(tmp_path / "certs" / "storage-100.crt")


async def test_data_link_does_not_serve_a_certificate_naming_no_member(tmp_path: Path) -> None:
    serial = await _data_link_served_serial(tmp_path, 0.2, "stranger")
    assert serial == serial_of(tmp_path / "certs" / "storage-100.crt")


async def test_data_link_client_trusts_a_rotated_ca_file(tmp_path: Path) -> None:
    """A gateway's next data link connection checks the node against its CA file as it
    is then: after a CA rotation (the file now also holds the new CA) a node with a
    certificate of the new CA is reached without a restart."""
    old, new = tmp_path / "old", tmp_path / "new"
    gateway = issue_member(old, "gateway", 0)
    node_cert = issue_member(new, "storage", 1)
    both = tmp_path / "both.crt"
    both.write_bytes((old / "ca.crt").read_bytes() + (new / "ca.crt").read_bytes())
    live_ca = tmp_path / "live-ca.crt"
    shutil.copy(old / "ca.crt", live_ca)
    client = InternalTls.from_settings({**settings_for(old, gateway), CA: str(live_ca)}.get)
    node = InternalTls.from_settings({**settings_for(new, node_cert), CA: str(both)}.get)
    assert client is not None and node is not None
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        asyncio.Protocol, "127.0.0.1", 0, ssl=node.ssl_server_context()
    )
    port = server.sockets[0].getsockname()[1]

    async def connect() -> None:
        transport, _ = await loop.create_connection(
            asyncio.Protocol,
            "127.0.0.1",
            port,
            ssl=client.ssl_client_context(),
            server_hostname=client.server_name,
        )
        transport.close()

    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            await connect()  # the node's CA is not trusted yet
        shutil.copy(both, live_ca)  # the rotation reaches the gateway's CA file
        await connect()
    finally:
        server.close()


# -- gRPC clients: channels per node re-opened with a renewed certificate ------------------
async def test_node_channels_present_a_renewed_client_certificate(tmp_path: Path) -> None:
    """A gateway's channels to storage nodes (NodeChannels) are re-opened once its
    renewed certificate files are read, so the node sees the new certificate; a gRPC
    channel would otherwise keep the credentials it was opened with."""
    from odradek import internal_tls
    from odradek.rpc.channel import NodeChannels

    certs = tmp_path / "certs"
    node = issue_member(certs, "storage", 1)
    gateway = issue_member(certs, "gateway", 0)
    live = certs / "live"
    live.mkdir()
    cert, key = live / "client.crt", live / "client.key"
    shutil.copy(gateway.cert, cert)
    shutil.copy(gateway.key, key)
    tls = InternalTls.from_settings(
        {**settings_for(certs, gateway), CERT: str(cert), KEY: str(key)}.get
    )
    assert tls is not None

    async def who(_request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        pem = context.auth_context()["x509_pem_cert"][0]
        return str(x509.load_pem_x509_certificate(pem).serial_number).encode()

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "t.Who", {"Serial": grpc.unary_unary_rpc_method_handler(who)}
            )
        ]
    )
    credentials = grpc.ssl_server_credentials(
        [(node.key.read_bytes(), node.cert.read_bytes())],
        root_certificates=(certs / "ca.crt").read_bytes(),
        require_client_auth=True,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    channels: NodeChannels[grpc.aio.UnaryUnaryMultiCallable] = NodeChannels(
        lambda channel: channel.unary_unary("/t.Who/Serial")
    )
    internal_tls.configure(dataclasses.replace(tls, check_interval_s=0.2))
    try:

        async def serial() -> int:
            return int(await channels.stub(1, f"127.0.0.1:{port}")(b"", timeout=10))

        assert await serial() == serial_of(gateway.cert)
        renewed = issue(certs, "gateway-0-renewed", uris=("odradek://gateway/0",))
        shutil.copy(renewed.cert, cert)
        shutil.copy(renewed.key, key)
        await asyncio.sleep(0.3)
        assert await serial() == serial_of(renewed.cert)
    finally:
        internal_tls.configure(None)
        await channels.close()
        await server.stop(0)
