"""What a TLS server's transport costs per GB, by way of reading and writing TLS.

Issue 15: the gateway's TLS listener costs 1.5-2 CPU-s per GB produced more than
PLAINTEXT, and a py-spy profile puts ~40% of its busy time under ``SSLObject.read``
with AES-GCM a third of that (docs/security.md, "Throughput"). Would another transport
do better than uvloop's ``SSLProtocol`` (OpenSSL over memory BIOs, written in Cython)?
This server, under uvloop as the services run, receives (a client produces) or sends
(a client consumes) ``--mb`` MiB over loopback in 1 MiB application buffers, and
reports its own CPU seconds per GB; the peer is a plain blocking ``ssl`` socket in a
subprocess, not counted. Ways, measured alternately, median of ``--rounds``:

- ``plaintext``: no TLS, the floor (one kernel copy);
- ``uvloop``: ``create_server(ssl=...)`` with a ``BufferedProtocol`` (the gateway's
  ``TlsKafkaConnection`` today): socket -> uvloop's buffer -> incoming BIO ->
  ``SSLObject.read`` into the protocol's buffer;
- ``memory-bio`` (receive only): our own protocol over a plain transport, the same
  BIOs fed 256 KB reads, ``SSLObject.read(n, buffer)`` straight into the sink's buffer;
- ``memory-bio-c`` (receive only): the same, one Python loop per socket read calling
  the ``_ssl`` object's own ``read`` per record (no ``SSLObject`` frame, no
  ``pending()`` per record: what uvloop's transport makes three Python calls for);
- ``ssl-socket``: a non-blocking ``SSLSocket`` driven by ``add_reader`` /
  ``add_writer`` (OpenSSL reads and writes the socket itself: no BIO copies, but
  a system call per TLS record, two when reading).

The client's records: ``--records=librdkafka`` (default) as librdkafka writes a
produce stream, ~36,000 per 100 MB; ``--records=16k`` full 16 KB records.

    python -m bench tls_transport [--mb=128] [--rounds=3] [--records=librdkafka|16k]
        [--modes=receive,send]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import uvloop

from odradek.certs import ensure_ca, issue

CHUNK = 1 << 20
# The peer: connects with TLS (or not), then sends or reads ``mb`` MiB and closes.
# ``records``: "16k" sends 1 MiB buffers (OpenSSL cuts 16 KB records); "librdkafka"
# encrypts the segments librdkafka writes one ``SSL_write`` each (docs/security.md,
# "librdkafka's TLS records": ~36,000 records per 100 MB, 15% of the messages a 10 B
# record before a 1,000 B one) over memory BIOs and sends the ciphertext 256 KB at a
# time, as a busy client's socket delivers it.
_PEER = r"""
import socket, ssl, sys
port, tls, mode, mb, ca, records = sys.argv[1], sys.argv[2] == "1", sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
sock = socket.create_connection(("127.0.0.1", int(port)))
if tls and mode == "send" and records == "librdkafka":
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context(cafile=ca).wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if outgoing.pending:
                sock.sendall(outgoing.read())
            incoming.write(sock.recv(65536))
    cycle = [b"x" * n for n in (14000, 10, 1000, 10, 1000, 14000, 10, 1000, 10, 1000, 10, 1000)]
    left = mb << 20
    while left > 0:
        for segment in cycle:
            obj.write(segment)
            left -= len(segment)
        if outgoing.pending >= 256 << 10:
            sock.sendall(outgoing.read())
    sock.sendall(outgoing.read())
    sock.close()
    sys.exit()
if tls:
    sock = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname="127.0.0.1")
if mode == "send":
    data = b"x" * (1 << 20)
    for _ in range(mb):
        sock.sendall(data)
else:
    buf, want = bytearray(1 << 20), mb << 20
    while want > 0:
        got = sock.recv_into(buf)
        if not got:
            break
        want -= got
sock.close()
"""


class _Sink(asyncio.BufferedProtocol):
    """Receives into one reused 1 MiB buffer (a stand-in for the frame decoder)."""

    def __init__(self, done: asyncio.Future[int]) -> None:
        self.buffer = memoryview(bytearray(CHUNK))
        self.received = 0
        self.done = done

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.received += nbytes

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(self.received)


class _MemoryBioReader(asyncio.BufferedProtocol):
    """TLS over a plain transport with our own memory BIOs: large ciphertext reads
    in, plaintext decrypted straight into the sink's buffer."""

    def __init__(
        self, done: asyncio.Future[int], ctx: ssl.SSLContext, c_read: bool = False
    ) -> None:
        self.sink = _Sink(done)
        self.c_read = c_read
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.ciphertext = memoryview(bytearray(256 << 10))
        self.handshaken = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.ciphertext

    def buffer_updated(self, nbytes: int) -> None:
        assert self.transport is not None
        self.incoming.write(self.ciphertext[:nbytes])
        if not self.handshaken:
            try:
                self.tls.do_handshake()
                self.handshaken = True
            except ssl.SSLWantReadError:
                pass
        if self.handshaken and self.c_read:
            self._read_all()
        while self.handshaken and (self.incoming.pending or self.tls.pending()):
            buffer = self.sink.get_buffer(-1)
            try:
                # (typeshed types the read as bytes; with a buffer it is the count)
                got = cast(int, self.tls.read(len(buffer), buffer))
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                break
            if not got:
                break
            self.sink.buffer_updated(got)
        if self.outgoing.pending:
            self.transport.write(self.outgoing.read())

    def _read_all(self) -> None:
        """One Python loop per socket read, one C call per TLS record: the ``_ssl``
        object's own ``read`` (``SSLObject.read`` is a Python frame around it) into
        the rest of the buffer, until OpenSSL wants more bytes."""
        read = self.tls._sslobj.read  # type: ignore[attr-defined]
        buffer = self.sink.get_buffer(-1)
        size, got = len(buffer), 0
        try:
            while True:
                n = read(size - got, buffer[got:])
                if not n:
                    break
                got += n
                if got == size:
                    self.sink.buffer_updated(got)
                    buffer, got = self.sink.get_buffer(-1), 0
                    size = len(buffer)
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            pass
        if got:
            self.sink.buffer_updated(got)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.sink.connection_lost(exc)


class _Sender(asyncio.Protocol):
    """Writes ``mb`` MiB in 1 MiB buffers, respecting the transport's flow control."""

    def __init__(self, done: asyncio.Future[int], mb: int) -> None:
        self.done, self.mb = done, mb
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        asyncio.get_running_loop().create_task(self._send(transport))  # type: ignore[arg-type]

    async def _send(self, transport: asyncio.WriteTransport) -> None:
        data = memoryview(bytearray(b"x" * CHUNK))
        for _ in range(self.mb):
            await self.writable.wait()
            transport.writelines([data])
        transport.close()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(self.mb * CHUNK)


async def _wait_fd(add: Callable[..., None], remove: Callable[[int], object], fd: int) -> None:
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    add(fd, fut.set_result, None)
    try:
        await fut
    finally:
        remove(fd)


async def _ssl_socket(listening: socket.socket, ctx: ssl.SSLContext, mode: str, mb: int) -> int:
    """One connection on a non-blocking SSLSocket: receives until EOF or sends ``mb``."""
    loop = asyncio.get_running_loop()
    raw, _ = await loop.sock_accept(listening)
    sock = ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
    fd = sock.fileno()
    while True:
        try:
            sock.do_handshake()
            break
        except ssl.SSLWantReadError:
            await _wait_fd(loop.add_reader, loop.remove_reader, fd)
        except ssl.SSLWantWriteError:
            await _wait_fd(loop.add_writer, loop.remove_writer, fd)
    total = 0
    buffer = memoryview(bytearray(CHUNK))
    try:
        if mode == "receive":
            while True:
                try:
                    got = sock.recv_into(buffer)
                except ssl.SSLWantReadError:
                    await _wait_fd(loop.add_reader, loop.remove_reader, fd)
                    continue
                except (ssl.SSLError, OSError):
                    break
                if not got:
                    break
                total += got
        else:
            data = memoryview(bytearray(b"x" * CHUNK))
            for _ in range(mb):
                view = data
                while view:
                    try:
                        view = view[sock.send(view) :]
                    except ssl.SSLWantWriteError:
                        await _wait_fd(loop.add_writer, loop.remove_writer, fd)
                total += len(data)
    finally:
        sock.close()
    return total


async def _run_once(
    way: str, mode: str, mb: int, ctx: ssl.SSLContext, ca: Path, records: str
) -> float:
    """This process's CPU seconds per GB for one transfer."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    server: asyncio.AbstractServer | None = None
    listening: socket.socket | None = None
    task: asyncio.Task[int] | None = None
    if way == "ssl-socket":
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        listening.setblocking(False)
        port = listening.getsockname()[1]
        task = loop.create_task(_ssl_socket(listening, ctx, mode, mb))
    else:
        factory: Callable[[], asyncio.BaseProtocol]
        if mode == "send":
            factory = lambda: _Sender(done, mb)  # noqa: E731
        elif way in ("memory-bio", "memory-bio-c"):
            c_read = way == "memory-bio-c"
            factory = lambda: _MemoryBioReader(done, ctx, c_read)  # noqa: E731
        else:
            factory = lambda: _Sink(done)  # noqa: E731
        server = await loop.create_server(
            factory, "127.0.0.1", 0, ssl=ctx if way == "uvloop" else None
        )
        port = server.sockets[0].getsockname()[1]
    tls = "0" if way == "plaintext" else "1"
    peer_mode = "send" if mode == "receive" else "receive"
    start = time.process_time()
    peer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PEER, str(port), tls, peer_mode, str(mb), str(ca), records
    )
    moved = await (task if task is not None else done)
    cpu = time.process_time() - start
    await peer.wait()
    if server is not None:
        server.close()
    if listening is not None:
        listening.close()
    return cpu / (moved / 1e9) if moved else float("nan")


WAYS = {
    "receive": ("plaintext", "uvloop", "memory-bio", "memory-bio-c", "ssl-socket"),
    "send": ("plaintext", "uvloop", "ssl-socket"),
}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench tls_transport")
    parser.add_argument("--mb", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", choices=("16k", "librdkafka"), default="librdkafka")
    parser.add_argument("--modes", default="receive,send")
    args = parser.parse_args(argv)
    modes = {m.strip() for m in args.modes.split(",")}
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        ca, _ = ensure_ca(Path(tmp))
        cert = issue(Path(tmp), "server", hosts=("127.0.0.1",))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert.pem)
        results: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for mode, ways in WAYS.items():
                if mode not in modes:
                    continue
                for way in ways:
                    figure = uvloop.run(_run_once(way, mode, args.mb, ctx, ca, args.records))
                    results.setdefault((mode, way), []).append(figure)
    print(
        f"{args.mb} MiB over loopback, client records {args.records} (receive), server "
        f"CPU-s/GB, median of {args.rounds}"
    )
    for (mode, way), figures in results.items():
        listed = " ".join(f"{f:.2f}" for f in figures)
        print(f"  {mode:<8} {way:<11} {statistics.median(figures):5.2f}   ({listed})")


if __name__ == "__main__":
    main(sys.argv[1:])
