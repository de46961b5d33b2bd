"""A connection's Produce lane: its Produce requests in arrival order, and the
coalescing of requests that queue up on it into one storage call per leader.

Kafka's broker handles one request per connection at a time, so a client may rely on
pipelined Produce requests of one connection landing in the order it sent them. The
gateway starts every request at once, so a connection's Produce requests take turns
here: each enters the lane when its handler starts (arrival order), and goes to the
storage nodes when every earlier one has been written to its leaders' data links
(docs/data-link.md) or, over gRPC, answered.

Coalescing (issue 18): librdkafka at ``linger.ms=0`` sends every record as its own
ProduceRequest, many in flight per connection. When a request's turn comes and later
requests of the connection are already waiting behind it, the whole *run* goes
together: one storage call per leader carrying every batch of the run, in request
order, and each request then answers with its own per-partition results. A run only
holds requests that a single storage call can serve exactly as it would serve them one
by one (:func:`coalescable`): the same ``acks``, ``timeout_ms`` and API version, and
no transactional id (a transactional request is verified per request, KIP-890). The
storage node appends a call's batches one after another in the order given, each
checked on its own (CRC, idempotent sequence, ...), so a batch that fails does not
let a later batch of the same partition through out of order, and an error lands on
the request that carried the batch. The price of a run is that its requests are
answered together, when the slowest of them is done (they were appended together, so
an acks=all run is replicated together too).

:func:`take_run` and :func:`merge_run` are pure; :class:`ProduceLane` is the asyncio
shell the Produce handler (:mod:`odradek.gateway.apis.produce`) uses.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.datalink.frame import Buffer
from odradek.rpc.v1 import storage_pb2

# A run's bounds: requests, and record bytes beyond its first request's (the first is
# always taken, whatever its size; a storage call carries at most a data link frame).
MAX_RUN_REQUESTS = 500
MAX_RUN_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PartitionEntry:
    """A partition a storage Produce call names, and its entry in that call as bytes:
    ``ProduceRequest.partitions`` without records, serialized once per partition, so
    a call is its serialized fields joined (protobuf appends a repeated field's
    entries met one after another) rather than a message built per request."""

    topic: str
    partition: int
    wire: bytes


@dataclass(eq=False, slots=True)
class QueuedProduce:
    """One client Produce request on its connection's lane.

    ``sends`` are its batches by leader node, filled while it is prepared; ``ready``
    once that is done (a legacy request is up-converted off the event loop first).
    """

    acks: int
    timeout_ms: int
    api_version: int
    transactional_id: str | None
    sends: dict[int, list[tuple[PartitionEntry, Buffer]]] = field(default_factory=dict)
    size: int = 0
    ready: bool = False
    # Resolved when the request leaves the queue: to its run when this request sends it
    # (it is the run's first), to None when an earlier request took it along.
    turn: asyncio.Future[list[QueuedProduce] | None] | None = None
    # Its entries' answers by node, in ``sends`` order (filled by the run's sender),
    # and the future resolved once they are all in.
    answers: dict[int, list[storage_pb2.ProducePartitionResult]] = field(default_factory=dict)
    answered: asyncio.Future[None] | None = None
    # Called once its run is handed to the storage nodes: its connection may start
    # the next request (connection.py's connection.max.handled.requests), so requests
    # piling up behind it are started and join the next run.
    handed_off: Callable[[], None] | None = None

    def add(self, node: int, partition: PartitionEntry, records: Buffer) -> None:
        self.sends.setdefault(node, []).append((partition, records))
        self.size += len(records)


def coalescable(first: QueuedProduce, other: QueuedProduce) -> bool:
    """Whether one storage call can carry ``other`` along with ``first`` and serve both
    exactly as two calls would."""
    return (
        first.transactional_id is None
        and other.transactional_id is None
        and first.acks == other.acks
        and first.timeout_ms == other.timeout_ms
        and first.api_version == other.api_version
    )


def take_run(
    queue: collections.deque[QueuedProduce],
    max_requests: int = MAX_RUN_REQUESTS,
    max_bytes: int = MAX_RUN_BYTES,
) -> list[QueuedProduce]:
    """Pop the run that goes next: the first request when it is ready, and the ready,
    coalescable requests right behind it, within the bounds. Empty when the first is
    not ready yet (nothing may overtake it)."""
    if not queue or not queue[0].ready:
        return []
    first = queue.popleft()
    run = [first]
    size = 0
    while queue and len(run) < max_requests:
        nxt = queue[0]
        if not nxt.ready or not coalescable(first, nxt) or size + nxt.size > max_bytes:
            break
        size += nxt.size
        run.append(queue.popleft())
    return run


@dataclass(slots=True)
class NodeCall:
    """The storage call of a run to one leader: the run's partition entries for that
    node in request order, their batches, and which request (index in the run) each
    entry belongs to."""

    partitions: list[PartitionEntry] = field(default_factory=list)
    records: list[Buffer] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)


def merge_run(run: list[QueuedProduce]) -> dict[int, NodeCall]:
    """One call per leader node carrying the run's batches for it, in request order."""
    if len(run) == 1 and len(run[0].sends) == 1:  # one request to one leader: most often
        [(node, entries)] = run[0].sends.items()
        return {
            node: NodeCall(
                [partition for partition, _ in entries],
                [records for _, records in entries],
                [0] * len(entries),
            )
        }
    calls: dict[int, NodeCall] = {}
    for owner, request in enumerate(run):
        for node, entries in request.sends.items():
            call = calls.get(node)
            if call is None:
                call = calls[node] = NodeCall()
            for partition, records in entries:
                call.partitions.append(partition)
                call.records.append(records)
                call.owners.append(owner)
    return calls


def split_answers(
    run: list[QueuedProduce],
    node: int,
    call: NodeCall,
    answers: list[storage_pb2.ProducePartitionResult],
) -> None:
    """Hand each request of ``run`` its share of one node's answers (one per entry of
    ``call``, in its order)."""
    for owner, answer in zip(call.owners, answers, strict=True):
        run[owner].answers.setdefault(node, []).append(answer)


class ProduceLane:
    """The Produce requests of one connection waiting for their turn (one per connection,
    in :class:`~odradek.gateway.connection.ConnectionContext`)."""

    __slots__ = ("_busy", "_loop", "_queue", "_scheduled")

    def __init__(self) -> None:
        self._queue: collections.deque[QueuedProduce] = collections.deque()
        self._busy = False
        self._scheduled = False
        # The connection's loop, looked up once: each lookup is a getpid() (issue 18).
        self._loop: asyncio.AbstractEventLoop | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def enter(self, request: QueuedProduce) -> None:
        """Take a place behind every request that entered before (call before the
        handler's first await: handlers start in arrival order)."""
        loop = self._running_loop()
        request.turn = loop.create_future()
        request.answered = loop.create_future()
        self._queue.append(request)

    def ready(self, request: QueuedProduce) -> None:
        """``request`` is prepared: it may go when its turn comes."""
        request.ready = True
        self._next()

    def leave(self, request: QueuedProduce) -> None:
        """``request`` sends nothing after all (every partition failed before the send,
        or its handler is cancelled): take it out of the queue."""
        try:
            self._queue.remove(request)
        except ValueError:
            return
        self._next()

    def passed(self, run: list[QueuedProduce] | None = None) -> None:
        """The current run (``run``) can no longer be overtaken: the next may go, and
        the connection may start the requests waiting behind ``run``'s."""
        self._busy = False
        for request in run or ():
            if request.handed_off is not None:
                request.handed_off()
        self._next()

    def _next(self) -> None:
        """Start the next run soon: after the handlers already scheduled to run, which
        are the requests read from the socket together with this one, so that they
        join its run (a data link write is synchronous: started at once, a run would
        never find a request waiting behind it)."""
        if self._busy or self._scheduled or not self._queue or not self._queue[0].ready:
            return
        self._scheduled = True
        self._running_loop().call_soon(self._start)

    def _start(self) -> None:
        self._scheduled = False
        if self._busy:
            return
        queue = self._queue
        while queue and queue[0].turn is not None and queue[0].turn.done():
            queue.popleft()  # its handler was cancelled and has not left yet
        run = take_run(queue)
        if not run:
            return
        self._busy = True
        first = run[0]
        assert first.turn is not None
        first.turn.set_result(run)
        for other in run[1:]:
            assert other.turn is not None
            if not other.turn.done():
                other.turn.set_result(None)

    def __len__(self) -> int:
        """Requests waiting for their turn."""
        return len(self._queue)
