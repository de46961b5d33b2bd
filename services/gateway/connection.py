"""One Kafka client connection: framing, pipelining, in-order responses, limits.

Kafka clients pipeline requests on one connection and match responses by
correlation id, but the protocol promises responses in request order. Responses are
written strictly in arrival order, by the callback that finishes the oldest unanswered
request (:meth:`KafkaConnection._flush`: no writer task woken per answer), together with
the answers already finished behind it.

Handling: Kafka handles one request per connection at a time (the channel is muted
until the response is sent, Kafka's ``SocketServer``/``Selector``). A gateway
pipelines, but at most ``connection.max.handled.requests`` requests of a connection
are being handled at once: later ones wait in the connection's start queue (a plain
deque) and are started by the connection itself, strictly in arrival order, each time
an earlier request's response has been handed to the transport. So a client that
pipelines hundreds of cheap requests and never reads holds a few handlers, not
hundreds, and the event loop's turns are shared between connections, not between
requests. Starting in arrival order is what keeps a connection's Produce requests in
order (they enter their Produce lane as their handlers start, produce_lane.py); a
semaphore's wake-up order is not a place to keep that. The default, 1, is Kafka's
behaviour (a long-poll Fetch holds up the requests behind it until it is answered),
with one exception that keeps Produce coalescing (produce_lane.py) working: while
only Produce requests are being handled, a Produce request at the head of the queue
starts at once and joins their lane (up to ``queued.max.requests``), and a Produce
request frees its place as soon as its records are handed to the storage nodes
(:func:`request_handed_off`): waiting for the acknowledgement costs the loop nothing.

A request whose whole answer is known without handling it (``answer_at_once``: the
gateway's repeated all-topics Metadata request) is answered in the callback that
starts it, when it could start anyway, with no task and no handler slot, while fewer
than ``SPLIT_AHEAD`` answers wait to be written and they stay under
``connection.max.unread.response.bytes``; they are sent together at the next loop
turn, in one write (issue 14's never-read clients: a task, a wake-up of the writer and a
write system call per answer before). Metadata requests start at most
``metadata_turns.PER_TURN`` per event loop turn over all connections, the rest in
the turns after (metadata_turns.py): never-read clients taking their answers together
had their connections answer 120 of them in one turn.

Limits, with Kafka's names where Kafka has one:
- ``socket.request.max.bytes``: a larger size prefix closes the connection before
  the body is buffered (Kafka logs ``InvalidReceiveException`` and closes);
- ``queued.max.requests`` and ``connection.max.queued.request.bytes`` (per
  connection, requests being handled plus those waiting to start): past either bound
  the connection stops reading until responses drain; a read holding more requests
  than the connection may still queue is split only that far, the rest kept unparsed
  until the queue drains (one read of small pipelined requests was thousands of
  frames split on one callback). Nor are more than ``SPLIT_AHEAD`` requests split
  off to wait behind those being handled: the rest stays unparsed bytes until they
  are needed (Kafka reads the next request only once the last one is answered). A
  client that pipelines hundreds of Metadata requests and never reads has ~57
  answered before it is held back; all 500 of ``queued.max.requests`` were split and
  queued on its first read (1-3 ms on one callback, bench hostile's 20 never-read
  clients reconnecting within ~100 ms of each other: issue 14);
- ``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes``: the kernel's
  buffers of a connection (Kafka's defaults, 100 KiB): without them a client that
  never reads has megabytes of responses computed and buffered before its socket's
  write buffer fills and the connection stops being read;
- ``queued.max.request.bytes``: the process's budget (memory_pool.py) for the bytes
  every connection holds (requests being read or handled, responses not yet sent);
  while it is used up, no connection is read from (Kafka mutes every channel);
- ``connections.max.idle.ms``: a connection with nothing in flight and no traffic
  for that long is closed;
- ``max.connections`` / ``max.connections.per.ip`` (``max.connections.per.ip.overrides``):
  counted over all listeners of the gateway (bootstrap and broker ports); a
  connection over either limit is closed as soon as it is accepted (Kafka closes
  per-IP excess the same way, but delays accepting past ``max.connections``);
- ``max.connection.creation.rate`` (KIP-612): new connections beyond that many per
  second, over all listeners, are accepted but not read from until their turn (Kafka's
  acceptor delays them the same way), so a reconnect storm is spread out, not refused;
- ``authentication.timeout.ms`` (listeners.py): a connection that has not finished
  its TLS handshake and SASL exchange by then is closed.

Security (listeners.py, authentication.py): the listener's TLS context wraps every
connection; the principal comes from the client certificate (SSL) or the SASL
exchange, ``User:ANONYMOUS`` otherwise.

Kafka handles one request per connection at a time, so a client that never reads
holds one response (plus the kernel's send buffer full of the answers before it).
Here a connection is not read from while its socket's write buffer is past the
transport's high-water mark (the client is not reading), nor, with
``connection.max.unread.response.bytes``, while more response bytes than that are
sent and not taken by the client (the transport's buffer plus the kernel's send
queue, Linux's ``SIOCOUTQ``): then it also starts none of its waiting requests,
Produce included, until the client has taken at least half of them (looked at again
on a backing-off timer: no event says a send queue has drained). Without it a
never-reading client had a send buffer full of small answers (Metadata, Produce)
computed per connection: hundreds of requests' work (docs/compatibility.md C28). Pipelining needs bounds of
its own (odradek settings, see docs/configuration.md), and a connection past any of
them is *aborted* (``transport.abort()``: a polite close would wait for the peer to
read first):
- ``connection.max.queued.response.bytes``: finished-but-unsent responses plus the
  socket's write buffer and the kernel's send queue;
- ``connection.write.timeout.ms``: response bytes waiting (the kernel's send queue
  counts) with none read by the peer;
- ``connection.request.read.timeout.ms``: one request's bytes trickling in for longer.

Refused and cut connections are logged once a second per reason (refusal_log.py): a
client reconnecting in a loop with what is refused costs no log line per attempt.

Bad input never escapes this module: protocol errors either get Kafka's error
response or close this connection only (see ``odradek.protocol.errors_policy``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import fcntl
import logging
import socket
import struct
import termios
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.certs import subject_dn
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.gateway.authentication import SaslSession
from odradek.gateway.listeners import ANONYMOUS, ListenerSecurity
from odradek.gateway.memory_pool import MemoryPool
from odradek.gateway.metadata_turns import metadata_turns
from odradek.gateway.ordered_lanes import OrderedLanes
from odradek.gateway.produce_lane import ProduceLane
from odradek.gateway.refusal_log import RefusalLog
from odradek.protocol.exceptions import ProtocolError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import RequestHeader, parse_request_header
from odradek.tls_reload import ReloadingServerContext

if TYPE_CHECKING:  # (fetch.py imports this module)
    from odradek.gateway.apis.fetch import Repeat

log = logging.getLogger(__name__)
# Refused and cut connections: one line a second per reason (refusal_log.py).
_refusals = RefusalLog(log)
_LINGER_ZERO = struct.pack("ii", 1, 0)
_PRODUCE = 0  # ApiKey.PRODUCE, and how a request frame starts with it (INT16 api key)
_PRODUCE_KEY = struct.pack(">h", _PRODUCE)
_METADATA_KEY = struct.pack(">h", 3)  # ApiKey.METADATA
# Linux's SIOCOUTQ (the same number as TIOCOUTQ): bytes in a TCP socket's send queue
# that the peer has not acknowledged yet (tcp(7)).
_SIOCOUTQ: int = getattr(termios, "TIOCOUTQ", -1)
_OUTQ = struct.Struct("i")
_OUTQ_ZERO = bytes(_OUTQ.size)
# How soon a connection held back by connection.max.unread.response.bytes looks at its
# send queue again: first soon (a reading client catches up in microseconds), then
# backing off so a client that never reads costs a few checks a second.
_UNREAD_RECHECK_FIRST_S = 0.001
_UNREAD_RECHECK_MAX_S = 0.5
# Requests of one connection split off its reads and waiting to start, at most: the
# rest of what it pipelined stays unparsed bytes until they are needed (module
# docstring). Splitting all of ``queued.max.requests`` at once cost 1-3 ms on one
# callback per bench hostile never-read reconnect (500 frames, ~57 of them ever
# answered), 20 of them within ~100 ms.
SPLIT_AHEAD = 8
# The most a connection's SO_SNDBUF grows to for one large response (a consumer's Fetch:
# librdkafka asks 1 MB per partition), capped by net.core.wmem_max (_grow_send_buffer).
GROWN_SEND_BUFFER_MAX = 4 * 1024 * 1024
# Connections the listener's timeout sweep looks at per loop turn (KafkaListener.sweep).
SWEEP_BATCH = 64

# A handler result: framed response bytes, the frame as buffers to send in order
# without joining them (a Fetch response's record payloads), or None for "send
# nothing" (acks=0).
Result = bytes | list[bytes | bytearray | memoryview] | None


def result_size(result: bytes | list[bytes | bytearray | memoryview]) -> int:
    """Bytes of a response, whole or as the buffers written with ``writelines``."""
    if isinstance(result, list):
        return sum(map(len, result))
    return len(result)


Dispatch = Callable[["ConnectionContext", RequestHeader, memoryview], Awaitable[Result]]
# A request's whole response frame when it is known without handling the request (a
# repeated all-topics Metadata request: the gateway's answer_at_once), or the future of
# its response when it is handled without a task (a Produce, a consumer's Fetch), else
# None: the connection then starts it as a task through Dispatch.
AnswerAtOnce = Callable[
    ["ConnectionContext", RequestHeader, memoryview], "bytes | asyncio.Future[Result] | None"
]


class RequestSlot:
    """One request's place among the ``connection.max.handled.requests`` of its
    connection; given back once (its response handed to the transport, or earlier by
    :func:`request_handed_off`)."""

    __slots__ = ("_release",)

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


# The slot of the request whose handler runs in the current task (each request runs
# in a task of its own, so each sees its own).
_SLOT: contextvars.ContextVar[RequestSlot | None] = contextvars.ContextVar(
    "odradek_request_slot", default=None
)


def request_handed_off() -> Callable[[], None]:
    """For a handler about to wait on something other than the event loop (a Produce
    whose records are handed to the storage nodes): the callback that lets its
    connection start the next request before this one's response is written.
    A no-op outside a connection's request."""
    slot = _SLOT.get()
    return slot.release if slot is not None else _nothing


def _nothing() -> None:
    pass


@dataclass(slots=True)
class ConnectionLimits:
    max_request_bytes: int = GATEWAY_CONFIGS.int("socket.request.max.bytes")
    max_inflight_requests: int = GATEWAY_CONFIGS.int("queued.max.requests")
    max_handled_requests: int = GATEWAY_CONFIGS.int("connection.max.handled.requests")
    # SO_SNDBUF of each connection, SO_RCVBUF of the listening sockets (-1: the OS's).
    send_buffer_bytes: int = GATEWAY_CONFIGS.int("socket.send.buffer.bytes")
    receive_buffer_bytes: int = GATEWAY_CONFIGS.int("socket.receive.buffer.bytes")
    max_inflight_bytes: int = GATEWAY_CONFIGS.int("connection.max.queued.request.bytes")
    idle_timeout_s: float = GATEWAY_CONFIGS.int("connections.max.idle.ms") / 1000.0
    max_queued_response_bytes: int = GATEWAY_CONFIGS.int("connection.max.queued.response.bytes")
    max_unread_response_bytes: int = GATEWAY_CONFIGS.int("connection.max.unread.response.bytes")
    request_read_timeout_s: float = (
        GATEWAY_CONFIGS.int("connection.request.read.timeout.ms") / 1000.0
    )
    write_timeout_s: float = GATEWAY_CONFIGS.int("connection.write.timeout.ms") / 1000.0
    # queued.max.request.bytes: one pool shared by every connection of the process.
    memory_pool: MemoryPool | None = None


class ConnectionQuota:
    """Open connections per client address and in total, shared by every listener."""

    def __init__(
        self,
        max_total: int = 2**31 - 1,
        max_per_ip: int = 2**31 - 1,
        overrides: dict[str, int] | None = None,
        max_creation_rate: int = 2**31 - 1,
    ) -> None:
        self.max_total = max_total
        self.max_per_ip = max_per_ip
        self.overrides = dict(overrides or {})
        self.total = 0
        self.by_ip: collections.Counter[str] = collections.Counter()
        self.max_creation_rate = max_creation_rate
        self._tokens = float(max_creation_rate)
        self._refilled = 0.0

    def creation_delay(self, now: float) -> float:
        """Seconds a connection accepted at ``now`` waits before it is read from:
        turns 1/rate apart, a second's worth of connections allowed at once."""
        rate = self.max_creation_rate
        if rate >= 2**31 - 1:
            return 0.0
        if rate <= 0:
            return float("inf")
        # A token bucket holding a second's worth; a connection without a token takes
        # one on credit and waits until the bucket has refilled it.
        self._tokens = min(float(rate), self._tokens + (now - self._refilled) * rate)
        self._refilled = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / rate

    @staticmethod
    def parse_overrides(value: str | None) -> dict[str, int]:
        """``max.connections.per.ip.overrides``: ``host:count,host:count``."""
        out: dict[str, int] = {}
        for item in (v.strip() for v in (value or "").split(",")):
            if item:
                host, _, count = item.rpartition(":")
                out[host] = int(count)
        return out

    def admit(self, host: str) -> bool:
        limit = self.overrides.get(host, self.max_per_ip)
        if self.total >= self.max_total or self.by_ip[host] >= limit:
            return False
        self.total += 1
        self.by_ip[host] += 1
        return True

    def release(self, host: str) -> None:
        self.total -= 1
        self.by_ip[host] -= 1
        if self.by_ip[host] <= 0:
            del self.by_ip[host]


class CloseConnection(Exception):
    """Raised by a handler to drop this connection (Kafka's reaction to bad requests)."""


def _set_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


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
    # Who the client is (Kafka's KafkaPrincipal, "User:name") and from which address.
    principal: str = ANONYMOUS
    host: str = "?"
    security_protocol: str = "PLAINTEXT"
    # The name of the listener the client connected to (``listeners``): Metadata,
    # FindCoordinator and DescribeCluster answer that listener's endpoints.
    listener: str = "PLAINTEXT"
    # SASL listeners: the exchange's state; requests other than ApiVersions and the
    # SASL ones are refused until ``authenticated`` (authentication.py).
    sasl: SaslSession | None = None
    authenticated: bool = True
    # Close the connection once the response being handled is written (Kafka closes
    # after answering SASL_AUTHENTICATION_FAILED).
    close_after_response: bool = False
    # KIP-368: when the SASL session ends (time.monotonic()); None: never. Its
    # length (connections.max.reauth.ms) comes from the listener.
    session_expires_at: float | None = None
    reauth_ms: int = 0
    # OffsetCommit requests keep their order per connection (ordered_lanes.py), Produce
    # requests theirs (produce_lane.py).
    lanes: OrderedLanes = field(default_factory=OrderedLanes)
    produce_lane: ProduceLane = field(default_factory=ProduceLane)
    # Client quotas (KIP-219): stop reading from this connection for that many ms;
    # the response carrying the throttle time goes out at once (set by KafkaConnection).
    mute: Callable[[int], None] | None = None
    # Set while not throttled; what waits for a throttle to pass waits on it.
    unmuted: asyncio.Event = field(default_factory=_set_event)
    # The connection's loop (each asyncio.get_running_loop() is a getpid(), issue 18).
    loop: asyncio.AbstractEventLoop | None = None
    # The last Fetch sent without a task, for the same request with other offsets
    # (odradek.gateway.apis.fetch.Repeat; a consumer's long polls, issue 18).
    fetch_repeat: Repeat | None = None


class KafkaConnection(asyncio.BaseProtocol):
    """One client connection; its bytes arrive by ``data_received`` (a plain
    ``asyncio.Protocol``'s way; the listener's :class:`InPlaceKafkaConnection` and
    :class:`TlsKafkaConnection` read in place)."""

    _next_id = 0

    def __init__(
        self,
        dispatch: Dispatch,
        limits: ConnectionLimits,
        on_close: Callable[[KafkaConnection], None],
        broker_id: int | None = None,
        security: ListenerSecurity | None = None,
        quota: ConnectionQuota | None = None,
        answer_at_once: AnswerAtOnce | None = None,
    ) -> None:
        KafkaConnection._next_id += 1
        self.quota = quota
        self._counted = False
        self.dispatch = dispatch
        self.answer_at_once = answer_at_once
        self.limits = limits
        self.on_close = on_close
        self.decoder = FrameDecoder(limits.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.ctx = ConnectionContext(KafkaConnection._next_id, "?", broker_id)
        self.security = security or ListenerSecurity()
        self._auth_timer: asyncio.TimerHandle | None = None
        # Started requests in arrival order (the writer answers them in this order),
        # and those not started yet, behind them (at most max_handled_requests are
        # being handled: started, their response not yet handed to the transport).
        self.pending: collections.deque[tuple[asyncio.Future[Result], int, RequestSlot]] = (
            collections.deque()
        )
        self.waiting: collections.deque[memoryview | bytes] = collections.deque()
        self.handling = 0
        self.handling_other = 0  # of which not Produce
        self.inflight_bytes = 0
        self.reading_paused = False
        self.waiting_turn = False  # max.connection.creation.rate holds this one back
        self.turn_delay = 0.0  # for how long (the authentication timeout starts after)
        self.held: list[bytes] = []  # what the client sent before its turn
        # False while the transport's buffer is past its high-water mark (pause_writing).
        self.writable = True
        self.closed = False
        self.last_activity = time.monotonic()
        # A request has started: the socket is tuned (_tune_socket), answers may follow.
        self.started = False
        # _flush is running (a slot it releases may start and answer requests, which
        # flush again: that waits for the running one), and whether to go round again;
        # a flush is scheduled for answers known at once (_answered_at_once).
        self._flushing = False
        self._flush_again = False
        self._flush_scheduled = False
        self.draining = False
        self.queued_response_bytes = 0  # finished responses not yet handed to the socket
        self.partial_since: float | None = None  # when the incomplete request began
        self.unsent_since: float | None = None  # when the peer last read nothing of ours
        self._last_unsent = 0
        self.muted_until = 0.0  # client quota throttle (KIP-219): not read from until then
        self.ctx.mute = self.mute
        self.pool = limits.memory_pool
        self._held = 0  # bytes counted against the pool
        # connection.max.unread.response.bytes: the socket's descriptor (-1: the send
        # queue cannot be asked), an upper bound of the bytes sent and not taken by the
        # client (exact when last measured, plus every write since: measuring costs a
        # system call, so it is done only when the bound passes the limit), and whether
        # the connection is held back until they drain.
        self._fd = -1
        self._loop: asyncio.AbstractEventLoop  # set in connection_made
        self._unread_bound = 0
        self.unread_backlog = False
        self._unread_recheck = _UNREAD_RECHECK_FIRST_S
        self._unread_timer: asyncio.TimerHandle | None = None
        # socket.send.buffer.bytes as set on the socket (_tune_socket), grown for a
        # larger response (_grow_send_buffer); no socket: autotuned, left alone.
        self._sock: socket.socket | None = None
        self._send_buffer = 0

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        # Kept for the tasks and futures per request: asyncio.ensure_future and
        # get_running_loop look the loop up with a getpid() system call each time
        # (1.5-2.5 us a request).
        self._loop = self.ctx.loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        self.ctx.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.ctx.host = peer[0] if peer else "?"
        if self.quota is not None:
            if not self.quota.admit(self.ctx.host):
                _refusals.closing(self.ctx.peer, "too many connections")
                self.close()
                return
            self._counted = True
            delay = self.quota.creation_delay(time.monotonic())
            if delay == float("inf"):
                _refusals.closing(self.ctx.peer, "max.connection.creation.rate is 0")
                self.close()
                return
            if delay > 0:
                self._delay_reading(delay)
        self._secure(transport)
        # The socket's options wait for the first request
        # (_start_waiting): a connection refused on its first bytes (an oversize frame,
        # a reconnect storm of them in bench hostile) never needs them.

    def _tune_socket(self) -> None:
        """The first request starts: size the kernel's send buffer, note the descriptor
        for the send queue (``SIOCOUTQ``). Before any response is written, so it holds
        for all of them; not on accept, where it cost a socket object and three system
        calls for each connection refused on its first bytes (issue 14)."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return
        if self.limits.send_buffer_bytes > 0:
            # Kafka's Acceptor sets socket.send.buffer.bytes on every accepted channel.
            # Left to autotuning, the kernel takes up to tcp_wmem's maximum (4 MiB) of
            # responses a client never reads before the transport pauses us.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.limits.send_buffer_bytes)
                self._sock, self._send_buffer = sock, self.limits.send_buffer_bytes
        if _SIOCOUTQ >= 0 and sock.family in (socket.AF_INET, socket.AF_INET6):
            self._fd = sock.fileno()

    def _grow_send_buffer(self, size: int) -> None:
        """A response larger than the socket's send buffer (a consumer's Fetch): make the
        buffer hold it whole (up to :data:`GROWN_SEND_BUFFER_MAX`). Through a 100 KB
        ``socket.send.buffer.bytes`` a 2 MB Fetch response went out in a dozen partial
        writes, each a wake-up of the loop on the socket turning writable: about a sixth
        more gateway CPU per consumed GB than one write (docs/data-link.md, "Consume
        CPU per GB: the socket writes"). The response's bytes are held either way, in
        the transport's buffer or in the kernel's, and both count toward
        connection.max.queued.response.bytes and the unread-response bound."""
        grown = min(size, GROWN_SEND_BUFFER_MAX)
        if grown <= self._send_buffer or self._sock is None:
            return
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, grown)
        except OSError:
            self._sock = None  # not resizable: stay at what was set
            return
        self._send_buffer = grown

    def _delay_reading(self, delay: float) -> None:
        """max.connection.creation.rate: this connection's turn comes in ``delay`` s;
        bytes that arrive before it are held (and reading paused) until then."""
        self.waiting_turn = True
        self.turn_delay = delay

        def turn() -> None:
            self.waiting_turn = False
            self.last_activity = time.monotonic()
            held, self.held = self.held, []
            self._resume_reading()
            for data in held:
                if not self.closed:
                    self.data_received(data)

        asyncio.get_running_loop().call_later(delay, turn)

    def mute(self, throttle_ms: int) -> None:
        """KIP-219: read nothing more from this client for ``throttle_ms`` (Kafka mutes
        the channel until the throttle time has passed; responses still go out)."""
        if throttle_ms <= 0 or self.closed:
            return
        until = time.monotonic() + throttle_ms / 1000.0
        if until <= self.muted_until:
            return
        self.muted_until = until
        self.ctx.unmuted.clear()
        self._pause_reading()
        asyncio.get_running_loop().call_later(throttle_ms / 1000.0, self._unmute)

    def _unmute(self) -> None:
        if self.closed or time.monotonic() < self.muted_until - 0.001:
            return  # closed, or muted again for longer (that timer unmutes)
        self.muted_until = 0.0
        self.ctx.unmuted.set()
        self.last_activity = time.monotonic()
        if self.partial_since is not None:
            self.partial_since = self.last_activity
        if (
            self.queued_requests < self.limits.max_inflight_requests
            and self.inflight_bytes < self.limits.max_inflight_bytes
        ):
            self._resume_reading()

    def _secure(self, transport: asyncio.BaseTransport) -> None:
        sec = self.security
        self.ctx.security_protocol = sec.protocol
        self.ctx.listener = sec.name
        if sec.ssl_context is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            if der:
                try:
                    self.ctx.principal = "User:" + sec.principal_mapper.name(subject_dn(der))
                except ValueError as exc:
                    log.info("closing %s: %s", self.ctx.peer, exc)
                    self.close()
                    return
        if sec.sasl:
            self.ctx.sasl = SaslSession(sec.mechanisms)
            self.ctx.reauth_ms = sec.reauth_ms
            self.ctx.authenticated = False
            self._auth_timer = asyncio.get_running_loop().call_later(
                sec.auth_timeout_s + self.turn_delay, self._auth_expired
            )

    def _auth_expired(self) -> None:
        if not self.ctx.authenticated and not self.closed:
            log.info("closing %s: authentication not finished in time", self.ctx.peer)
            self.close()

    def data_received(self, data: bytes) -> None:
        if self._must_hold():
            self._hold(data)
            return
        self.last_activity = time.monotonic()
        self._parse(data)

    def _must_hold(self) -> bool:
        """Whether bytes read now are held unparsed (their turn has not come, or the
        memory budget is used up: Kafka mutes every channel then; only a request
        already being read goes on)."""
        return self.waiting_turn or (
            self.pool is not None
            and bool(self.held or (self.pool.exhausted and not self.decoder.partial_bytes))
        )

    def _hold(self, data: bytes) -> None:
        self.held.append(data)
        if self.waiting_turn:  # (uvloop starts reading after connection_made anyway)
            self._pause_reading()
            return
        self.last_activity = time.monotonic()
        self._account()
        self._pause_reading()
        if self.pool is not None:
            self.pool.wait(self.ctx.connection_id, self._pool_resume)

    def _room(self) -> int:
        """The most frames the decoder splits off now: requests this connection may
        still queue (``queued.max.requests``), and no more than :data:`SPLIT_AHEAD`
        waiting to start; the bytes after them wait, unparsed, until the queue has
        room again (module docstring)."""
        return max(
            0,
            min(
                self.limits.max_inflight_requests - self.queued_requests,
                SPLIT_AHEAD - len(self.waiting),
            ),
        )

    def _parse_more(self) -> None:
        """Frames read earlier and kept unparsed (past the queue's room), as many as
        there is room for now."""
        self._parse(None)

    def _parse(self, data: bytes | None) -> None:
        """Split off as many frames as the queue has room for, from ``data`` just read
        or (None) from bytes kept unparsed; a malformed frame closes the connection."""
        try:
            room = self._room()
            frames = self.decoder.more(room) if data is None else self.decoder.feed(data, room)
        except ProtocolError as exc:
            self._malformed(exc)
            return
        self._frames_read(frames)

    def _malformed(self, exc: ProtocolError) -> None:
        """Close on a frame the decoder refused, logged as the refusals are (a hostile
        client's stream of them is one summary line, odradek.gateway.refusal_log)."""
        _refusals.closing(self.ctx.peer, type(exc).__name__, str(exc))
        # The decoder keeps the error; its traceback's frames hold the decoder and
        # this connection (a cycle only the cyclic collector would free).
        exc.__traceback__ = None
        self.close()

    def _frames_read(self, frames: list[memoryview | bytes]) -> None:
        for frame in frames:
            self._start(frame)
        # Split on until SPLIT_AHEAD wait (a run of pipelined Produce requests joins its
        # lane as it is split and waits for nothing: it is all split and started at
        # once, to coalesce, produce_lane.py); the rest stays unparsed.
        more = frames
        while (
            more
            and len(self.waiting) < SPLIT_AHEAD
            and self.decoder.unparsed_bytes
            and not self.closed
        ):
            try:
                more = self.decoder.more(self._room())
            except ProtocolError as exc:
                self._malformed(exc)
                return
            for frame in more:
                self._start(frame)
        if self.decoder.partial_bytes:
            if self.partial_since is None or frames:
                self.partial_since = self.last_activity
        else:
            self.partial_since = None
        self._account()
        # The budget pauses a connection between requests, never inside one that was
        # being read already (Kafka allocates a request's buffer whole, non-strictly):
        # requests in progress always finish, so the budget cannot deadlock.
        starved = (
            self.pool is not None
            and self.pool.exhausted
            and not (self.decoder.partial_bytes and not frames)
        )
        if not self.closed and (
            self.queued_requests >= self.limits.max_inflight_requests
            or self.inflight_bytes >= self.limits.max_inflight_bytes
            or self.decoder.unparsed_bytes  # read on once they are parsed
            or starved
        ):
            self._pause_reading()
            if starved and self.pool is not None:
                self.pool.wait(self.ctx.connection_id, self._pool_resume)

    def eof_received(self) -> bool | None:
        # Half-close: let queued responses go out, then close (Kafka closes on EOF).
        self.draining = True
        if not self.started and not self.waiting:  # nothing read: nothing to send
            self.close()
        self._flush()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.pool is not None:
            self.pool.forget(self.ctx.connection_id)
            self.pool.adjust(-self._held)
            self._held = 0
        if self._counted and self.quota is not None:
            self._counted = False
            self.quota.release(self.ctx.host)
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        if self._unread_timer is not None:
            self._unread_timer.cancel()
        for fut, _, _ in self.pending:
            fut.cancel()
        self.pending.clear()
        self.waiting.clear()
        self.writable = True
        # Freed at once by reference counting rather than by the cyclic collector:
        # the context's mute callback points back at this connection.
        self.ctx.mute = None
        self.on_close(self)

    def pause_writing(self) -> None:
        # The client is not reading what we send: read nothing more from it until it
        # does (Kafka mutes a channel until its response is sent), so a client that
        # never reads holds a socket buffer of responses, not a queue of them.
        self.writable = False
        self._pause_reading()

    def resume_writing(self) -> None:
        self.writable = True
        if not self.closed:
            self._flush()
            self._start_waiting()
            self._read_on()

    def _read_on(self) -> None:
        """Resume reading unless a bound of this connection's own still holds."""
        if (
            self.queued_requests < self.limits.max_inflight_requests
            and self.inflight_bytes < self.limits.max_inflight_bytes
        ):
            self._resume_reading()

    # -- requests ------------------------------------------------------------------------
    def _start(self, frame: memoryview | bytes) -> None:
        # Only queued here: even its header is parsed when its turn comes, so a read of
        # thousands of pipelined requests costs the loop next to nothing now.
        self.waiting.append(frame)
        self.inflight_bytes += len(frame)
        self._start_waiting()

    @property
    def queued_requests(self) -> int:
        """Requests read and not yet answered: being handled or waiting to start."""
        return len(self.pending) + len(self.waiting)

    def _may_start(self, frame: memoryview | bytes) -> bool:
        """Whether the oldest waiting request may start now (module docstring)."""
        if self.unread_backlog or not self.writable:
            return False  # the client is not taking its answers: compute no more
        if self.handling_other == 0 and frame[:2] == _PRODUCE_KEY:
            # Only Produce requests are being handled: this one joins their lane, so
            # that pipelined Produce requests coalesce (produce_lane.py); bounded by
            # queued.max.requests counting every request started and not yet answered
            # (those handed off to the storage nodes too: a client that never reads
            # would otherwise have Produce requests started as fast as they hand off).
            return len(self.pending) < self.limits.max_inflight_requests
        return self.handling < self.limits.max_handled_requests

    def _start_waiting(self) -> None:
        """Start waiting requests, oldest first, while :meth:`_may_start` lets them
        (module docstring: arrival order is what keeps a connection's Produce requests
        in order)."""
        while self.waiting and self._may_start(self.waiting[0]):
            if self.closed:
                return
            if self.waiting[0][:2] == _METADATA_KEY and not metadata_turns(self._loop).may_start(
                self._start_waiting
            ):
                return  # a few Metadata requests start per loop turn (metadata_turns.py)
            body = memoryview(self.waiting.popleft())
            size = len(body)
            try:
                header, offset = parse_request_header(body)
            except ProtocolError as exc:
                _refusals.closing(self.ctx.peer, "bad request header", f"bad request header: {exc}")
                self.close()
                return
            other = header.api_key != _PRODUCE
            started: asyncio.Future[Result] | None = None
            if self.answer_at_once is not None and not self.muted_until:
                answer: bytes | asyncio.Future[Result] | None = None
                if not other:
                    # Started here, if it can be: its slot is the one request_handed_off()
                    # gives its handler (as _run's task context has it).
                    slot = RequestSlot(self._produce_released)
                    token = _SLOT.set(slot)
                    try:
                        answer = self.answer_at_once(self.ctx, header, body[offset:])
                    finally:
                        _SLOT.reset(token)
                elif self._may_answer_at_once():
                    answer = self.answer_at_once(self.ctx, header, body[offset:])
                if isinstance(answer, bytes):
                    self._answered_at_once(answer, size)
                    continue
                started = answer  # handled without a task (a Fetch, a Produce), or None
            self.handling += 1
            self.handling_other += other
            if started is None or other:
                slot = RequestSlot(self._other_released if other else self._produce_released)
            fut: asyncio.Future[Result] = (
                self._loop.create_task(self._run(header, body[offset:], slot))
                if started is None
                else started
            )
            fut.add_done_callback(self._response_ready)
            self.pending.append((fut, size, slot))
            if not self.started:
                self.started = True
                self._tune_socket()

    def _may_answer_at_once(self) -> bool:
        """Whether the next waiting request may be answered in this callback, without a
        task: while no more than :data:`SPLIT_AHEAD` responses wait to be written and
        they would not take the connection past ``connection.max.unread.response.bytes``
        (so a client that never reads is held back after as many answers as before)."""
        if len(self.pending) >= SPLIT_AHEAD:
            return False
        limit = self.limits.max_unread_response_bytes
        return limit <= 0 or self._unread_bound + self.queued_response_bytes < limit

    def _answered_at_once(self, framed: bytes, size: int) -> None:
        """Queue a response known without handling its request (answer_at_once): no
        task, no handler slot; it goes at the next loop turn with the answers queued beside
        it, in one write. Each had been a task, a wake-up of the writer and a write system
        call of its own (73-137 us of loop time per never-read client's Metadata
        answer; docs/security.md, "Hostile clients")."""
        fut: asyncio.Future[Result] = self._loop.create_future()
        fut.set_result(framed)
        self.pending.append((fut, size, RequestSlot(self._start_waiting)))
        self.queued_response_bytes += len(framed)
        self._account()
        self._check_queued_bytes()
        if not self.started:
            self.started = True
            self._tune_socket()
        if not self._flush_scheduled:
            # At the next loop turn, as the writer task did: the answers of one read's
            # requests go out together, in one write.
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self._flush()

    def _slot_released(self, other: bool) -> None:
        self.handling -= 1
        self.handling_other -= other
        self._start_waiting()

    def _other_released(self) -> None:
        self._slot_released(True)

    def _produce_released(self) -> None:
        self._slot_released(False)

    def _response_ready(self, fut: asyncio.Future[Result]) -> None:
        """A request's handling ended (its task's done callback): count its response,
        and send what is answered at the head of the queue (:meth:`_flush`)."""
        if self.closed:
            return
        counted = False
        if not fut.cancelled() and fut.exception() is None:
            result = fut.result()
            if result:
                self.queued_response_bytes += result_size(result)
                counted = True
        if self.pending and self.pending[0][0] is fut:
            self._flush()  # sent now if it can be: then it is no longer queued
        if counted and not self.closed:
            self._account()
            self._check_queued_bytes()

    def _check_queued_bytes(self) -> None:
        buffered = self.transport.get_write_buffer_size() if self.transport is not None else 0
        total = self.queued_response_bytes + buffered
        if total > self.limits.max_queued_response_bytes:
            self.abort(
                f"{total} bytes of responses unsent (connection.max.queued.response.bytes "
                f"{self.limits.max_queued_response_bytes})",
                "connection.max.queued.response.bytes",
            )

    async def _run(self, header: RequestHeader, body: memoryview, slot: RequestSlot) -> Result:
        _SLOT.set(slot)  # this task's own context: request_handed_off() finds it
        if self.muted_until:
            # Read before the connection was throttled: Kafka would not have read it
            # yet, so it waits for the throttle to pass too.
            await self.ctx.unmuted.wait()
        return await self.dispatch(self.ctx, header, body)

    def drain(self) -> None:
        """Answer what was read, then close (the listener is stopping)."""
        self.draining = True
        self._flush()

    def _flush(self) -> None:
        """Send the responses answered at the head of the queue, in request order, from
        the callback that finished them: a writer task woken per answer (an event's
        future, a task step or two) cost the loop more than the write itself at
        thousands of one-record Produce requests a second (issue 18, docs/data-link.md).
        A flush started while one runs (a slot it releases starts a request answered
        at once) is done by the running one when it is through."""
        if self._flushing:
            self._flush_again = True
            return
        self._flushing = True
        try:
            self._flush_again = True
            while self._flush_again and not self.closed:
                self._flush_again = False
                self._write_answered()
        finally:
            self._flushing = False

    def _write_answered(self) -> None:
        while not self.closed:
            if not self.pending:
                if self.draining and self.decoder.unparsed_bytes and not self.waiting:
                    self._parse_more()  # requests read before the client's EOF
                    continue
                if self.draining and not self.waiting:  # (waiting: for their turn)
                    self.close()
                return
            fut, size, slot = self.pending[0]
            if not fut.done() or not self.writable:
                return  # its callback, or resume_writing, comes back here
            if fut.cancelled():
                self.close()  # (only a closing connection cancels its requests)
                return
            exc = fut.exception()
            if exc is not None:
                if not isinstance(exc, CloseConnection):
                    log.error(
                        "handler failed on %s; closing the connection",
                        self.ctx.peer,
                        exc_info=exc,
                    )
                self.close()
                return
            self.pending.popleft()
            self.inflight_bytes -= size
            answered = [(fut.result(), slot)]
            # Responses already finished behind this one go out in the same write:
            # a coalesced Produce run (produce_lane.py) finishes together, and one
            # syscall per response was a measurable share of the loop (issue 18).
            while self.pending and not self.ctx.close_after_response:
                fut, size, slot = self.pending[0]
                if not fut.done() or fut.cancelled() or fut.exception() is not None:
                    break  # an error is dealt with when its turn comes, as before
                self.pending.popleft()
                self.inflight_bytes -= size
                answered.append((fut.result(), slot))
            self._account()
            buffers: list[bytes | bytearray | memoryview] = []
            for result, _ in answered:
                if isinstance(result, list):
                    buffers.extend(result)
                elif result:
                    buffers.append(result)
            if buffers:
                if self.transport is None:
                    return
                written = sum(map(len, buffers))
                if written > self._send_buffer and self._sock is not None:
                    self._grow_send_buffer(written)
                if len(buffers) == 1 and isinstance(buffers[0], bytes):
                    self.transport.write(buffers[0])
                else:
                    self.transport.writelines(buffers)
                self.queued_response_bytes -= written
                self._account()
                self.last_activity = time.monotonic()
                self._unread_bound += written
                if self._unread_bound > self.limits.max_unread_response_bytes:
                    self._check_unread()  # before the slots free the next requests
            for _, slot in answered:
                slot.release()  # handed to the transport (or nothing to send)
            if self.ctx.close_after_response:
                self.close()
                return
            if self.reading_paused and (
                self.queued_requests < self.limits.max_inflight_requests // 2
                and self.inflight_bytes < self.limits.max_inflight_bytes // 2
            ):
                self._resume_reading()

    def _pause_reading(self) -> None:
        if self.transport is not None and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.waiting_turn or self.muted_until or self.unread_backlog or not self.writable:
            return  # resume_writing, the throttle's end, the turn or the recheck will
        if (
            self.pool is not None
            and self.pool.exhausted
            and not self.closed
            and not self.decoder.partial_bytes  # a request half read: let it finish
        ):
            self.pool.wait(self.ctx.connection_id, self._pool_resume)
            return
        if self.decoder.unparsed_bytes and not self.closed:
            self._parse_more()
            if (
                self.closed
                or self.decoder.unparsed_bytes
                or self.queued_requests >= self.limits.max_inflight_requests
                or self.inflight_bytes >= self.limits.max_inflight_bytes
            ):
                return  # the queue is full again: its next drain comes back here
        if self.transport is not None and self.reading_paused and not self.closed:
            self.reading_paused = False
            self.transport.resume_reading()

    def _account(self) -> None:
        """Report this connection's holdings to the process's budget (memory_pool.py):
        requests being read or handled and finished responses not yet sent."""
        if self.pool is None or self.closed:
            return
        held = (
            self.inflight_bytes
            + self.decoder.buffered_bytes
            + self.queued_response_bytes
            + (sum(map(len, self.held)) if self.held else 0)
        )
        if held != self._held:
            delta, self._held = held - self._held, held
            self.pool.adjust(delta)

    def _pool_resume(self) -> None:
        """The budget has room again: parse what was held, read on unless a bound of
        our own still holds."""
        if self.closed or self.waiting_turn:
            return
        held, self.held = self.held, []
        for i, data in enumerate(held):
            if self.closed:
                return
            if self.held:  # used up again: keep the rest, in order, for the next room
                self.held.extend(held[i:])
                break
            self.data_received(data)
        if (
            not self.closed
            and not self.held  # used up again while parsing: paused and waiting again
            and self.queued_requests < self.limits.max_inflight_requests
            and self.inflight_bytes < self.limits.max_inflight_bytes
        ):
            self._resume_reading()

    def unsent_bytes(self) -> int:
        """Response bytes sent to this connection that its client has not taken: the
        transport's buffer plus the kernel's send queue (bytes the client's TCP stack
        has not acknowledged). Also makes the bound kept by the write loop exact."""
        if self.transport is None or self.closed:
            return 0  # (a closed socket's descriptor may already belong to another)
        unsent = self.transport.get_write_buffer_size()
        if self._fd >= 0 and self._unread_bound > 0:
            try:
                unsent += _OUTQ.unpack(fcntl.ioctl(self._fd, _SIOCOUTQ, _OUTQ_ZERO))[0]
            except OSError:
                self._fd = -1  # not a TCP socket after all: the transport's buffer only
        self._unread_bound = unsent
        return unsent

    def _check_unread(self) -> None:
        """connection.max.unread.response.bytes: past it, start nothing and read
        nothing until the client has taken its answers (module docstring)."""
        if self.closed:
            return
        unsent = self.unsent_bytes()
        if self.queued_response_bytes + unsent > self.limits.max_queued_response_bytes:
            self.abort(
                f"{self.queued_response_bytes + unsent} bytes of responses unsent "
                f"(connection.max.queued.response.bytes {self.limits.max_queued_response_bytes})",
                "connection.max.queued.response.bytes",
            )
            return
        limit = self.limits.max_unread_response_bytes
        # Held back, it goes on once the client has taken half of what it had
        # (a low-water mark, as asyncio's flow control has one): resumed as soon as
        # the queue was under the limit again, a never-reading client whose kernel
        # still acknowledged a segment now and then (its receive queue compacted)
        # had one more answer computed each time and the recheck's back-off started
        # over at 1 ms. 20 of bench hostile's never-read clients for 12 s: 120-300
        # such restarts and 1,500-3,400 rechecks before, 30-40 and ~1,000 with the
        # mark, 3-5% fewer Metadata answers (docs/security.md, "Hostile clients").
        if unsent <= (limit // 2 if self.unread_backlog else limit):
            if self.unread_backlog and not self.closed:
                self.unread_backlog = False
                self._unread_recheck = _UNREAD_RECHECK_FIRST_S
                self._start_waiting()
                self._read_on()
            return
        if not self.unread_backlog:
            self.unread_backlog = True
            self._pause_reading()
        if self._unread_timer is None:
            self._unread_timer = asyncio.get_running_loop().call_later(
                self._unread_recheck, self._recheck_unread
            )

    def _recheck_unread(self) -> None:
        self._unread_timer = None
        self._unread_recheck = min(self._unread_recheck * 2, _UNREAD_RECHECK_MAX_S)
        self._check_unread()

    @property
    def idle(self) -> bool:
        return (
            not self.pending
            and not self.waiting
            and not self.muted_until
            and time.monotonic() - self.last_activity > self.limits.idle_timeout_s
        )

    def overdue(self, now: float) -> str | None:
        """Why this connection must be aborted now (a timeout passed), if it must."""
        if self.muted_until:
            return None  # throttled: we are the ones not reading
        if self.partial_since is not None and (
            now - self.partial_since > self.limits.request_read_timeout_s
        ):
            return "request not completed within connection.request.read.timeout.ms"
        unsent = self.unsent_bytes()
        if unsent and unsent >= self._last_unsent:
            if self.unsent_since is None:
                self.unsent_since = now
            elif now - self.unsent_since > self.limits.write_timeout_s:
                return "client read nothing within connection.write.timeout.ms"
        else:
            self.unsent_since = now if unsent else None
        self._last_unsent = unsent
        return None

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True

    def abort(self, reason: str, key: str | None = None) -> None:
        """Drop the connection at once, discarding unsent bytes (a polite close would
        wait for a peer that may never read). ``key``: the reason without its figures,
        for the log's rate limit (refusal_log.py)."""
        _refusals.closing(self.ctx.peer, key or reason, reason, verb="aborting")
        self.closed = True
        if self.transport is not None:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:  # linger 0: the kernel drops its send buffer too (RST)
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
            self.transport.abort()


class InPlaceKafkaConnection(KafkaConnection, asyncio.BufferedProtocol):
    """A connection whose transport writes into the decoder's buffers
    (``FrameDecoder.get_buffer``), a large request into a buffer of its own, instead of
    into a new bytes object per read that the decoder then joins again: on PLAINTEXT
    uvloop copied every read out of its own buffer into bytes, and the decoder joined a
    ~1 MB Produce request from them, two copies of every produced byte (issue 18,
    docs/data-link.md "Produce CPU per GB: the frame copies")."""

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.closed:  # (a failed stream: what is still read goes nowhere)
            return memoryview(bytearray(4096))
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        decoder = self.decoder
        if decoder.filling_frame:
            self.last_activity = time.monotonic()
            if decoder.missing_bytes > nbytes:
                # More of a large request, not its end (most reads of a 1 MB Produce):
                # its whole buffer is in the budget since it began, nothing is split.
                decoder.buffer_updated(nbytes)
                return
        elif self._must_hold():
            self._hold(decoder.take_read(nbytes))
            return
        else:
            self.last_activity = time.monotonic()
        try:
            frames = decoder.buffer_updated(nbytes, self._room())
        except ProtocolError as exc:
            self._malformed(exc)
            return
        self._frames_read(frames)


class TlsKafkaConnection(InPlaceKafkaConnection):
    """A connection on a TLS listener. The TLS transport decrypts straight into the
    decoder's buffers (uvloop's copying path allocates 256 KB per 16 KB TLS record):
    0.2-1.3 gateway CPU-s less per GB produced over SASL_SSL (docs/security.md,
    "Throughput")."""

    # The listener's registration (KafkaListener._make): the protocol of a TLS connection
    # hears nothing until its handshake is done, and nothing at all when it fails (the
    # transport then only closes the socket), so it joins the listener's set here.
    on_open: Callable[[KafkaConnection], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.on_open is not None:
            self.on_open(self)
        super().connection_made(transport)


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
        security: ListenerSecurity | None = None,
        quota: ConnectionQuota | None = None,
        tls: ReloadingServerContext | None = None,
        answer_at_once: AnswerAtOnce | None = None,
    ) -> None:
        self.security = security or ListenerSecurity()
        self.answer_at_once = answer_at_once
        # The socket's own TLS context, reloadable (odradek.tls_reload); else the listener's.
        self.tls = tls
        self.quota = quota
        self.host = host
        self.port = port
        self.broker_id = broker_id
        self.dispatch = dispatch
        self.limits = limits
        self.connections: set[KafkaConnection] = set()
        self.server: asyncio.base_events.Server | None = None
        self._reaper: asyncio.Task[None] | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        tls = self.tls.context if self.tls is not None else self.security.ssl_context
        self.server = await loop.create_server(
            self._make,
            self.host,
            self.port,
            backlog=1024,
            ssl=tls,
            ssl_handshake_timeout=self.security.auth_timeout_s if tls is not None else None,
        )
        if self.limits.receive_buffer_bytes > 0:
            # Kafka sets socket.receive.buffer.bytes on the server socket: accepted
            # connections inherit it (and the TCP window scale it implies).
            for sock in self.server.sockets:
                with contextlib.suppress(OSError):
                    sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_RCVBUF, self.limits.receive_buffer_bytes
                    )
        self.port = self.server.sockets[0].getsockname()[1]
        self._reaper = loop.create_task(self._reap())
        return self.port

    def _make(self) -> KafkaConnection:
        args = (self.dispatch, self.limits, self._closed, self.broker_id, self.security)
        if self.tls is not None or self.security.ssl_context is not None:
            # Counted once its handshake is done: a failed one never reaches the protocol,
            # and stayed in the set (and the connections gauge) for good.
            tls_conn = TlsKafkaConnection(*args, self.quota, self.answer_at_once)
            tls_conn.on_open = self.connections.add
            return tls_conn
        conn = InPlaceKafkaConnection(*args, self.quota, self.answer_at_once)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: KafkaConnection) -> None:
        self.connections.discard(conn)

    async def _reap(self) -> None:
        lim = self.limits
        shortest = min(lim.idle_timeout_s, lim.request_read_timeout_s, lim.write_timeout_s)
        interval = max(0.05, min(30.0, shortest / 4))
        while True:
            await asyncio.sleep(interval)
            await self.sweep()

    async def sweep(self) -> None:
        """Abort the connections past a timeout, close the idle ones: at most
        :data:`SWEEP_BATCH` a loop turn. A pass over every connection in one callback
        (a system call each for its send queue) held the loop about 5 us a connection:
        clients that open hundreds of connections would stop every other client's
        requests for milliseconds each time (issue 14)."""
        conns = list(self.connections)
        for start in range(0, len(conns), SWEEP_BATCH):
            if start:
                await asyncio.sleep(0)  # the callbacks due meanwhile run first
            now = time.monotonic()
            for conn in conns[start : start + SWEEP_BATCH]:
                if conn.closed:
                    continue  # (closed while the sweep yielded)
                reason = conn.overdue(now)
                if reason is not None:
                    conn.abort(reason)
                elif conn.idle:
                    conn.close()

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (bounded), then close all."""
        if self.server is not None:
            self.server.close()
        if self._reaper is not None:
            self._reaper.cancel()
        for conn in list(self.connections):
            conn.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while any(c.queued_requests for c in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            conn.close()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
