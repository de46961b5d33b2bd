"""Produce (key 0), versions 0-11.

Records stay bytes: the gateway checks only the magic byte, groups partitions by the
storage node leading them and sends one Produce per node, in parallel, over the node's
data link (the request's record bytes go to the socket uncopied; docs/data-link.md) or
gRPC. The storage node validates CRCs, assigns offsets and answers per ``acks``.

Ordering: like Kafka, which handles one request per connection at a time, Produce
requests of one connection go to the storage nodes strictly one after another (the
connection's Produce lane, :mod:`odradek.gateway.produce_lane`), so records from one
connection land in the order they were sent even with several requests in flight.
Other APIs on the connection are not held up. Over a data link the lane passes on as
soon as a request is written to every leader's connection, tagged with the client
connection as its ``ordering_lane``: the storage node appends a lane's requests in
arrival order (docs/data-link.md), so the next request's appends cannot overtake,
while its acks=-1 wait overlaps the previous one's. Over gRPC the lane passes on only
with the answer. Requests that queue up on the lane meanwhile (librdkafka at
``linger.ms=0`` sends one request per record) go together when their turn comes: one
storage call per leader for the whole run, each request answered with its own
results (produce_lane.py says which requests may share a call).

Broker ports: a Produce that arrives on broker ``N``'s port (docs/brokers.md) goes to
storage node ``N``, whatever the gateway's metadata says, and ``N`` answers
NOT_LEADER_OR_FOLLOWER if it does not lead the partition, as broker ``N`` of a Kafka
cluster would. Routing it to the leader instead let two pipelined requests of one
connection reach two nodes around a leader change (the first refused by the old
leader, the second taken out of sequence by the new one): librdkafka's idempotent
producer answers that OUT_OF_ORDER_SEQUENCE_NUMBER with an epoch bump, and batches
the old leader had appended but not acknowledged were written a second time under
the new epoch. On the bootstrap listener, which is no broker, the request goes to the
leader the gateway knows.

Old clients: v0-v2 carry legacy message sets (magic 0/1); they are up-converted to v2
batches before storage, which only keeps v2 (Kafka 4 does the same); large ones off
the event loop, bounded (odradek.gateway.offload). v3+ must carry v2 batches
(INVALID_RECORD otherwise, as Kafka answers).
acks=0 gets no response at all (docs/compatibility.md C6).

Transactions: ``transactional_id`` (v3+) travels to the storage leader, which checks
a transactional batch against the producer's state and, for the first batch of a
transaction on a partition, against the transaction coordinator (KIP-890 part 1:
a partition not added to the ongoing transaction is refused, so a late retry cannot
open a hanging transaction). The request's version travels too: a failed
verification is TRANSACTION_ABORTABLE from v11 on, INVALID_TXN_STATE before (Kafka's
KafkaApis). Transactional batches in a request without a transactional id get
TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition, as Kafka answers.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

import grpc
from prometheus_client import Counter

from odradek.datalink.client import DataLinkError, answer_of
from odradek.datalink.frame import Buffer, Frame, meta_bytes
from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext, Result, request_handed_off
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.leader_calls import failure_code, leader_answer_code
from odradek.gateway.offload import LEGACY_CONVERSION_MAX_BYTES, run_heavy
from odradek.gateway.produce_lane import (
    NodeCall,
    PartitionEntry,
    ProduceLane,
    QueuedProduce,
    merge_run,
    split_answers,
)
from odradek.metric_tallies import CounterTally
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import ProduceRequest, ProduceResponse
from odradek.protocol.produce_response import (
    PartResp,
    RecordError,
    partition_response,
    produce_response,
    topic_response,
)
from odradek.records.batch import MAGIC_OFFSET, RecordsError
from odradek.records.convert import upconvert_legacy
from odradek.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, TRANSACTIONAL_FLAG_MASK
from odradek.rpc.v1 import storage_pb2

log = logging.getLogger(__name__)

API_KEY = ApiKey.PRODUCE

BYTES_IN = Counter("odradek_gateway_bytes_in_total", "Record bytes produced, by topic.", ["topic"])
PRODUCE_PARTITIONS = Counter(
    "odradek_gateway_produce_partitions_total", "Partition entries produced, by topic.", ["topic"]
)

PRODUCE_COALESCED = CounterTally(
    Counter(
        "odradek_gateway_produce_coalesced_requests_total",
        "Produce requests sent to the storage nodes in one call with an earlier request of "
        "their connection (produce_lane.py).",
    )
)
# Tallies of the children by topic (odradek.metric_tallies: no lock per request).
_TOPIC_METRICS: dict[str, tuple[CounterTally, CounterTally]] = {}

_NONE_DENIED: frozenset[str] = frozenset()  # no authorizer: no topic names to collect

# Stands in an entry's place in the results while its leader's answer is awaited
# (_prepare); :func:`_apply_answers` replaces every one of them.
_AWAITING_ANSWER = partition_response(-1, ErrorCode.REQUEST_TIMED_OUT)

_PARTITION_ENTRIES: dict[tuple[str, int], PartitionEntry] = {}
_MAX_PARTITION_ENTRIES = 100_000  # bounded: cleared when full
_REQUEST_HEADS: dict[tuple[int, int, str | None, int, int], bytes] = {}
_MAX_REQUEST_HEADS = 10_000  # bounded: cleared when full


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: ProduceRequest
) -> ProduceResponse | None:
    # KafkaApis.handleProduceRequest: WRITE on the transactional id, then on each topic.
    txn = request.transactional_id if header.api_version >= 3 else None
    denied_txn = txn is not None and bool(
        gw.authorizer.denied(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, [txn])
    )
    denied = (
        gw.authorizer.denied(
            ctx, AclOperation.WRITE, ResourceType.TOPIC, [t.name for t in request.topic_data]
        )
        if gw.authorizer.enabled
        else _NONE_DENIED
    )
    # (Nothing denied, the common case: no list built per request, issue 18.)
    refused = (
        [t for t in request.topic_data if denied_txn or t.name in denied]
        if denied or denied_txn
        else []
    )
    if refused:
        request.topic_data = [t for t in request.topic_data if t not in refused]
    version = header.api_version
    queued = QueuedProduce(request.acks, request.timeout_ms, version, txn)
    queued.handed_off = request_handed_off()
    lane = ctx.produce_lane
    lane.enter(queued)  # before any await: handlers start in arrival order
    try:
        results = await _prepare(gw, version, request, queued, ctx.broker_id)
    except BaseException:
        lane.leave(queued)
        raise
    if queued.sends:
        lane.ready(queued)
        try:
            await _take_turn(gw, ctx.connection_id, lane, queued)
        finally:
            # The turn's result is the run, which holds ``queued``: a reference cycle
            # that left every request (and the request buffer its batches view) to
            # the cyclic GC, a fifth of the gateway's CPU at 500 one-record acks=all
            # requests a second (issue 18).
            queued.turn = queued.answered = None
        _apply_answers(queued, results)
    else:
        lane.leave(queued)  # nothing to append: nothing to keep in order
    if refused:  # (the codes looked up only then: an enum member costs ~0.3 us, issue 18)
        code = (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            if denied_txn
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
    for t in refused:
        results.setdefault(t.name, {}).update(
            {p.index: partition_response(p.index, code) for p in t.partition_data}
        )
    if request.acks == 0:
        return None
    return produce_response(
        [topic_response(topic, list(parts.values())) for topic, parts in results.items()]
    )


async def _prepare(
    gw: GatewayApi,
    version: int,
    request: ProduceRequest,
    queued: QueuedProduce,
    broker_id: int | None = None,
) -> dict[str, dict[int, PartResp]]:
    """Check every partition entry: an error result, or its batches added to
    ``queued`` for the leader (the result then waits for the leader's answer)."""
    snap = gw.metadata.current
    results: dict[str, dict[int, PartResp]] = {}
    if queued.transactional_id is None and _has_transactional_records(request):
        return {
            t.name: {
                p.index: partition_response(
                    p.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                )
                for p in t.partition_data
            }
            for t in request.topic_data
        }
    for topic_data in request.topic_data:
        name = topic_data.name
        topic_results = results.setdefault(name, {})
        leaders = snap.leaders(name)
        for pdata in topic_data.partition_data:
            index = pdata.index
            if leaders is None or not 0 <= index < len(leaders):
                topic_results[index] = partition_response(
                    index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                continue
            leader = leaders[index]
            if leader < 0:
                topic_results[index] = partition_response(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            # odradek.protocol.decoder leaves records a zero-copy view of the request
            # (annotated, not ``typing.cast``: that is a call per entry at run time).
            records: memoryview | None = pdata.records  # type: ignore[assignment]
            if records is None or len(records) == 0:
                topic_results[index] = partition_response(
                    index, ErrorCode.INVALID_RECORD, error_message="empty records"
                )
                continue
            data: Buffer
            magic = records[MAGIC_OFFSET] if len(records) > MAGIC_OFFSET else -1
            if version < 3 and magic in (0, 1):
                try:
                    data = await run_heavy(
                        len(records),
                        functools.partial(
                            upconvert_legacy, records, max_output_size=LEGACY_CONVERSION_MAX_BYTES
                        ),
                    )
                except RecordsError as exc:
                    topic_results[index] = partition_response(
                        index, ErrorCode.CORRUPT_MESSAGE, error_message=str(exc)
                    )
                    continue
            elif magic != 2:
                topic_results[index] = partition_response(
                    index,
                    ErrorCode.INVALID_RECORD,
                    error_message=f"Produce v{version} requires magic 2 record batches, "
                    f"found magic {magic}",
                )
                continue
            else:
                data = records  # a view of the request: sent on without a copy
            bytes_in, partitions_in = _topic_metrics(name)
            bytes_in.inc(len(data))
            partitions_in.inc()
            # Its place in the response's order, until answered (_apply_answers): one
            # shared placeholder, not a response built per entry and thrown away.
            topic_results[index] = _AWAITING_ANSWER
            # On broker N's port the request goes to storage node N (module docstring).
            node = leader if broker_id is None else broker_id
            queued.add(node, _partition_entry(name, index), data)
    return results


def _partition_entry(topic: str, partition: int) -> PartitionEntry:
    """The storage call's entry naming the partition, serialized once per partition."""
    key = (topic, partition)
    found = _PARTITION_ENTRIES.get(key)
    if found is None:
        if len(_PARTITION_ENTRIES) >= _MAX_PARTITION_ENTRIES:
            _PARTITION_ENTRIES.clear()
        wire = storage_pb2.ProduceRequest(
            partitions=[storage_pb2.ProducePartition(topic=topic, partition=partition)]
        ).SerializeToString()
        found = _PARTITION_ENTRIES[key] = PartitionEntry(topic, partition, wire)
    return found


def _request_head(first: QueuedProduce, lane: int) -> bytes:
    """A storage ProduceRequest's fields but its partitions, serialized once per
    connection and kind of request (a message built and serialized per call was the
    largest share of :func:`_send`, issue 18)."""
    key = (first.acks, first.timeout_ms, first.transactional_id, first.api_version, lane)
    found = _REQUEST_HEADS.get(key)
    if found is None:
        if len(_REQUEST_HEADS) >= _MAX_REQUEST_HEADS:
            _REQUEST_HEADS.clear()
        found = _REQUEST_HEADS[key] = storage_pb2.ProduceRequest(
            acks=first.acks,
            timeout_ms=first.timeout_ms,
            transactional_id=first.transactional_id or "",
            api_version=first.api_version,
            ordering_lane=lane,
        ).SerializeToString()
    return found


def _topic_metrics(topic: str) -> tuple[CounterTally, CounterTally]:
    """The topic's byte and partition-entry counters (``labels()`` once per topic: per
    request it was a measurable share of the gateway's CPU, issue 18)."""
    found = _TOPIC_METRICS.get(topic)
    if found is None:
        found = _TOPIC_METRICS[topic] = (
            CounterTally(BYTES_IN.labels(topic)),
            CounterTally(PRODUCE_PARTITIONS.labels(topic)),
        )
    return found


async def _take_turn(
    gw: GatewayApi, lane_id: int, lane: ProduceLane, queued: QueuedProduce
) -> None:
    """Wait for ``queued``'s turn on the lane; send its run when it heads one; return
    once its answers are in."""
    turn, answered = queued.turn, queued.answered
    assert turn is not None and answered is not None
    try:
        run = await turn
    except asyncio.CancelledError:
        run = turn.result() if turn.done() and not turn.cancelled() else None
        if run:  # ours to send, never sent: answer it as unknown, free the lane
            _answered(run)
            lane.passed()
        else:
            lane.leave(queued)
        raise
    if run is not None:
        await _send_run(gw, lane_id, lane, run)
    await answered


async def _send_run(
    gw: GatewayApi, lane_id: int, lane: ProduceLane, run: list[QueuedProduce]
) -> None:
    """One storage call per leader for the whole run; the lane passes on once every
    call is written to its data link (or answered, over gRPC)."""
    if len(run) > 1:
        PRODUCE_COALESCED.inc(len(run) - 1)
    calls = merge_run(run)
    passed = _once(functools.partial(lane.passed, run))
    first = run[0]
    try:
        if len(calls) == 1:
            # One leader (the common case): no task to create, and its being sent is
            # the run's being sent.
            [(node, call)] = calls.items()
            await _send(gw, node, call, run, first, lane_id, passed)
        else:
            await _send_all(gw, calls, run, first, lane_id, passed)
    finally:
        passed()
        _answered(run)


async def _send_all(
    gw: GatewayApi,
    calls: dict[int, NodeCall],
    run: list[QueuedProduce],
    first: QueuedProduce,
    lane_id: int,
    passed: Callable[[], None],
) -> None:
    """The run's calls to several leaders, in parallel; ``passed`` once all are sent."""
    unsent = len(calls)

    def one_sent() -> None:
        nonlocal unsent
        unsent -= 1
        if unsent == 0:
            passed()

    await asyncio.gather(
        *(
            _send(gw, node, call, run, first, lane_id, _once(one_sent))
            for node, call in calls.items()
        )
    )


def _answered(run: list[QueuedProduce]) -> None:
    """Wake every request of ``run``; those left without an answer get
    REQUEST_TIMED_OUT (:func:`_apply_answers`)."""
    for queued in run:
        if queued.answered is not None and not queued.answered.done():
            queued.answered.set_result(None)


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    done = False

    def call() -> None:
        nonlocal done
        if not done:
            done = True
            fn()

    return call


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Kafka's ``ProduceRequest.hasTransactionalRecords``: the first batch of a
    partition's records says whether they belong to a transaction."""
    for t in request.topic_data:
        for p in t.partition_data:
            records: memoryview | None = p.records  # type: ignore[assignment]
            if (
                records is not None
                and len(records) >= HEADER_SIZE
                and records[MAGIC_OFFSET] == 2
                # The attributes' low byte (INT16, big-endian): no header parsed per request.
                and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK
            ):
                return True
    return False


async def _send(
    gw: GatewayApi,
    node_id: int,
    call: NodeCall,
    run: list[QueuedProduce],
    first: QueuedProduce,
    lane: int,
    sent: Callable[[], None],
) -> None:
    entries = call.partitions
    head = _request_head(first, lane)
    rpc = (
        head + entries[0].wire if len(entries) == 1 else head + b"".join([p.wire for p in entries])
    )
    answers: list[storage_pb2.ProducePartitionResult]
    try:
        response = await gw.storage.produce(
            node_id,
            rpc,
            call.records,
            timeout=max(1.0, first.timeout_ms / 1000.0) + 5.0,
            on_sent=sent,
        )
    except (grpc.aio.AioRpcError, DataLinkError, TimeoutError) as exc:
        log.debug("produce to storage node %s failed: %s", node_id, exc)
        answers = _failed(call, failure_code(exc))
    except Exception as exc:  # StorageUnavailable and friends: let the client refresh metadata
        answers = _failed(call, ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc))
    else:
        answers = _partition_answers(node_id, call, response)
    finally:
        sent()  # failed or answered (gRPC): nothing left that could be overtaken
    split_answers(run, node_id, call, answers)


def _partition_answers(
    node_id: int, call: NodeCall, response: storage_pb2.ProduceResponse
) -> list[storage_pb2.ProducePartitionResult]:
    """The leader's answer per partition of the call, in the call's order; every
    partition failed when the node answered a different number of them."""
    answers = list(response.partitions)
    if len(answers) != len(call.partitions):
        log.warning(
            "storage node %s answered %d of %d partition entries",
            node_id,
            len(answers),
            len(call.partitions),
        )
        return _failed(call, ErrorCode.UNKNOWN_SERVER_ERROR, "incomplete answer")
    return answers


def _failed(
    call: NodeCall, code: int, message: str = ""
) -> list[storage_pb2.ProducePartitionResult]:
    return [
        storage_pb2.ProducePartitionResult(
            topic=p.topic, partition=p.partition, error_code=code, error_message=message
        )
        for p in call.partitions
    ]


def _apply_answers(queued: QueuedProduce, results: dict[str, dict[int, PartResp]]) -> None:
    """Each partition entry sent gets its leader's answer; one without (its run's
    sender was cancelled mid-way) gets REQUEST_TIMED_OUT: its fate is unknown."""
    for node, entries in queued.sends.items():
        answers = queued.answers.get(node, ())
        for i, (p, _) in enumerate(entries):
            if i >= len(answers):
                results[p.topic][p.partition] = partition_response(
                    p.partition, ErrorCode.REQUEST_TIMED_OUT
                )
                continue
            pr = answers[i]
            code = leader_answer_code(pr.error_code)
            errors = pr.record_errors
            results[p.topic][p.partition] = partition_response(
                p.partition,
                code,
                pr.base_offset if not code else -1,
                pr.log_append_time,
                pr.log_start_offset,
                [
                    RecordError(
                        batch_index=e.batch_index, batch_index_error_message=e.message or None
                    )
                    for e in errors
                ]
                if errors
                else [],
                pr.error_message or None,
            )


# -- without a task (issue 18) ----------------------------------------------------------------


def start(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: ProduceRequest,
    encode: Callable[[ProduceResponse], Result],
) -> asyncio.Future[Result] | None:
    """:func:`handle` without a task, the response handed to ``encode``: the request
    is checked now, takes its place on the lane at the next loop turn, its run is written to the leader's open data link
    from the lane's callback, and it is answered from the data link answer's callback
    (as the storage node answers a Produce, ``ReplicationWait``; docs/data-link.md).
    The same checks, run, storage call and answers as :func:`handle`. None, for
    :func:`handle` in a task, when a step may await or authorization applies: a
    transactional id (KIP-890's verification), an authorizer, acks=0 (no response), a
    legacy version (up-converted off the loop). A run to several leaders, or to one
    without an open data link, is sent by :func:`_send_run` in a task.

    A client gone meanwhile does not take its request off the lane (a task's
    cancellation did): it is sent and its answer dropped, as Kafka answers a request
    it has read into a closed channel."""
    version = header.api_version
    loop = ctx.loop
    if (
        version < 3
        or request.transactional_id is not None
        or request.acks == 0
        or gw.authorizer.enabled
        or loop is None
    ):
        return None
    queued = QueuedProduce(request.acks, request.timeout_ms, version, None)
    queued.handed_off = request_handed_off()
    out: asyncio.Future[Result] = loop.create_future()
    prepare = _prepare(gw, version, request, queued, ctx.broker_id)
    try:
        prepare.send(None)  # v3+ carries v2 batches: nothing to up-convert, no await
    except StopIteration as stop:
        results: dict[str, dict[int, PartResp]] = stop.value
    except Exception as exc:  # as the task would have raised it: the connection closes
        out.set_exception(exc)
        return out
    else:
        # It awaited after all (not for this path; none of v3+ does today): the task
        # prepares it again (its topic's byte and entry counters count it twice).
        prepare.close()
        return None
    started = _Started(gw, ctx.connection_id, ctx.produce_lane, queued, results, encode, out)
    if not queued.sends:  # nothing to append: nothing to keep in order
        started.finish()
        return out
    # Its place on the lane at the next loop turn: a request of the connection that went
    # to a task before it (acks=0, a transactional id) enters at its task's first step,
    # also a callback already scheduled, so the lane is entered in arrival order.
    loop.call_soon(started.enter)
    return out


class _Started:
    """A Produce request :func:`start` handles: its steps as loop callbacks."""

    __slots__ = ("encode", "gw", "lane", "lane_id", "out", "queued", "results")

    def __init__(
        self,
        gw: GatewayApi,
        lane_id: int,
        lane: ProduceLane,
        queued: QueuedProduce,
        results: dict[str, dict[int, PartResp]],
        encode: Callable[[ProduceResponse], Result],
        out: asyncio.Future[Result],
    ) -> None:
        self.gw = gw
        self.lane_id = lane_id
        self.lane = lane
        self.queued = queued
        self.results = results
        self.encode = encode
        self.out = out

    def enter(self) -> None:
        lane, queued = self.lane, self.queued
        lane.enter(queued)
        lane.ready(queued)
        assert queued.turn is not None
        queued.turn.add_done_callback(self.turn_came)

    def turn_came(self, turn: asyncio.Future[list[QueuedProduce] | None]) -> None:
        """Its turn on the lane: send its run, or wait for the run that carries it."""
        run = turn.result()
        if run is None:  # an earlier request's run carries it
            answered = self.queued.answered
            assert answered is not None
            answered.add_done_callback(self.answered)
            return
        if len(run) > 1:
            PRODUCE_COALESCED.inc(len(run) - 1)
        calls = merge_run(run)
        if len(calls) == 1:
            [(node, call)] = calls.items()
            first = run[0]
            entries = call.partitions
            head = _request_head(first, self.lane_id)
            rpc = (
                head + entries[0].wire
                if len(entries) == 1
                else head + b"".join([p.wire for p in entries])
            )
            try:
                sent = self.gw.storage.produce_started(
                    node, rpc, call.records, max(1.0, first.timeout_ms / 1000.0) + 5.0
                )
            except DataLinkError as exc:  # its connection closed just now
                self.lane.passed(run)
                self._leader_answered(run, node, call, _failed(call, failure_code(exc)))
                return
            except Exception as exc:  # as _send answers it: the client refreshes metadata
                self.lane.passed(run)
                answers = _failed(call, ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc))
                self._leader_answered(run, node, call, answers)
                return
            if sent is not None:
                # Written: the node appends a lane's requests in arrival order, so the
                # next run may go (_send's on_sent).
                self.lane.passed(run)
                sent.add_done_callback(functools.partial(self.leader_answer, run, node, call))
                return
        # Several leaders, or no open data link: the task path's sender.
        assert self.queued.answered is not None
        self.queued.answered.add_done_callback(self.answered)
        self.out.get_loop().create_task(_send_run(self.gw, self.lane_id, self.lane, run))

    def leader_answer(
        self,
        run: list[QueuedProduce],
        node: int,
        call: NodeCall,
        sent: asyncio.Future[Frame],
    ) -> None:
        """The leader's answer to the run's call (as :func:`_send` takes it)."""
        answers: list[storage_pb2.ProducePartitionResult]
        if sent.cancelled():
            answers = _failed(call, ErrorCode.REQUEST_TIMED_OUT)
        else:
            try:
                frame = answer_of(sent.result())
                response = storage_pb2.ProduceResponse.FromString(meta_bytes(frame))
            except (DataLinkError, TimeoutError) as exc:
                log.debug("produce to storage node %s failed: %s", node, exc)
                answers = _failed(call, failure_code(exc))
            except Exception as exc:
                answers = _failed(call, ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc))
            else:
                answers = _partition_answers(node, call, response)
        self._leader_answered(run, node, call, answers)

    def _leader_answered(
        self,
        run: list[QueuedProduce],
        node: int,
        call: NodeCall,
        answers: list[storage_pb2.ProducePartitionResult],
    ) -> None:
        split_answers(run, node, call, answers)
        _answered(run)  # wakes the requests it carried
        self.finish()

    def answered(self, _answered: asyncio.Future[None]) -> None:
        self.finish()

    def finish(self) -> None:
        """Its answers in: its response (as :func:`handle` ends)."""
        queued = self.queued
        queued.turn = queued.answered = None  # (the run holds it: no cycle left behind)
        results = self.results
        out = self.out
        if out.done():
            return  # its client is gone
        try:
            if queued.sends:
                _apply_answers(queued, results)
            response = produce_response(
                [topic_response(topic, list(parts.values())) for topic, parts in results.items()]
            )
            result = self.encode(response)
        except Exception as exc:  # as the task would have raised it: the connection closes
            out.set_exception(exc)
        else:
            out.set_result(result)
