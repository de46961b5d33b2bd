"""The data link's Unix socket (odradek.datalink.unix_socket, docs/data-link.md "Same
host") with real sockets: the listener makes its directory 0700 and its socket 0600,
removes a stale socket, writes the hello, and refuses a peer of another uid
(SO_PEERCRED; a real process running as ``nobody``, and the check itself on a
socketpair); the caller takes only a hello naming the node and token it expects;
the hello itself (odradek.datalink.unix_hello)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.datalink.same_host import SameHostLinks
from odradek.datalink.unix_hello import (
    HELLO_SIZE,
    TOKEN_BYTES,
    encode_hello,
    hello_mismatch,
    new_token,
)
from odradek.datalink.unix_socket import (
    UnixLinkError,
    UnixListener,
    open_unix,
    peer_refusal,
)
from odradek.rpc.v1 import common_pb2

NODE = 100


class _Echo(asyncio.Protocol):
    """Stands in for the data link's frame protocol: echoes what it receives."""

    def __init__(self, echo: bool = True) -> None:
        self.echo = echo
        self.transport: asyncio.Transport | None = None
        self.received = bytearray()
        self.got = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received += data
        self.got.set()
        if self.echo and self.transport is not None:
            self.transport.write(data)


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory every user can enter (pytest's tmp_path is under a 0700 root), so
    that only the listener's own permissions keep other users out."""
    d = Path(tempfile.mkdtemp(prefix="odk-ux-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_hello_names_node_and_start() -> None:
    token = new_token()
    hello = encode_hello(NODE, token)
    assert len(hello) == HELLO_SIZE and len(token) == TOKEN_BYTES
    assert hello_mismatch(hello, NODE, token) is None
    assert "storage node 101's" in (hello_mismatch(encode_hello(101, token), NODE, token) or "")
    assert "another start" in (hello_mismatch(hello, NODE, new_token()) or "")
    assert "not a data link socket" in (hello_mismatch(b"X" * HELLO_SIZE, NODE, token) or "")
    assert "bytes" in (hello_mismatch(hello[:-1], NODE, token) or "")


def test_peer_check_on_a_socketpair() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_refusal(a) is None
        refusal = peer_refusal(a, own_uid=os.geteuid() + 1)
        assert refusal is not None and f"peer uid {os.geteuid()}" in refusal


async def test_listener_serves_after_the_hello(world_dir: Path) -> None:
    path = world_dir / "link" / "data.sock"
    path.parent.mkdir(mode=0o755)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # left behind by an earlier start
    stale.close()
    token = new_token()
    served: list[_Echo] = []

    def factory() -> _Echo:
        served.append(_Echo())
        return served[-1]

    listener = UnixListener(path, encode_hello(NODE, token), factory)
    listener.start()
    try:
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.lstat().st_mode) == 0o600
        conn = await open_unix(str(path), NODE, token, lambda: _Echo(echo=False))
        assert conn.transport is not None
        conn.transport.write(b"frame")
        await asyncio.wait_for(conn.got.wait(), 5)
        assert bytes(conn.received) == b"frame" and bytes(served[0].received) == b"frame"
        conn.transport.close()
        for node_id, tok, reason in (
            (101, token, "storage node 100's"),
            (NODE, new_token(), "another start"),
        ):
            with pytest.raises(UnixLinkError, match=reason):
                await open_unix(str(path), node_id, tok, _Echo)
        with pytest.raises(UnixLinkError, match="FileNotFoundError"):
            await open_unix(str(world_dir / "none.sock"), NODE, token, _Echo)
    finally:
        await listener.stop()
    assert not path.exists()


async def test_same_host_links_try_the_socket_only_when_it_fits(world_dir: Path) -> None:
    path = world_dir / "link" / "data.sock"
    token = new_token()
    listener = UnixListener(path, encode_hello(NODE, token), _Echo)
    listener.start()
    links = SameHostLinks(host="h1")
    try:
        here = common_pb2.DataSocket(path=str(path), host_id="h1", token=token)
        assert await links.open(NODE, None, _Echo) is None
        elsewhere = common_pb2.DataSocket(path=str(path), host_id="h2", token=token)
        assert await links.open(NODE, elsewhere, _Echo) is None
        stale = common_pb2.DataSocket(path=str(path), host_id="h1", token=bytes(TOKEN_BYTES))
        assert await links.open(NODE, stale, _Echo) is None
        assert not links.candidate(NODE, stale)  # not tried again for a while
        conn = await links.open(NODE, here, _Echo)
        assert conn is not None and conn.transport is not None
        conn.transport.close()
    finally:
        await listener.stop()


def test_a_refused_start_is_not_a_candidate_for_a_while() -> None:
    """A follower whose leader (an older version) refuses replica fetches on its socket
    under internal TLS marks that start refused and fetches over gRPC (fetcher.py); the
    node's next start is tried again."""
    links = SameHostLinks(host="h1")
    start = common_pb2.DataSocket(path="/x/data.sock", host_id="h1", token=new_token())
    assert links.candidate(NODE, start)
    links.refuse(NODE, start)
    assert not links.candidate(NODE, start)
    restarted = common_pb2.DataSocket(path="/x/data.sock", host_id="h1", token=new_token())
    assert links.candidate(NODE, restarted)


_CONNECT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(type(exc).__name__)
else:
    print("connected", len(s.recv(64)))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as nobody")
async def test_another_user_is_refused(world_dir: Path) -> None:
    path = world_dir / "link" / "data.sock"
    listener = UnixListener(path, encode_hello(NODE, new_token()), _Echo)
    listener.start()

    def as_nobody() -> str:
        done = subprocess.run(
            ["/usr/bin/python3", "-c", _CONNECT, str(path)],
            user="nobody",
            capture_output=True,
            text=True,
            timeout=30,
        )
        return done.stdout.strip() or done.stderr

    try:
        # The directory keeps others out.
        assert await asyncio.to_thread(as_nobody) == "PermissionError"
        # Opened up by mistake, the uid check still refuses: closed before any hello.
        path.parent.chmod(0o755)
        path.chmod(0o777)
        assert await asyncio.to_thread(as_nobody) == "connected 0"
    finally:
        await listener.stop()
