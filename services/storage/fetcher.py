"""Follower side of replication: one fetcher task per (leader node, fetcher index).

Like Kafka's ReplicaFetcherThread, a fetcher multiplexes all partitions this node
follows from one leader over one connection: it sends a FetchRequest (replica_id =
this node, each partition at its log end offset with the epoch of its last fetched
batch), the leader answers once ``replica.fetch.min.bytes`` are there or
``replica.fetch.wait.max.ms`` passes, the fetcher appends and asks again. The
connection is the leader's data link (docs/data-link.md: the record bytes travel
beside a protobuf head, not inside it, and no gRPC call machinery runs per fetch),
or its ``ReplicaFetch`` gRPC stream when the leader has no data link, or when internal
TLS is on and the leader is on another host (its TCP data link then serves gateways
only, docs/security.md). A leader on this host is reached over its Unix socket when it
proves to be that start of that node (:mod:`odradek.datalink.same_host`, as a gateway
does), with or without internal TLS, over TCP otherwise: per
replicated record each follower sends a fetch and receives an answer, and on one host
the socket costs the kernel less per message than loopback TCP. With the
default ``replica.fetch.min.bytes`` of 1 an answer goes out as soon as anything is
new, as in Kafka: an acks=all produce waits for the followers' next fetches, so a
fetch that waited for more bytes would delay every acknowledgement by that wait.
While one fetch is out the leader's appends accumulate, so under load each fetch
carries every batch appended since the previous one.

A partition enters a fetcher in the *truncating* state: before fetching, the
follower asks the leader where its latest epoch ends (OffsetForLeaderEpoch) and
truncates there (:mod:`odradek.storage.truncation`); a Fetch answer carrying
``diverging_epoch`` (KIP-320) triggers the same truncation later. After each append
the follower's high watermark becomes ``min(leader HW, own LEO)`` and its log start
follows the leader's.

Follower replication throttle (Kafka's ``shouldFollowerThrottle``): while this node is
outside a partition's ISR and the partition is listed in
``follower.replication.throttled.replicas`` for it, the partition is left out of
fetches whenever ``follower.replication.throttled.rate`` is exceeded, and the bytes
appended for it count against the rate.

State is owned by the fetcher task; the metadata path only adds and removes
partitions. Every result is applied only if the partition still follows the same
leader in the same epoch as when the request went out, so a late answer can never
truncate a partition that has meanwhile become leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from odradek import internal_tls
from odradek.datalink.client import (
    DataLinkConnection,
    DataLinkError,
    fetch_answer,
    fetch_request,
    open_connection,
)
from odradek.datalink.frame import Buffer, Frame
from odradek.datalink.same_host import SameHostLinks
from odradek.protocol.errors import ErrorCode
from odradek.rpc.channel import open_channel
from odradek.rpc.server import MAX_MESSAGE_BYTES
from odradek.rpc.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from odradek.storage.data_link import REPLICA_FETCH_REFUSED
from odradek.storage.metrics import StorageMetrics
from odradek.storage.notify import wait_until
from odradek.storage.partition import Partition, Role
from odradek.storage.replication_quota import ReplicationQuotas
from odradek.storage.settings import StorageSettings
from odradek.storage.tasks import cancel_and_wait
from odradek.storage.truncation import truncation_state

log = logging.getLogger(__name__)

# Kafka's replica.socket.timeout.ms: how long a fetch may stay unanswered beyond its wait.
SOCKET_TIMEOUT_S = 30.0
_MIN_BACKOFF_S = 0.05
# Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``, ...) start so;
# they are replicated by a fetcher of their own (ReplicaFetcherManager).
INTERNAL_TOPIC_PREFIX = "__"


@dataclass(eq=False, slots=True)
class FetchState:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    failures: int = 0
    key: tuple[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.key = (self.partition.topic, self.partition.index)


class ReplicaFetcher:
    def __init__(
        self,
        settings: StorageSettings,
        leader_id: int,
        fetcher_id: int,
        address: str | None,
        incarnation: Callable[[], int],
        metrics: StorageMetrics,
        quotas: ReplicationQuotas | None = None,
        data_address: tuple[str, int] | None = None,
        data_socket: common_pb2.DataSocket | None = None,
        same_host: SameHostLinks | None = None,
    ) -> None:
        self.settings = settings
        self.data_address = data_address
        # The leader's Unix socket (docs/data-link.md, "Same host"), tried before TCP.
        self.data_socket = data_socket
        self.same_host = same_host or SameHostLinks()
        self.node_id = settings.node_id
        self.quotas = quotas or ReplicationQuotas()
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.address = address
        self.incarnation = incarnation
        self.metrics = metrics
        self.states: dict[tuple[str, int], FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        self._failing = False
        self._max_backoff = max(_MIN_BACKOFF_S, settings.replica_fetch_backoff_ms / 1000.0)
        # The previous round's request, reused while it names the same partitions in the
        # same epochs (_build_request): its (state, leader epoch) list and its entries.
        self._request: storage_pb2.FetchRequest | None = None
        self._request_shape: list[tuple[FetchState, int]] = []
        self._request_partitions: list[storage_pb2.FetchPartition] = []

    # -- membership (called by the manager on the loop) ---------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(
            self._run(), name=f"replica-fetcher-{self.leader_id}-{self.fetcher_id}"
        )

    def _now(self) -> float:
        """The loop's clock. The loop is kept from :meth:`start`: every fetch round reads
        the clock twice, and ``asyncio.get_running_loop`` costs a ``getpid`` per call
        (issue 18: one round per replicated one-record produce)."""
        loop = self._loop
        return (loop if loop is not None else asyncio.get_running_loop()).time()

    def add(self, part: Partition) -> None:
        self.states[(part.topic, part.index)] = FetchState(part, part.leader_epoch)
        self._changed.set()

    def remove(self, part: Partition) -> None:
        self.states.pop((part.topic, part.index), None)
        self._changed.set()

    def set_address(
        self,
        address: str | None,
        data_address: tuple[str, int] | None = None,
        data_socket: common_pb2.DataSocket | None = None,
    ) -> None:
        if (
            address != self.address
            or data_address != self.data_address
            or data_socket != self.data_socket
        ):
            log.info("leader %d now at %s (data link %s)", self.leader_id, address, data_address)
            self.address = address
            self.data_address = data_address
            self.data_socket = data_socket  # a new start of the leader: a new token
            self._changed.set()

    async def stop(self) -> None:
        self._stopped = True
        self._changed.set()
        await cancel_and_wait([self._task])

    # -- the loop -----------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = _MIN_BACKOFF_S
        while not self._stopped:
            address, data_address, data_socket = self.address, self.data_address, self.data_socket
            if address is None:
                await self._wait_changed(1.0)
                continue
            channel = open_channel(address)
            stub = storage_pb2_grpc.StorageStub(channel)
            call: grpc.aio.StreamStreamCall | None = None
            link: DataLinkConnection | None = None
            # Under internal TLS only the leader's Unix socket serves replica fetches
            # (its TCP data link serves gateways only): without one, gRPC.
            via_link = data_address is not None and (
                internal_tls.active() is None
                or self.same_host.candidate(self.leader_id, data_socket)
            )
            try:
                while (
                    self.address == address
                    and self.data_address == data_address
                    and self.data_socket is data_socket  # set_address compares values
                    and not self._stopped
                ):
                    await self._truncate(stub)
                    request, sent = self._build_request()
                    if request is None:
                        await self._wait_changed(self._until_next_ready())
                        continue
                    wait = self.settings.replica_fetch_wait_max_ms / 1000.0 + SOCKET_TIMEOUT_S
                    if via_link and (link is None or link.closed):
                        link = await asyncio.wait_for(
                            self._open_link(data_address, data_socket), SOCKET_TIMEOUT_S
                        )
                        via_link = link is not None
                    if via_link and link is not None:
                        kind, meta = fetch_request(request)
                        response, records = fetch_answer(await link.call(kind, meta, (), wait))
                        self._process(response, sent, records)
                        backoff = _MIN_BACKOFF_S
                        if self._failing:
                            self._failing = False
                            log.info("fetching from leader %d at %s again", self.leader_id, address)
                        # The rounds after this one run from the answers themselves while
                        # nothing needs this task (_Rounds); back here for what does.
                        await _Rounds(self, link, address, data_address, data_socket, wait).run()
                        continue
                    else:
                        if call is None:
                            call = stub.ReplicaFetch()
                        await call.write(request)
                        response = await asyncio.wait_for(call.read(), wait)
                        if response is grpc.aio.EOF:
                            raise ConnectionError("the leader closed the replica fetch stream")
                        records = [r.records for r in response.partitions]
                    self._process(response, sent, records)
                    backoff = _MIN_BACKOFF_S
                    if self._failing:
                        self._failing = False
                        log.info("fetching from leader %d at %s again", self.leader_id, address)
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, ConnectionError, TimeoutError, DataLinkError) as exc:
                if self._stopped:
                    return
                if isinstance(exc, DataLinkError) and REPLICA_FETCH_REFUSED in str(exc):
                    # A leader of an older version serves replica fetches under internal
                    # TLS over gRPC only: that start of it gets them there.
                    self.same_host.refuse(self.leader_id, data_socket)
                detail = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
                log.log(
                    logging.DEBUG if self._failing else logging.INFO,
                    "fetch from leader %d at %s failed: %s",
                    self.leader_id,
                    address,
                    detail,
                )
                self._failing = True
                self._delay_all(backoff)
                backoff = min(backoff * 2, self._max_backoff)
            except Exception:
                log.exception("replica fetcher for leader %d failed", self.leader_id)
                self._delay_all(backoff)
                backoff = min(backoff * 2, self._max_backoff)
            finally:
                if call is not None:
                    call.cancel()
                if link is not None:
                    link.close()
                with contextlib.suppress(Exception):
                    await channel.close(None)

    async def _open_link(
        self, address: tuple[str, int] | None, data_socket: common_pb2.DataSocket | None
    ) -> DataLinkConnection | None:
        """The leader's data link: its Unix socket when it is on this host and proves to
        be that start of the leader, TCP otherwise; under internal TLS the socket or
        None (the caller then fetches over gRPC, where the peer rules name the replica)."""
        conn = await self.same_host.open(
            self.leader_id, data_socket, lambda: DataLinkConnection(MAX_MESSAGE_BYTES)
        )
        if conn is not None or address is None or internal_tls.active() is not None:
            return conn
        return await open_connection(address)

    async def _wait_changed(self, timeout: float) -> None:
        self._changed.clear()
        if not self._stopped:
            deadline = self._now() + max(0.0, timeout)
            await wait_until(self._changed, deadline)

    def _until_next_ready(self) -> float:
        now = self._now()
        pending = [s.delayed_until - now for s in self.states.values() if self._current(s)]
        return min((max(0.0, d) for d in pending), default=1.0)

    def _current(self, state: FetchState) -> bool:
        part = state.partition
        return (
            self.states.get(state.key) is state
            and part.role is Role.FOLLOWER
            and part.leader_id == self.leader_id
            and part.leader_epoch == state.leader_epoch
        )

    def _ready(self, state: FetchState, now: float) -> bool:
        return state.delayed_until <= now and self._current(state)

    def _delay(self, state: FetchState) -> None:
        state.failures += 1
        delay = min(self._max_backoff, _MIN_BACKOFF_S * (2 ** min(state.failures - 1, 10)))
        state.delayed_until = self._now() + delay

    def _delay_all(self, delay: float) -> None:
        until = self._now() + delay
        for state in self.states.values():
            state.delayed_until = max(state.delayed_until, until)

    # -- truncation ---------------------------------------------------------------------
    async def _truncate(self, stub: storage_pb2_grpc.StorageStub) -> None:
        now = self._now()
        asking: list[FetchState] = []
        for state in list(self.states.values()):
            if not state.truncating or not self._ready(state, now):
                continue
            if state.partition.latest_epoch < 0:
                state.truncating = False  # no epochs yet: nothing of ours can diverge
                continue
            asking.append(state)
        if not asking:
            return
        request = storage_pb2.OffsetForLeaderEpochRequest(
            replica_id=self.node_id,
            partitions=[
                storage_pb2.OffsetForLeaderEpochPartition(
                    topic=s.partition.topic,
                    partition=s.partition.index,
                    current_leader_epoch=s.leader_epoch,
                    leader_epoch=s.partition.latest_epoch,
                )
                for s in asking
            ],
        )
        response = await stub.OffsetForLeaderEpoch(request, timeout=SOCKET_TIMEOUT_S)
        answers = {(r.topic, r.partition): r for r in response.partitions}
        for state in asking:
            if not self._current(state):
                continue
            answer = answers.get(state.key)
            if answer is None or answer.error_code != ErrorCode.NONE:
                code = answer.error_code if answer is not None else -1
                log.debug("%s: OffsetForLeaderEpoch error %d", state.partition.name, code)
                self._delay(state)
                continue
            self._truncate_to_leader(state, answer.leader_epoch, answer.end_offset)

    def _truncate_to_leader(self, state: FetchState, leader_epoch: int, end_offset: int) -> None:
        part = state.partition
        leo = part.log_end_offset
        decision = truncation_state(leader_epoch, end_offset, part.end_offset_for_epoch, leo)
        if decision.offset < leo:
            log.info(
                "%s: truncating from %d to %d (leader's epoch %d ends at %d)",
                part.name,
                leo,
                decision.offset,
                leader_epoch,
                end_offset,
            )
        before = (leo, part.latest_epoch)
        part.truncate_to(decision.offset)
        state.truncating = not decision.completed
        if state.truncating and (part.log_end_offset, part.latest_epoch) == before:
            self._delay(state)  # no progress this round: never spin on the leader
        else:
            state.failures = 0

    # -- fetching -----------------------------------------------------------------------
    def _build_request(
        self,
    ) -> tuple[storage_pb2.FetchRequest | None, dict[tuple[str, int], tuple[FetchState, int]]]:
        """This round's request: every partition ready to fetch, at its log end.

        The message of the previous round is reused when it names the same partitions
        in the same epochs (the common case: one round per replicated record), with the
        offsets and the incarnation set in place: building the messages anew cost three
        times as much (issue 18). The request is serialized or written before the next
        round builds again."""
        now = self._now()
        sent: dict[tuple[str, int], tuple[FetchState, int]] = {}
        quota = self.quotas.follower
        for state in self.states.values():
            if state.truncating or not self._ready(state, now):
                continue
            part = state.partition
            if self._throttled(part) and quota.exceeded():
                # re-checked at least every second: the rate may be raised meanwhile
                state.delayed_until = now + min(max(quota.delay(), _MIN_BACKOFF_S / 5), 1.0)
                continue
            sent[state.key] = (state, part.log_end_offset)
        if not sent:
            return None, sent
        shape = [(state, state.leader_epoch) for state, _ in sent.values()]
        request = self._request
        if request is None or shape != self._request_shape:
            partitions = [
                storage_pb2.FetchPartition(
                    topic=state.partition.topic,
                    partition=state.partition.index,
                    fetch_offset=leo,
                    partition_max_bytes=self.settings.replica_fetch_max_bytes,
                    current_leader_epoch=state.leader_epoch,
                    log_start_offset=state.partition.log_start_offset,
                    last_fetched_epoch=state.partition.latest_epoch,
                )
                for state, leo in sent.values()
            ]
            request = self._request = storage_pb2.FetchRequest(
                replica_id=self.node_id,
                replica_incarnation=self.incarnation(),
                max_wait_ms=self.settings.replica_fetch_wait_max_ms,
                min_bytes=self.settings.replica_fetch_min_bytes,
                max_bytes=self.settings.replica_fetch_response_max_bytes,
                partitions=partitions,
            )
            self._request_shape = shape
            self._request_partitions = list(request.partitions)
            return request, sent
        request.replica_incarnation = self.incarnation()
        for fp, (state, leo) in zip(self._request_partitions, sent.values(), strict=True):
            part = state.partition
            fp.fetch_offset = leo
            fp.log_start_offset = part.log_start_offset
            fp.last_fetched_epoch = part.latest_epoch
        return request, sent

    def _process(
        self,
        response: storage_pb2.FetchResponse,
        sent: dict[tuple[str, int], tuple[FetchState, int]],
        records: list[Buffer],
    ) -> None:
        """Apply each partition's answer; ``records[i]`` are partition i's batches."""
        for result, data in zip(response.partitions, records, strict=True):
            entry = sent.get((result.topic, result.partition))
            if entry is None:
                continue
            state, fetch_offset = entry
            if not self._current(state) or state.partition.log_end_offset != fetch_offset:
                continue
            try:
                self._apply(state, result, data)
            except Exception as exc:
                log.warning("%s: cannot apply fetched data: %s", state.partition.name, exc)
                state.truncating = True
                self._delay(state)

    def _apply(
        self, state: FetchState, result: storage_pb2.FetchPartitionResult, records: Buffer
    ) -> None:
        part = state.partition
        code = result.error_code
        if code == ErrorCode.NONE:
            if result.HasField("diverging_epoch"):
                diverging = result.diverging_epoch
                self._truncate_to_leader(state, diverging.epoch, diverging.end_offset)
                return
            if records:
                part.append_as_follower(records)
                self.metrics.replica_bytes_in(part.topic, len(records))
                if self._throttled(part):
                    self.quotas.follower.record(len(records))
            part.update_follower_high_watermark(result.high_watermark)
            leader_start = result.log_start_offset
            # Only when the leader's log start is past ours (DeleteRecords, retention):
            # the call is a no-op otherwise, but its I/O guard runs every round, once per
            # replicated record (issue 18). An offline log still goes through it, to fail.
            if part.offline or leader_start > part.log.log_start_offset:
                part.follow_leader_log_start(leader_start)
            state.failures = 0
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and result.log_end_offset >= 0:
            leo = part.log_end_offset
            if result.log_end_offset < leo:
                log.warning(
                    "%s: our log end %d is past the leader's %d; truncating to it",
                    part.name,
                    leo,
                    result.log_end_offset,
                )
                part.truncate_to(result.log_end_offset)
                return
            if result.log_start_offset > leo:
                log.info(
                    "%s: behind the leader's log start %d; restarting the log there",
                    part.name,
                    result.log_start_offset,
                )
                part.truncate_fully_and_start_at(result.log_start_offset)
                return
        log.debug("%s: fetch error %s", part.name, _name(code))
        self._delay(state)

    def _throttled(self, part: Partition) -> bool:
        return part.follower_throttled and self.node_id not in part.isr

    def _steady(
        self,
        address: str | None,
        data_address: tuple[str, int] | None,
        data_socket: common_pb2.DataSocket | None,
    ) -> bool:
        """Whether the next round may go from an answer as :meth:`_run`'s loop would send
        it: the same leader address, not stopped, no partition ready to truncate (that
        asks the leader over gRPC, an await)."""
        if (
            self._stopped
            or self.address != address
            or self.data_address != data_address
            or self.data_socket is not data_socket
        ):
            return False
        now = -1.0
        for state in self.states.values():
            if state.truncating:
                if now < 0:
                    now = self._now()
                if self._ready(state, now):
                    return False
        return True


class _Rounds:
    """A replica fetcher's rounds on the data link as callbacks: each answer is applied
    and the next fetch sent from the connection's read (``DataLinkConnection.call_with``),
    as :meth:`ReplicaFetcher._run`'s loop would do them, without waking its task per
    round: one round per replicated record, and the task's wake-up was a loop turn of
    its own (issue 18). :meth:`run` returns to the task when a round needs it (a leader
    address change, a stop, a partition to truncate, nothing to fetch), and raises what
    a round raised (a lost connection, a timeout), which the task handles as before."""

    __slots__ = ("_address", "_data_address", "_data_socket", "_done", "_fetcher", "_link", "_wait")

    def __init__(
        self,
        fetcher: ReplicaFetcher,
        link: DataLinkConnection,
        address: str | None,
        data_address: tuple[str, int] | None,
        data_socket: common_pb2.DataSocket | None,
        wait: float,
    ) -> None:
        self._fetcher = fetcher
        self._link = link
        self._address = address
        self._data_address = data_address
        self._data_socket = data_socket
        self._wait = wait
        self._done: asyncio.Future[None] | None = None

    async def run(self) -> None:
        loop = self._fetcher._loop
        self._done = done = (loop or asyncio.get_running_loop()).create_future()
        self._next()
        try:
            await done
        finally:
            self._done = None  # a late answer (the task was cancelled) goes nowhere

    def _next(self) -> None:
        """Send the next round's fetch, or hand back to the task."""
        done = self._done
        if done is None or done.done():
            return
        fetcher = self._fetcher
        try:
            if self._link.closed or not fetcher._steady(
                self._address, self._data_address, self._data_socket
            ):
                done.set_result(None)
                return
            request, sent = fetcher._build_request()
            if request is None:
                done.set_result(None)
                return
            kind, meta = fetch_request(request)
            self._link.call_with(
                kind, meta, (), self._wait, functools.partial(self._answered, sent)
            )
        except Exception as exc:
            done.set_exception(exc)

    def _answered(
        self, sent: dict[tuple[str, int], tuple[FetchState, int]], answer: Frame | Exception
    ) -> None:
        done = self._done
        if done is None or done.done():
            return
        try:
            if isinstance(answer, Exception):
                raise answer
            response, records = fetch_answer(answer)
            self._fetcher._process(response, sent, records)
        except Exception as exc:
            done.set_exception(exc)
            return
        self._next()


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class ReplicaFetcherManager:
    """Assigns followed partitions to fetchers keyed by (leader, hash % num.replica.fetchers),
    and the internal topics' partitions (``__consumer_offsets``, ``__transaction_state``,
    any name starting ``__``) to one more fetcher per leader of their own.

    A fetch round handles every partition of its fetcher on both sides (the follower
    builds and applies an entry for each, the leader checks and reads each), and an
    append to any one of them ends the round early. The internal topics are a hundred
    partitions on a fresh cluster that rarely change: in the fetcher of a user topic
    they made each replicated one-record produce cost some seventy partition checks on
    the leader and as many on the follower (issue 18, acks=all at 2,000 records/s).
    Apart, a user topic's round handles its own partitions, and the internal topics'
    fetcher long-polls undisturbed.
    """

    def __init__(
        self,
        settings: StorageSettings,
        address_of: Callable[[int], str | None],
        incarnation: Callable[[], int],
        metrics: StorageMetrics,
        quotas: ReplicationQuotas | None = None,
        data_address_of: Callable[[int], tuple[str, int] | None] = lambda _node: None,
        data_socket_of: Callable[[int], common_pb2.DataSocket | None] = lambda _node: None,
    ) -> None:
        self.settings = settings
        self.quotas = quotas or ReplicationQuotas()
        self.address_of = address_of
        self.data_address_of = data_address_of
        self.data_socket_of = data_socket_of
        # One memory of refused sockets for every fetcher of this node.
        self.same_host = SameHostLinks()
        self.incarnation = incarnation
        self.metrics = metrics
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assignment: dict[tuple[str, int], tuple[int, int]] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    def _fetcher_id(self, topic: str, index: int) -> int:
        n = self.settings.num_replica_fetchers
        if topic.startswith(INTERNAL_TOPIC_PREFIX):
            return n  # the internal topics' own fetcher (class docstring)
        return 0 if n <= 1 else zlib.crc32(f"{topic}-{index}".encode()) % n

    def add(self, part: Partition) -> None:
        self.remove(part)
        fkey = (part.leader_id, self._fetcher_id(part.topic, part.index))
        fetcher = self.fetchers.get(fkey)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.settings,
                part.leader_id,
                fkey[1],
                self.address_of(part.leader_id),
                self.incarnation,
                self.metrics,
                self.quotas,
                self.data_address_of(part.leader_id),
                self.data_socket_of(part.leader_id),
                self.same_host,
            )
            self.fetchers[fkey] = fetcher
            fetcher.start()
        fetcher.add(part)
        self._assignment[(part.topic, part.index)] = fkey

    def remove(self, part: Partition) -> None:
        fkey = self._assignment.pop((part.topic, part.index), None)
        if fkey is None:
            return
        fetcher = self.fetchers.get(fkey)
        if fetcher is None:
            return
        fetcher.remove(part)
        if not fetcher.states:
            del self.fetchers[fkey]
            task = asyncio.get_running_loop().create_task(fetcher.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def refresh_addresses(self) -> None:
        for (leader_id, _), fetcher in self.fetchers.items():
            fetcher.set_address(
                self.address_of(leader_id),
                self.data_address_of(leader_id),
                self.data_socket_of(leader_id),
            )

    def following(self) -> dict[tuple[str, int], int]:
        return {key: fkey[0] for key, fkey in self._assignment.items()}

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._assignment.clear()
        await asyncio.gather(*(f.stop() for f in fetchers), return_exceptions=True)
        if self._stopping:
            await asyncio.wait(self._stopping, timeout=10.0)
