"""One Kafka client connection: framing, pipelining, in-order responses, limits.

Kafka clients pipeline requests on one connection and match responses by
correlation id, but the protocol promises responses in request order. Each decoded
request starts its handler at once (so a long-poll Fetch does not stall a Metadata
behind it from being *computed*), and a single writer task sends results strictly in
arrival order.

Limits, with Kafka's names where Kafka has one:
- ``socket.request.max.bytes``: a larger size prefix closes the connection before
  the body is buffered (Kafka logs ``InvalidReceiveException`` and closes);
- ``queued.max.requests`` (per connection here) and ``queued.max.request.bytes``:
  past either bound the connection stops reading until responses drain;
- ``connections.max.idle.ms``: a connection with nothing in flight and no traffic
  for that long is closed.

Bad input never escapes this module: protocol errors either get Kafka's error
response or close this connection only (see ``odradek.protocol.errors_policy``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.gateway.ordered_lanes import OrderedLanes
from odradek.protocol.exceptions import ProtocolError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import RequestHeader, parse_request_header

log = logging.getLogger(__name__)

# A handler result: framed response bytes, the frame as buffers to send in order
# without joining them (a Fetch response's record payloads), or None for "send
# nothing" (acks=0).
Result = bytes | list[bytes | bytearray | memoryview] | None
Dispatch = Callable[["ConnectionContext", RequestHeader, memoryview], Awaitable[Result]]


@dataclass(slots=True)
class ConnectionLimits:
    max_request_bytes: int = GATEWAY_CONFIGS.int("socket.request.max.bytes")
    max_inflight_requests: int = GATEWAY_CONFIGS.int("queued.max.requests")
    max_inflight_bytes: int = GATEWAY_CONFIGS.int("queued.max.request.bytes")
    idle_timeout_s: float = GATEWAY_CONFIGS.int("connections.max.idle.ms") / 1000.0


class CloseConnection(Exception):
    """Raised by a handler to drop this connection (Kafka's reaction to bad requests)."""


@dataclass(slots=True)
class ConnectionContext:
    """What a request handler knows of its connection (one per connection)."""

    connection_id: int
    peer: str
    # The broker (storage node id) the client addressed: the listener it connected to
    # is that broker's port (docs/brokers.md). None on the bootstrap listener, which
    # answers broker-scoped requests (DescribeLogDirs, ListGroups, ...) as the whole
    # cluster.
    broker_id: int | None = None
    client_software: str = ""
    client_software_version: str = ""
    # Produce and OffsetCommit requests keep their order per connection (ordered_lanes.py).
    lanes: OrderedLanes = field(default_factory=OrderedLanes)


class KafkaConnection(asyncio.Protocol):
    _next_id = 0

    def __init__(
        self,
        dispatch: Dispatch,
        limits: ConnectionLimits,
        on_close: Callable[[KafkaConnection], None],
        broker_id: int | None = None,
    ) -> None:
        KafkaConnection._next_id += 1
        self.dispatch = dispatch
        self.limits = limits
        self.on_close = on_close
        self.decoder = FrameDecoder(limits.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.ctx = ConnectionContext(KafkaConnection._next_id, "?", broker_id)
        self.pending: collections.deque[tuple[asyncio.Future[Result], int]] = collections.deque()
        self.inflight_bytes = 0
        self.reading_paused = False
        self.writable = asyncio.Event()
        self.writable.set()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.last_activity = time.monotonic()
        self.writer_task: asyncio.Task[None] | None = None
        self.draining = False

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        peer = transport.get_extra_info("peername")
        self.ctx.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.writer_task = asyncio.get_running_loop().create_task(self._write_loop())

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as exc:
            log.info("closing %s: %s", self.ctx.peer, exc)
            self.close()
            return
        for frame in frames:
            self._start(frame)
        if not self.closed and (
            len(self.pending) >= self.limits.max_inflight_requests
            or self.inflight_bytes >= self.limits.max_inflight_bytes
        ):
            self._pause_reading()

    def eof_received(self) -> bool | None:
        # Half-close: let queued responses go out, then close (Kafka closes on EOF).
        self.draining = True
        self.wakeup.set()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for fut, _ in self.pending:
            fut.cancel()
        self.pending.clear()
        self.wakeup.set()
        self.writable.set()
        if self.writer_task is not None:
            self.writer_task.cancel()
        self.on_close(self)

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    # -- requests ------------------------------------------------------------------------
    def _start(self, frame: memoryview | bytes) -> None:
        body = memoryview(frame)
        size = len(body)
        try:
            header, offset = parse_request_header(body)
        except ProtocolError as exc:
            log.info("closing %s: bad request header: %s", self.ctx.peer, exc)
            self.close()
            return
        fut: asyncio.Future[Result] = asyncio.ensure_future(self._run(header, body[offset:]))
        self.pending.append((fut, size))
        self.inflight_bytes += size
        self.wakeup.set()

    async def _run(self, header: RequestHeader, body: memoryview) -> Result:
        return await self.dispatch(self.ctx, header, body)

    async def _write_loop(self) -> None:
        try:
            while not self.closed:
                if not self.pending:
                    if self.draining:
                        self.close()
                        return
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                fut, size = self.pending[0]
                try:
                    result = await fut
                except CloseConnection:
                    self.close()
                    return
                except asyncio.CancelledError:
                    if self.closed:
                        return
                    raise
                except Exception:
                    log.exception("handler failed on %s; closing the connection", self.ctx.peer)
                    self.close()
                    return
                if self.closed:
                    return
                self.pending.popleft()
                self.inflight_bytes -= size
                if result:
                    await self.writable.wait()
                    if self.closed or self.transport is None:
                        return
                    if isinstance(result, list):
                        self.transport.writelines(result)
                    else:
                        self.transport.write(result)
                    self.last_activity = time.monotonic()
                if self.reading_paused and (
                    len(self.pending) < self.limits.max_inflight_requests // 2
                    and self.inflight_bytes < self.limits.max_inflight_bytes // 2
                ):
                    self._resume_reading()
        except asyncio.CancelledError:
            pass

    def _pause_reading(self) -> None:
        if self.transport is not None and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.transport is not None and self.reading_paused and not self.closed:
            self.reading_paused = False
            self.transport.resume_reading()

    @property
    def idle(self) -> bool:
        return (
            not self.pending and time.monotonic() - self.last_activity > self.limits.idle_timeout_s
        )

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True


class KafkaListener:
    """The TCP listener: accepts connections, reaps idle ones, drains on stop.

    ``broker_id`` names the broker this listener is the port of (None: bootstrap);
    every connection it accepts carries it in its :class:`ConnectionContext`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        dispatch: Dispatch,
        limits: ConnectionLimits,
        broker_id: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.broker_id = broker_id
        self.dispatch = dispatch
        self.limits = limits
        self.connections: set[KafkaConnection] = set()
        self.server: asyncio.base_events.Server | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.on_count_change: Callable[[int], None] | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(self._make, self.host, self.port, backlog=1024)
        self.port = self.server.sockets[0].getsockname()[1]
        self._reaper = loop.create_task(self._reap())
        return self.port

    def _make(self) -> KafkaConnection:
        conn = KafkaConnection(self.dispatch, self.limits, self._closed, self.broker_id)
        self.connections.add(conn)
        if self.on_count_change:
            self.on_count_change(len(self.connections))
        return conn

    def _closed(self, conn: KafkaConnection) -> None:
        self.connections.discard(conn)
        if self.on_count_change:
            self.on_count_change(len(self.connections))

    async def _reap(self) -> None:
        interval = max(0.05, min(30.0, self.limits.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(interval)
            for conn in list(self.connections):
                if conn.idle:
                    conn.close()

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (bounded), then close all."""
        if self.server is not None:
            self.server.close()
        if self._reaper is not None:
            self._reaper.cancel()
        for conn in list(self.connections):
            conn.draining = True
            conn.wakeup.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while any(c.pending for c in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            conn.close()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
