"""ReloadingServerContext (odradek.tls_reload): a listener's certificate replaced while
it serves, over real TLS handshakes on a loopback asyncio server.

- after :meth:`reload` a new handshake sees the new certificate's serial, with and
  without SNI (the Java client sends none for an IP address), while a connection
  opened before keeps exchanging data;
- :meth:`files_changed` notices a rewritten or atomically replaced PEM file;
- a broken file raises ConfigError and the old certificate keeps being served;
- overrides (what AlterConfigs sets) replace the static location.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509

from odradek.certs import issue
from odradek.config import ConfigError
from odradek.tls_reload import ReloadingServerContext, listener_setting


def serial_of(pem: Path) -> int:
    return x509.load_pem_x509_certificate(pem.read_bytes()).serial_number


class EchoServer:
    def __init__(self, tls: ReloadingServerContext) -> None:
        self.tls = tls
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def _echo(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(100):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._echo, "127.0.0.1", 0, ssl=self.tls.context)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()


async def handshake(
    port: int, ca: Path, sni: bool = True
) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect over TLS; the serial of the certificate the server presented."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = sni
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1" if sni else ""
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number, reader, writer


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> bytes:
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), 5)


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    return tmp_path / "certs"


@pytest.fixture
def keystore(certs: Path) -> Path:
    """The listener's PEM file (key + chain), a copy the tests overwrite."""
    first = issue(certs, "first", hosts=("127.0.0.1",))
    path = certs / "listener.pem"
    shutil.copy(first.pem, path)
    return path


@pytest.fixture
async def served(keystore: Path) -> AsyncIterator[EchoServer]:
    settings = {"ssl.keystore.location": str(keystore)}
    server = EchoServer(ReloadingServerContext(settings.get))
    await server.start()
    yield server
    await server.stop()


@pytest.mark.parametrize("sni", [True, False], ids=["sni", "no-sni"])
async def test_new_handshakes_get_the_reloaded_certificate(
    served: EchoServer, certs: Path, keystore: Path, sni: bool
) -> None:
    ca = certs / "ca.crt"
    first_serial = serial_of(certs / "first.crt")
    seen, old_reader, old_writer = await handshake(served.port, ca, sni)
    assert seen == first_serial
    second = issue(certs, "second", hosts=("127.0.0.1",))
    shutil.copy(second.pem, keystore)
    assert served.tls.files_changed()
    served.tls.reload()
    assert not served.tls.files_changed()
    seen, reader, writer = await handshake(served.port, ca, sni)
    assert seen == serial_of(second.cert) != first_serial
    assert await echo(reader, writer, b"new") == b"new"
    # The connection opened before keeps its session and works.
    assert await echo(old_reader, old_writer, b"old") == b"old"
    for w in (writer, old_writer):
        w.close()


async def test_atomic_replace_is_noticed(certs: Path, keystore: Path) -> None:
    tls = ReloadingServerContext({"ssl.keystore.location": str(keystore)}.get)
    second = issue(certs, "second", hosts=("127.0.0.1",))
    staged = certs / "staged.pem"
    shutil.copy(second.pem, staged)
    stat = keystore.stat()
    os.utime(staged, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime, new inode
    os.replace(staged, keystore)
    assert tls.files_changed()


async def test_a_broken_file_keeps_the_old_certificate(
    served: EchoServer, certs: Path, keystore: Path
) -> None:
    keystore.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n")
    assert served.tls.files_changed()
    with pytest.raises(ConfigError):
        served.tls.reload()
    seen, _reader, writer = await handshake(served.port, certs / "ca.crt")
    assert seen == serial_of(certs / "first.crt")
    writer.close()


async def test_overrides_replace_the_static_location(served: EchoServer, certs: Path) -> None:
    other = issue(certs, "other", hosts=("127.0.0.1",))
    with pytest.raises(ConfigError):
        served.tls.validate({"ssl.keystore.location": str(certs / "missing.pem")})
    served.tls.validate({"ssl.keystore.location": str(other.pem)})
    served.tls.reload({"ssl.keystore.location": str(other.pem)})
    seen, _reader, writer = await handshake(served.port, certs / "ca.crt")
    assert seen == serial_of(other.cert)
    writer.close()
    with pytest.raises(ConfigError):
        served.tls.reload({"ssl.keystore.location": str(certs / "missing.pem")})
    assert served.tls.overrides == {"ssl.keystore.location": str(other.pem)}


def test_listener_setting_names() -> None:
    assert listener_setting("listener.name.sasl_ssl.ssl.keystore.location") == (
        "sasl_ssl",
        "ssl.keystore.location",
    )
    assert listener_setting("listener.name.x.ssl.client.auth") is None
    assert listener_setting("ssl.keystore.location") is None
