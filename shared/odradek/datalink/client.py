"""The calling side of the data link: one connection per storage node, many calls on it.

Calls are pipelined on one TCP connection and matched by correlation id, so a
long-poll Fetch never holds up a Produce behind it. A connection that fails fails
every call in flight on it with :class:`DataLinkError` and is opened again by the
next call; a call whose deadline passes raises ``TimeoutError`` and its late answer is
dropped. Callers treat both as they treat a failed gRPC call (the node is gone or
moved: the client refreshes its metadata and retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from odradek import internal_tls
from odradek.datalink.connection import FrameProtocol
from odradek.datalink.frame import ERROR, FETCH, Buffer, Frame, FrameError, encode, meta_bytes
from odradek.datalink.same_host import TCP_CONNECTIONS, SameHostLinks
from odradek.metadata_cache import MetadataCache
from odradek.rpc.server import MAX_MESSAGE_BYTES
from odradek.rpc.v1 import storage_pb2

log = logging.getLogger(__name__)


class DataLinkError(Exception):
    """The call did not get an answer: connection refused or lost, or the node failed it."""

    kafka_error = "NOT_LEADER_OR_FOLLOWER"


class DataLinkConnection(FrameProtocol):
    """One connection to a storage node's data link; calls pipelined on it."""

    def __init__(self, max_frame_bytes: int) -> None:
        super().__init__(max_frame_bytes)
        # Built by its loop's create_connection: the loop every call runs on.
        self.loop = asyncio.get_running_loop()
        self.pending: dict[int, asyncio.Future[Frame]] = {}
        # Calls answered by a callback instead of a future (call_with), by id.
        self.callbacks: dict[int, Callable[[Frame | Exception], None]] = {}
        # Each call's deadline (loop time), beside ``pending``; one timer for the whole
        # connection, armed for the earliest (see :meth:`call`).
        self.deadlines: dict[int, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.next_id = 0
        self.closed = False

    def close(self) -> None:
        """Close the connection; calls in flight fail with DataLinkError."""
        if self.transport is not None:
            self.transport.close()

    def bad_frame(self, exc: FrameError) -> None:
        log.warning("data link: bad frame from the storage node: %s", exc)
        self._fail(DataLinkError(f"bad frame: {exc}"))

    def frame_received(self, frame: Frame) -> None:
        cid = frame.correlation_id
        fut = self.pending.pop(cid, None)
        if fut is not None:
            self.deadlines.pop(cid, None)  # (a started call has no awaiting caller to drop it)
            if not fut.done():
                fut.set_result(frame)
            return
        answer = self.callbacks.pop(cid, None)
        if answer is not None:
            self.deadlines.pop(cid, None)
            answer(_error(frame) if frame.kind == ERROR else frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(DataLinkError(f"connection lost: {exc or 'closed by the storage node'}"))

    def _fail(self, exc: Exception) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.deadlines = {}
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)
        callbacks, self.callbacks = self.callbacks, {}
        for answer in callbacks.values():
            answer(exc)

    async def call(
        self,
        kind: int,
        meta: bytes,
        blobs: Sequence[Buffer],
        timeout: float,
        on_sent: Callable[[], None] | None = None,
    ) -> Frame:
        fut: asyncio.Future[Frame] = self.loop.create_future()
        cid = self._start(kind, meta, blobs, timeout, fut)
        if on_sent is not None:
            on_sent()
        try:
            frame = await fut
        finally:
            self.pending.pop(cid, None)
            self.deadlines.pop(cid, None)
        return answer_of(frame)

    def start_call(
        self, kind: int, meta: bytes, blobs: Sequence[Buffer], timeout: float
    ) -> asyncio.Future[Frame]:
        """:meth:`call` for a caller without a task (the gateway's consumer Fetch): the
        request is written now, the future gets the answer frame (pass it to
        :func:`answer_of`), DataLinkError or TimeoutError. Nothing needs cleaning up
        after it: the answer, the deadline or a failed connection drops the call's
        entries; a late answer to a future its caller cancelled is dropped."""
        fut: asyncio.Future[Frame] = self.loop.create_future()
        self._start(kind, meta, blobs, timeout, fut)
        return fut

    def call_with(
        self,
        kind: int,
        meta: bytes,
        blobs: Sequence[Buffer],
        timeout: float,
        answer: Callable[[Frame | Exception], None],
    ) -> None:
        """:meth:`call` for a caller that goes on from the answer itself: ``answer`` gets
        the frame, or the DataLinkError or TimeoutError :meth:`call` would raise, from
        the connection's read (no future, no task to wake: a follower's fetch round
        per replicated record, issue 18). Raises DataLinkError when closed."""
        self._start(kind, meta, blobs, timeout, answer)

    def _start(
        self,
        kind: int,
        meta: bytes,
        blobs: Sequence[Buffer],
        timeout: float,
        answer: asyncio.Future[Frame] | Callable[[Frame | Exception], None],
    ) -> int:
        if self.closed or self.transport is None:
            raise DataLinkError("connection closed")
        self.next_id = (self.next_id + 1) & 0x7FFFFFFF
        cid = self.next_id
        loop = self.loop
        if isinstance(answer, asyncio.Future):
            self.pending[cid] = answer
        else:
            self.callbacks[cid] = answer
        # The deadline fails the answer's future itself: asyncio.timeout() costs a
        # cancellation scope and two running-loop lookups (a getpid() each) per call,
        # thousands a second for one-record Produce requests (issue 18). And one timer
        # serves the connection, armed for the earliest deadline: calls mostly share
        # one timeout, so a later call's deadline is later and arms nothing (a timer
        # started and cancelled per call was two libuv calls and a handle each).
        deadline = loop.time() + timeout
        self.deadlines[cid] = deadline
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)
        self.transport.writelines(encode(cid, kind, meta, blobs))
        return cid

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = self.loop.call_at(at, self._expire_due)

    def _expire_due(self) -> None:
        """Fail the calls whose deadline has passed (TimeoutError); arm the timer for
        the earliest deadline left, if any."""
        self._timer = None
        # (A timer may fire a little before its time: libuv counts milliseconds.)
        now = self.loop.time() + 0.001
        earliest: float | None = None
        for cid, at in list(self.deadlines.items()):
            if at <= now:
                del self.deadlines[cid]
                fut = self.pending.pop(cid, None)  # (its late answer is dropped)
                if fut is not None and not fut.done():
                    fut.set_exception(TimeoutError())
                answer = self.callbacks.pop(cid, None)
                if answer is not None:
                    answer(TimeoutError())
            elif earliest is None or at < earliest:
                earliest = at
        if earliest is not None and not self.closed:
            self._arm(earliest)


def _error(frame: Frame) -> DataLinkError:
    """The DataLinkError an ERROR answer stands for."""
    return DataLinkError(bytes(frame.meta).decode("utf-8", "replace"))


def answer_of(frame: Frame) -> Frame:
    """The answer of a call, or DataLinkError when the node failed it."""
    if frame.kind == ERROR:
        raise _error(frame)
    return frame


def fetch_request(request: storage_pb2.FetchRequest) -> tuple[int, bytes]:
    """A storage Fetch as a data link request: its kind and meta (no blobs)."""
    return FETCH, request.SerializeToString()


def fetch_answer(frame: Frame) -> tuple[storage_pb2.FetchResponse, list[Buffer]]:
    """A Fetch answer: the response and, beside it, each partition's records in the
    response's order (the response's own ``records`` fields are empty: the record bytes
    travel as blobs, never through protobuf). Raises DataLinkError when they do not
    pair up. The one reader of this answer for gateways, the offset store and replica
    fetchers."""
    response = storage_pb2.FetchResponse.FromString(meta_bytes(frame))
    if len(frame.blobs) != len(response.partitions):
        raise DataLinkError(
            f"the storage node sent {len(frame.blobs)} records blobs "
            f"for {len(response.partitions)} partitions"
        )
    return response, list(frame.blobs)


async def open_connection(
    address: tuple[str, int], max_frame_bytes: int = MAX_MESSAGE_BYTES
) -> DataLinkConnection:
    """A new connection to the data link at ``address`` (raises DataLinkError), with
    mutual TLS as on gRPC when internal TLS is on (docs/security.md); for the pool and
    for a caller that keeps one connection of its own, like a replica fetcher."""
    loop = asyncio.get_running_loop()
    tls = internal_tls.active()
    try:
        _, conn = await loop.create_connection(
            lambda: DataLinkConnection(max_frame_bytes),
            address[0],
            address[1],
            ssl=tls.ssl_client_context() if tls else None,
            server_hostname=tls.server_name if tls else None,
        )
    except OSError as exc:
        raise DataLinkError(f"data link at {address}: {exc}") from exc
    TCP_CONNECTIONS.inc()
    return conn


class DataLinkPool:
    """Data link connections by storage node id, to the address in the metadata.

    ``available(node)`` says whether the node has a data link at all (nodes that
    register no ``data_port`` are called over gRPC).
    """

    def __init__(self, metadata: MetadataCache, max_frame_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.metadata = metadata
        self.max_frame_bytes = max_frame_bytes
        self._conns: dict[int, tuple[tuple[str, int], DataLinkConnection]] = {}
        self._opening: dict[int, asyncio.Task[DataLinkConnection]] = {}
        self._same_host = SameHostLinks()

    def available(self, node_id: int) -> bool:
        return self.metadata.current.data_address(node_id) is not None

    async def call(
        self,
        node_id: int,
        kind: int,
        meta: bytes,
        blobs: Sequence[Buffer],
        timeout: float,
        on_sent: Callable[[], None] | None = None,
    ) -> Frame:
        """One call to ``node_id``; raises DataLinkError, TimeoutError. ``on_sent`` runs
        once the request is written to the connection (frames written one after another
        reach the node in that order)."""
        conn = self._open_connection(node_id)
        if conn is None:
            conn = await asyncio.wait_for(self._connection(node_id), timeout)
        return await conn.call(kind, meta, blobs, timeout, on_sent)

    def start_call(
        self, node_id: int, kind: int, meta: bytes, blobs: Sequence[Buffer], timeout: float
    ) -> asyncio.Future[Frame] | None:
        """:meth:`DataLinkConnection.start_call` on the node's open connection; None
        when it has none open (the caller then uses :meth:`call`, which opens one)."""
        conn = self._open_connection(node_id)
        return None if conn is None else conn.start_call(kind, meta, blobs, timeout)

    def _open_connection(self, node_id: int) -> DataLinkConnection | None:
        """The node's connection when it is open at the node's current address: the
        common case, served without creating a task per call."""
        entry = self._conns.get(node_id)
        if entry is None or entry[1].closed:
            return None
        if entry[0] != self.metadata.current.data_address(node_id):
            return None
        return entry[1]

    async def _connection(self, node_id: int) -> DataLinkConnection:
        address = self.metadata.current.data_address(node_id)
        if address is None:
            raise DataLinkError(f"storage node {node_id} has no data link")
        entry = self._conns.get(node_id)
        if entry is not None and entry[0] == address and not entry[1].closed:
            return entry[1]
        opening = self._opening.get(node_id)
        if opening is None:
            opening = asyncio.ensure_future(self._open(node_id, address))
            self._opening[node_id] = opening
            opening.add_done_callback(lambda _: self._opening.pop(node_id, None))
        return await asyncio.shield(opening)

    async def _open(self, node_id: int, address: tuple[str, int]) -> DataLinkConnection:
        # A node on this host is reached over its Unix socket when it proves to be that
        # node; TCP otherwise (docs/data-link.md, "Same host").
        max_frame = self.max_frame_bytes
        conn = await self._same_host.open(
            node_id,
            self.metadata.current.data_socket(node_id),
            lambda: DataLinkConnection(max_frame),
        )
        if conn is None:
            try:
                conn = await open_connection(address, max_frame)
            except DataLinkError as exc:
                raise DataLinkError(f"storage node {node_id}: {exc}") from exc
        old = self._conns.get(node_id)
        if old is not None and old[1].transport is not None:
            old[1].transport.close()  # the node moved: its calls in flight fail over
        self._conns[node_id] = (address, conn)
        return conn

    async def close(self) -> None:
        for _, conn in self._conns.values():
            if conn.transport is not None:
                conn.transport.close()
        self._conns.clear()
        for task in list(self._opening.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
