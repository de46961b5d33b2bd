"""The data link over a Unix socket between a gateway and a storage node on one host
(docs/data-link.md, "Same host"; docs/security.md, "Between services").

Over TCP with internal TLS every record byte is encrypted by the sender and decrypted
by the receiver; on one host a Unix socket protected by file permissions does the same
job for nothing. What protects it:

* the socket file is mode 0600 in a directory of mode 0700 owned by the node's user:
  only that user (and root) can connect;
* each side checks the other's uid (``SO_PEERCRED``) against its own and closes the
  connection on a difference;
* the node writes a hello (:mod:`odradek.datalink.unix_hello`) before anything else, so
  a gateway only uses a path that leads to the node it means.

Anything that may connect could already read every service's private key under the
data dir, so the socket grants nothing TLS would withhold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from odradek.datalink.unix_hello import HELLO_SIZE, hello_mismatch

log = logging.getLogger(__name__)

# sun_path is 108 bytes on Linux, the last one the terminating NUL.
MAX_PATH_BYTES = 107
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")

P = TypeVar("P", bound=asyncio.BaseProtocol)

# What a Unix stream socket holds in flight is the sender's send buffer (208 KiB by
# default, net.core.wmem_default), while loopback TCP grows its buffers to megabytes:
# without this a 1 MB Fetch answer or Produce would take five hand-offs between the
# processes, each a wait for a CPU on a busy host. Capped by net.core.wmem_max.
SEND_BUFFER_BYTES = 4 << 20


class UnixLinkError(Exception):
    """The Unix socket cannot be used; the caller falls back to TCP."""


def host_id() -> str:
    """What a node registers as its host: the Linux boot id (hostname elsewhere). Only a
    filter: two containers of one host share it, the hello tells their nodes apart."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return socket.gethostname()


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    return int(_PEERCRED.unpack(creds)[1])


def peer_refusal(sock: socket.socket, own_uid: int | None = None) -> str | None:
    """Why the peer of ``sock`` may not use the link (another uid); None when it may."""
    own = os.geteuid() if own_uid is None else own_uid
    try:
        uid = peer_uid(sock)
    except OSError as exc:
        return f"no peer credentials: {exc}"
    if uid != own:
        return f"peer uid {uid} is not {own}"
    return None


def _grow_send_buffer(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


def prepare_path(path: Path) -> None:
    """Make ``path``'s directory ours and private (0700), remove a stale socket at
    ``path``; raises UnixLinkError when the path cannot be served safely."""
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise UnixLinkError(f"{path}: longer than the {MAX_PATH_BYTES} bytes of a socket path")
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise UnixLinkError(f"{directory}: not a directory owned by uid {os.geteuid()}")
    os.chmod(directory, 0o700)
    try:
        existing = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(existing.st_mode):
        raise UnixLinkError(f"{path}: exists and is not a socket")
    path.unlink()  # left behind by an earlier start of this node


class UnixListener:
    """Accepts connections on ``path``, refuses other users' and hands each accepted
    connection, after the hello, to a protocol from ``protocol_factory``."""

    def __init__(
        self, path: Path, hello: bytes, protocol_factory: Callable[[], asyncio.BaseProtocol]
    ) -> None:
        self.path = path
        self.hello = hello
        self.protocol_factory = protocol_factory
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None

    def start(self) -> None:
        prepare_path(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is born 0600
        try:
            sock.bind(os.fsencode(self.path))
        except OSError as exc:
            sock.close()
            raise UnixLinkError(f"{self.path}: {exc}") from exc
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        sock.listen(256)
        sock.setblocking(False)
        self._sock = sock
        self._accepting = asyncio.ensure_future(self._accept_loop(sock))

    async def _accept_loop(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listening)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                log.warning("data link: accept on %s failed: %s", self.path, exc)
                await asyncio.sleep(0.1)
                continue
            refusal = peer_refusal(sock)
            if refusal is not None:
                log.warning("data link: refused a connection on %s: %s", self.path, refusal)
                sock.close()
                continue
            try:
                sock.setblocking(False)
                _grow_send_buffer(sock)
                await loop.sock_sendall(sock, self.hello)
                await loop.connect_accepted_socket(self.protocol_factory, sock)
            except OSError as exc:
                log.info("data link: a connection on %s went away: %s", self.path, exc)
                sock.close()

    async def stop(self) -> None:
        """Stop accepting and remove the socket file; accepted connections stay open."""
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(BaseException):
                await self._accepting
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            with contextlib.suppress(OSError):
                self.path.unlink()


async def open_unix(
    path: str,
    node_id: int,
    token: bytes,
    protocol_factory: Callable[[], P],
    timeout: float = 2.0,
) -> P:
    """A connection to storage node ``node_id``'s Unix socket once its owner is our user
    and its hello names that node and ``token``; raises UnixLinkError otherwise."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    _grow_send_buffer(sock)
    try:
        async with asyncio.timeout(timeout):
            await loop.sock_connect(sock, path)
            refusal = peer_refusal(sock)
            if refusal is not None:
                raise UnixLinkError(refusal)
            hello = b""
            while len(hello) < HELLO_SIZE:
                chunk = await loop.sock_recv(sock, HELLO_SIZE - len(hello))
                if not chunk:
                    raise UnixLinkError("closed before its hello")
                hello += chunk
            mismatch = hello_mismatch(hello, node_id, token)
            if mismatch is not None:
                raise UnixLinkError(mismatch)
            _, protocol = await loop.create_unix_connection(protocol_factory, sock=sock)
    except UnixLinkError:
        sock.close()
        raise
    except (OSError, TimeoutError) as exc:
        sock.close()
        raise UnixLinkError(f"{type(exc).__name__}: {exc}") from exc
    return protocol
