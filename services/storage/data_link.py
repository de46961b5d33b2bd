"""The storage node's side of the data link (docs/data-link.md): Produce and Fetch for
gateways over plain TCP, the record batches beside a small protobuf head
(:mod:`odradek.datalink.frame`).

The handlers are the gRPC servicer's (:class:`~odradek.storage.produce.ProduceHandler`,
:class:`~odradek.storage.fetch.FetchHandler`), so acks, the high watermark, long polls
and ordering are exactly those of the gRPC path; only the transport differs. Fetched
batches go from ``os.pread`` to the socket without another copy (``writelines``); a
consumer's on the Unix socket go from the segment file by ``sendfile``
(:func:`send_direct`, docs/data-link.md "Consume CPU per GB").
Calls answer in any order. A Produce whose append needs no await and a fetch (a
follower's or a consumer's) are served without a task (appended, or read, as the frame
arrives; an acks=-1 wait or a parked fetch kept as loop callbacks: issue 18); every
other call runs as its own task. Produce requests of one
``ordering_lane`` (a gateway's client connection) append in arrival order, each after
the previous one's append (its acks=-1 wait runs alongside the next one's); until the
node is up a call gets an ERROR answer (the gateway answers the client as for an unreachable node). A
malformed frame closes the connection, never the node.

Followers' replica fetches come here too (:mod:`odradek.storage.fetcher`). With
internal TLS (:mod:`odradek.internal_tls`) the TCP listener requires a client
certificate from the cluster CA naming a gateway, and closes any other connection; a
Fetch with a ``replica_id`` is then refused over TCP (a gateway may not act as a
follower), and followers on other hosts fetch over gRPC, where the peer rules check
that the certificate names that replica. The same server may also accept on a Unix
socket for gateways and followers on this host (:mod:`odradek.datalink.unix_socket`):
no TLS there, peers of our own uid only, who can read every member's key anyway
(docs/security.md, "the data link on one host").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from odradek import internal_tls
from odradek.datalink.connection import FrameProtocol
from odradek.datalink.frame import (
    ERROR,
    FETCH,
    OK,
    PRODUCE,
    Buffer,
    Frame,
    FrameError,
    encode,
    meta_bytes,
)
from odradek.datalink.unix_socket import UnixListener
from odradek.internal_tls import Member, parse_member
from odradek.log.file_range import FileRange
from odradek.rpc.server import MAX_MESSAGE_BYTES
from odradek.rpc.v1 import storage_pb2
from odradek.storage.deadlines import Deadlines
from odradek.storage.fetch import Answer, ParkedFetch
from odradek.storage.replication_wait import ReplicationWait
from odradek.storage.wakeup_turn import WakeupTurn

if TYPE_CHECKING:
    from odradek.storage.servicer import Handlers

log = logging.getLogger(__name__)

# The answer to a replica fetch over TCP under internal TLS (and, before 2026-11-27, on
# the Unix socket too: a follower that meets it there falls back to gRPC, fetcher.py).
REPLICA_FETCH_REFUSED = "followers fetch over gRPC under internal TLS"


class _Connection(FrameProtocol):
    def __init__(self, server: DataLinkServer, local: bool = False) -> None:
        super().__init__(server.max_frame_bytes)
        self.server = server
        # Accepted on the Unix socket: the peer is our own user (SO_PEERCRED), no TLS.
        self.local = local
        self.tasks: set[asyncio.Task[None]] = set()
        # ordering lane -> done when the lane's latest Produce has appended
        self.lane_tails: dict[int, asyncio.Future[None]] = {}
        self.loop = asyncio.get_running_loop()
        # Answers finished in one loop turn, written together at the next (_send).
        self.outbox: list[Buffer | FileRange] = []
        # Calls waiting without a task (acks=-1 Produce, a parked Fetch), by
        # correlation id: _produce_now, _fetch_now.
        self.parked: dict[int, ReplicationWait | ParkedFetch] = {}
        # Their deadlines, behind one loop timer (a timer per parked call cost more
        # than the rest of the wait: odradek.storage.deadlines).
        self.deadlines = Deadlines(self.loop)
        # The loop's: parked calls re-check together, answers written right after.
        self.turn = server.wakeup_turn(self.loop)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self.server.tls is not None and not self.local:
            member = _member(transport.get_extra_info("peercert"))
            if member is None or member.kind != "gateway":
                log.warning(
                    "data link: refused %s from %s: only gateways call the data link",
                    member or "a certificate naming no member",
                    transport.get_extra_info("peername"),
                )
                transport.close()
                return
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        for task in self.tasks:
            task.cancel()
        parked, self.parked = self.parked, {}
        for call in parked.values():
            call.cancel()
        self.deadlines.close()

    def bad_frame(self, exc: FrameError) -> None:
        log.warning("data link: closing a connection after a bad frame: %s", exc)
        if self.transport is not None:
            self.transport.close()

    def frame_received(self, frame: Frame) -> None:
        fetch = None
        if frame.kind == PRODUCE:
            produce = _produce_head(frame)
            if produce is not None and self._produce_now(frame, produce):
                return
        else:
            produce = None
            if frame.kind == FETCH:
                fetch = _fetch_head(frame)
                if fetch is not None and self._fetch_now(frame, fetch):
                    return
        turn = self._lane_turn(produce.ordering_lane) if produce is not None else None
        # The task leaves ``tasks`` itself when it ends (_serve): a done callback would
        # be one more loop callback per frame, several per replicated record (issue 18).
        self.tasks.add(self.loop.create_task(self._serve(frame, produce or fetch, turn)))

    def _produce_now(self, frame: Frame, produce: storage_pb2.ProduceRequest) -> bool:
        """Serve a Produce without a task when its append needs no await and no earlier
        Produce of its lane is still waiting to append: appended here, answered from
        the acks=-1 wait's callbacks (replication_wait.ReplicationWait). The common
        one-record Produce; a task and the coroutines it runs through were a good
        share of the call's CPU (issue 18). False: serve it as a task."""
        if produce.ordering_lane in self.lane_tails:
            return False  # the lane's previous append is still to come
        handlers = self.server.handlers()
        if handlers is None:
            return False
        cid = frame.correlation_id
        try:
            staged = handlers.produce.append_now(produce, frame.blobs)
            if staged is None:
                return False
            wait = handlers.produce.complete_later(
                staged,
                self.loop,
                functools.partial(self._produced, cid),
                self.deadlines,
                self.turn,
            )
        except Exception as exc:
            log.exception("data link call of kind %d failed", frame.kind)
            self._send(encode(cid, ERROR, f"{type(exc).__name__}: {exc}".encode(), []))
            return True
        if wait is not None:
            self.parked[cid] = wait
        return True

    def _produced(self, cid: int, answer: storage_pb2.ProduceResponse) -> None:
        self.parked.pop(cid, None)
        self._send(encode(cid, OK, answer.SerializeToString(), []))

    def _fetch_now(self, frame: Frame, fetch: storage_pb2.FetchRequest) -> bool:
        """Serve a fetch without a task: answered at once when there is something to
        send, else parked as callbacks (fetch.ParkedFetch) until its partitions change
        or its wait ends; a leader parks each follower's fetch, and a gateway's for
        its consumers, about once per replicated record (issue 18). A consumer's
        records on the Unix socket go by sendfile (``lazy``, flush). False: serve it as
        a task (a follower's fetch over TCP under internal TLS, which the task refuses;
        the node still starting)."""
        replica = fetch.replica_id >= 0
        if replica and self.server.tls is not None and not self.local:
            return False
        handlers = self.server.handlers()
        if handlers is None:
            return False
        cid = frame.correlation_id
        try:
            parked = handlers.fetch.fetch_later(
                fetch,
                self.loop,
                functools.partial(self._fetched, cid, frame.kind),
                lazy=self.local and not replica,
                deadlines=self.deadlines,
                turn=self.turn,
            )
        except Exception as exc:
            self._fetched(cid, frame.kind, exc)
            return True
        if parked is not None:
            self.parked[cid] = parked
        return True

    def _fetched(self, cid: int, kind: int, answer: Answer | Exception) -> None:
        self.parked.pop(cid, None)
        if isinstance(answer, Exception):
            log.error("data link call of kind %d failed", kind, exc_info=answer)
            self._send(encode(cid, ERROR, f"{type(answer).__name__}: {answer}".encode(), []))
            return
        response, records = answer
        self._send(encode(cid, OK, response.SerializeToString(), records))

    def _lane_turn(self, lane: int) -> _Turn | None:
        """A Produce on an ordering lane waits for the lane's previous append; frames are
        handled here in arrival order, so the lane's order is the sender's."""
        if not lane:
            return None
        ours: asyncio.Future[None] = self.loop.create_future()
        previous = self.lane_tails.get(lane)
        self.lane_tails[lane] = ours
        return _Turn(lane, previous, ours)

    def _pass_lane(self, turn: _Turn) -> None:
        """The lane's next Produce may append (called once ours has, or failed)."""
        if not turn.ours.done():
            turn.ours.set_result(None)
        if self.lane_tails.get(turn.lane) is turn.ours:
            del self.lane_tails[turn.lane]

    async def _serve(
        self,
        frame: Frame,
        head: storage_pb2.ProduceRequest | storage_pb2.FetchRequest | None,
        turn: _Turn | None,
    ) -> None:
        try:
            try:
                kind, meta, blobs = await self._answer(frame, head, turn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("data link call of kind %d failed", frame.kind)
                kind, meta, blobs = ERROR, f"{type(exc).__name__}: {exc}".encode(), []
            finally:
                if turn is not None:
                    self._pass_lane(turn)  # never hold the lane up after a failure
        finally:
            self.tasks.discard(asyncio.current_task(self.loop))  # type: ignore[arg-type]
        self._send(encode(frame.correlation_id, kind, meta, blobs))

    def _send(self, buffers: Sequence[Buffer | FileRange]) -> None:
        """Queue an answer; the answers of one loop turn go out in one write.

        A high watermark advance completes an acks=-1 Produce and wakes a gateway's
        long-poll Fetch in the same turn, on the same connection: one ``writev``
        instead of two, which on a loaded host is also one wake-up of the gateway
        instead of two (issue 18; the syscall was a sixth of a leader's busy time).
        Answers given by parked calls' re-checks go out at the end of their run
        (odradek.storage.wakeup_turn), in the same loop turn.
        """
        if not self.outbox and not self.turn.after(self.flush):
            self.loop.call_soon(self.flush)
        self.outbox.extend(buffers)

    def flush(self) -> None:
        """Write the queued answers now (scheduled by :meth:`_send`; also at stop)."""
        if not self.outbox:
            return
        out, self.outbox = self.outbox, []
        transport = self.transport
        if transport is None or transport.is_closing():
            _close_ranges(out)  # their descriptors now, not whenever the GC drops them
            return
        if not any(isinstance(b, FileRange) for b in out):
            transport.writelines(cast("list[Buffer]", out))
            return
        try:
            sock = transport.get_extra_info("socket")
            if sock is not None and transport.get_write_buffer_size() == 0:
                rest = send_direct(sock.fileno(), out)
            else:
                rest = [b.read() if isinstance(b, FileRange) else b for b in out]
        except OSError as exc:
            # Part of a frame may be written: the stream cannot go on. The gateway fails
            # the calls in flight on this connection as for a lost node, and reconnects.
            log.warning("data link: closing a connection after a failed send: %s", exc)
            transport.abort()
            return
        finally:
            _close_ranges(out)
        if rest:
            transport.writelines(rest)

    async def _answer(
        self,
        frame: Frame,
        head: storage_pb2.ProduceRequest | storage_pb2.FetchRequest | None,
        turn: _Turn | None,
    ) -> tuple[int, bytes, list[Buffer | FileRange]]:
        if turn is not None and turn.previous is not None and not turn.previous.done():
            await asyncio.shield(turn.previous)  # never raises: always set_result
        handlers = self.server.handlers()
        if handlers is None:
            return ERROR, b"storage node is starting", []
        if frame.kind == FETCH:
            fetch = (
                head
                if isinstance(head, storage_pb2.FetchRequest)
                else storage_pb2.FetchRequest.FromString(meta_bytes(frame))
            )
            if fetch.replica_id >= 0 and self.server.tls is not None and not self.local:
                # Over TCP the certificate named a gateway: followers on other hosts
                # fetch over gRPC. The Unix socket's peer is our own uid (see above).
                return ERROR, REPLICA_FETCH_REFUSED.encode(), []
            # A consumer's records on the Unix socket go by sendfile (flush).
            lazy = self.local and fetch.replica_id < 0
            response, records = await handlers.fetch.fetch_split(fetch, self.loop, lazy=lazy)
            return OK, response.SerializeToString(), list(records)
        if frame.kind == PRODUCE:
            produce = head if isinstance(head, storage_pb2.ProduceRequest) else None
            if produce is None:  # the head did not parse: fail the call with the reason
                produce = storage_pb2.ProduceRequest.FromString(meta_bytes(frame))
            staged = await handlers.produce.append(produce, frame.blobs)
            if turn is not None:
                self._pass_lane(turn)  # appended: the lane's next request may go
            answer = await handlers.produce.complete(staged, self.loop)
            return OK, answer.SerializeToString(), []
        return ERROR, f"unknown call kind {frame.kind}".encode(), []


@dataclass(slots=True)
class _Turn:
    """A Produce's place on its ordering lane."""

    lane: int
    previous: asyncio.Future[None] | None
    ours: asyncio.Future[None]


def send_direct(fd: int, out: list[Buffer | FileRange]) -> list[Buffer]:
    """Write ``out`` to the socket ``fd`` (non-blocking; nothing of ours queued before
    it) while the socket takes it, each FileRange by ``sendfile``: on Linux 6.5+ a Unix
    socket takes the page cache's pages without a copy (docs/data-link.md, "Consume CPU
    per GB"). Returns what the socket did not take, as buffers, in order, for the
    transport. Raises OSError (the connection is broken, or a range's file shrank)."""
    i, n = 0, len(out)
    while i < n:
        item = out[i]
        if isinstance(item, FileRange):
            sent = 0
            with contextlib.suppress(BlockingIOError):
                while sent < item.size:
                    k = os.sendfile(fd, item.fd, item.position + sent, item.size - sent)
                    if k == 0:
                        raise OSError("log file range shrank before it was sent")
                    sent += k
            if sent < item.size:
                return [item.read(sent), *_read_all(out[i + 1 :])]
            i += 1
            continue
        j = i + 1
        while j < n and not isinstance(out[j], FileRange):
            j += 1
        chunk = cast("list[Buffer]", out[i:j])
        try:
            written = os.writev(fd, chunk)
        except BlockingIOError:
            written = 0
        if written < sum(len(b) for b in chunk):
            rest: list[Buffer] = []
            for b in chunk:
                if written >= len(b):
                    written -= len(b)
                    continue
                rest.append(memoryview(b)[written:] if written else b)
                written = 0
            return rest + _read_all(out[j:])
        i = j
    return []


def _close_ranges(items: list[Buffer | FileRange]) -> None:
    for b in items:
        if isinstance(b, FileRange):
            b.close()


def _read_all(items: list[Buffer | FileRange]) -> list[Buffer]:
    return [b.read() if isinstance(b, FileRange) else b for b in items]


def _member(cert: dict[str, Any] | None) -> Member | None:
    """The member a verified peer certificate (``ssl`` module form) names."""
    for kind, value in (cert or {}).get("subjectAltName", ()):
        if kind == "URI":
            member = parse_member(value)
            if member is not None:
                return member
    return None


def _fetch_head(frame: Frame) -> storage_pb2.FetchRequest | None:
    """A Fetch frame's head (None when it does not parse: the task then fails the call
    with the parse error)."""
    try:
        return storage_pb2.FetchRequest.FromString(meta_bytes(frame))
    except Exception:
        return None


def _produce_head(frame: Frame) -> storage_pb2.ProduceRequest | None:
    """A Produce frame's head, parsed once for its ``ordering_lane`` and its handling
    (None when it does not parse: the call then fails in :meth:`_Connection._answer`
    with the parse error)."""
    try:
        return storage_pb2.ProduceRequest.FromString(meta_bytes(frame))
    except Exception:
        return None


class DataLinkServer:
    """The listener; ``handlers()`` gives the node's handlers, None while starting."""

    def __init__(
        self,
        host: str,
        port: int,
        handlers: Callable[[], Handlers | None],
        max_frame_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.host = host
        self.port = port
        self.handlers = handlers
        self.max_frame_bytes = max_frame_bytes
        self.connections: set[_Connection] = set()
        self.tls = internal_tls.active()
        self._turn: WakeupTurn | None = None
        self._server: asyncio.base_events.Server | None = None
        self._unix: UnixListener | None = None

    def wakeup_turn(self, loop: asyncio.AbstractEventLoop) -> WakeupTurn:
        """The one queue of re-checks for every connection: an append wakes fetches
        parked on several (each follower's)."""
        if self._turn is None:
            self._turn = WakeupTurn(loop)
        return self._turn

    def serve_unix(self, path: Path, hello: bytes) -> None:
        """Also accept on a Unix socket for gateways on this host (raises UnixLinkError;
        docs/data-link.md, "Same host")."""
        self._unix = UnixListener(path, hello, lambda: _Connection(self, local=True))
        self._unix.start()

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self),
            self.host,
            self.port,
            backlog=256,
            ssl=self.tls.ssl_server_context() if self.tls else None,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self, grace: float = 1.0) -> None:
        """Stop accepting, let calls in flight answer (bounded), then close."""
        if self._server is not None:
            self._server.close()
        if self._unix is not None:
            await self._unix.stop()
        loop = asyncio.get_running_loop()
        until = loop.time() + grace
        busy = [t for conn in self.connections for t in conn.tasks]
        if busy:
            await asyncio.wait(busy, timeout=grace)
        while any(conn.parked for conn in self.connections) and loop.time() < until:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.flush()
            if conn.transport is not None:
                conn.transport.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
