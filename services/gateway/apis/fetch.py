"""Fetch (key 1), versions 0-16.

Partitions are grouped by the storage node leading them and fetched in parallel;
each storage node long-polls on its own (``max_wait_ms``/``min_bytes``). As soon as
the answers in hand reach ``min_bytes`` (or carry an error), the still-waiting nodes
are cancelled and asked again without waiting, so one idle node never holds up data
from another. Whole batches travel as raw bytes (docs/compatibility.md C8); every
partition entry carries high watermark, last stable offset and log start offset,
error entries included (docs/compatibility.md C9).

Isolation (v4+): READ_COMMITTED fetches pass ``isolation_level`` to the storage
leader, which returns data only below the last stable offset and the aborted
transactions (producer id, first offset) overlapping the returned range, from its
``.txnindex``; the client drops those transactions' records and every control
batch. READ_UNCOMMITTED answers carry a null aborted-transactions list, as Kafka's.

``max_bytes`` (v3+) bounds the response: the first partition with data is returned
whole even when larger, later partitions are left empty once the budget is spent.

Versions 0-3 can only read magic 0/1 message sets: batches are down-converted
(magic 0 for v0-v1, magic 1 for v2-v3), as Kafka does for old consumers; zstd cannot
be down-converted (UNSUPPORTED_COMPRESSION_TYPE). v13+ name topics by id. Large
down-conversions run off the event loop, bounded (odradek.gateway.offload).
Client quotas (odradek.gateway.throttling): ``max_bytes`` is capped by what
``consumer_byte_rate`` allows in one quota window; a throttled fetch is answered
empty with its throttle time, as Kafka answers it.
Deviations: fetch sessions (KIP-227) are not kept: every response carries session id
0, which makes clients fetch sessionless (docs/compatibility.md C11); a connection's
Fetch that repeats its last one with other offsets is not decoded or planned again
(:func:`start_repeated`, odradek.protocol.fetch_repeat), which spares the gateway what a
session would. No rack-aware
``preferred_read_replica`` (always -1).

A storage node that cannot be asked, or does not answer in time, gives its
partitions NOT_LEADER_OR_FOLLOWER (:func:`odradek.gateway.leader_calls.failure_code`;
never REQUEST_TIMED_OUT, which the Java consumer does not accept in a Fetch).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Counter

from odradek.datalink.client import answer_of, fetch_answer
from odradek.datalink.frame import Buffer, Frame
from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.client_quotas import Who
from odradek.gateway.connection import ConnectionContext, Result
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.leader_calls import failure_code, leader_answer_code
from odradek.gateway.offload import LEGACY_CONVERSION_MAX_BYTES, run_heavy
from odradek.metric_tallies import CounterTally
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_repeat import RepeatedFetch, offset_positions
from odradek.protocol.fetch_response import (
    Aborted,
    PartAnswer,
    PartResp,
    TopicAnswers,
    TopicResp,
    fetch_response,
    partition_data,
    topic_response,
)
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import FetchRequest, FetchResponse
from odradek.records.batch import RecordsError
from odradek.records.convert import downconvert
from odradek.rpc.v1 import storage_pb2

log = logging.getLogger(__name__)

API_KEY = ApiKey.FETCH

BYTES_OUT = Counter(
    "odradek_gateway_bytes_out_total", "Record bytes fetched by consumers, by topic.", ["topic"]
)

ZERO_UUID = uuid.UUID(int=0)
# How a response names a topic: by id from v13, by name before.
TopicKey = uuid.UUID | str


# A storage node's answer for one partition: its result and, beside it, its records.
Answer = tuple[storage_pb2.FetchPartitionResult, Buffer]


_BYTES_OUT_BY_TOPIC: dict[str, CounterTally] = {}


def _bytes_out(topic: str) -> CounterTally:
    """The topic's byte counter, looked up once (``labels()`` and the counter's lock
    per partition answer cost the loop; odradek.metric_tallies)."""
    found = _BYTES_OUT_BY_TOPIC.get(topic)
    if found is None:
        found = _BYTES_OUT_BY_TOPIC[topic] = CounterTally(BYTES_OUT.labels(topic))
    return found


def _empty(error: int) -> Answer:
    return storage_pb2.FetchPartitionResult(
        error_code=error, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1
    ), b""


class _ResponseBudget:
    """The response's ``max_bytes`` (Kafka's fetch.max.bytes) over its partitions in
    order: the first partition with records gets them whole, so a consumer progresses
    past a batch larger than the limit (KIP-74); a later one only what still fits."""

    __slots__ = ("first", "left")

    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes
        self.first = True

    def take(self, records: Buffer) -> Buffer:
        if records:
            if self.first:
                self.first = False
            elif len(records) > self.left:
                return b""
            self.left -= len(records)
        return records


@dataclass(slots=True)
class _Plan:
    """A Fetch request checked: what each partition answers, or which node to ask."""

    version: int
    # (key in the response, topic name or None, partition index) in request order
    order: list[tuple[TopicKey, str | None, int]]
    results: dict[tuple[str | None, int], Answer]
    by_node: dict[int, list[storage_pb2.FetchPartition]]
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: int


@dataclass(slots=True)
class Repeat:
    """What a connection's last Fetch was made into, for the same request with other
    offsets (:func:`start_repeated`): its plan and the storage request, which is sent
    again with the new offsets set in it (as a follower's fetcher reuses its request).
    Valid while the metadata snapshot it was planned on is current."""

    shape: RepeatedFetch
    snapshot: object
    plan: _Plan
    node: int
    parts: list[storage_pb2.FetchPartition]
    request: storage_pb2.FetchRequest
    # Live views of ``request.partitions``, in request order: where the offsets go.
    request_parts: list[storage_pb2.FetchPartition]


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: FetchRequest
) -> FetchResponse:
    return await _answer(gw, _plan(gw, ctx, header, request))


async def _answer(gw: GatewayApi, plan: _Plan) -> FetchResponse:
    """Ask the leaders (long-polling), then the response."""
    version, order, results = plan.version, plan.order, plan.results
    max_bytes, isolation = plan.max_bytes, plan.isolation
    if plan.by_node:
        await _fan_out(
            gw, plan.by_node, plan.max_wait_ms, plan.min_bytes, max_bytes, isolation, results
        )
    if version <= 3:  # down-conversion of every batch: off the loop when large
        size = sum(len(records) for _, records in results.values())
        return await run_heavy(
            size, lambda: _assemble(version, order, results, max_bytes, isolation)
        )
    return _assemble(version, order, results, max_bytes, isolation)


def start(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: FetchRequest,
    encode: Callable[[FetchResponse | TopicAnswers], Result],
    body: memoryview | None = None,
) -> asyncio.Future[Result]:
    """:func:`handle` without a task where none is needed, the response handed to
    ``encode``: a fetch from one leader over its open data link (a consumer fetching
    from that broker's port, the latency loop's case) is sent now and answered from the
    data link answer's callback, as the storage node parks it (``fetch.ParkedFetch``,
    docs/data-link.md); anything else (several leaders, a down-conversion, no open data
    link) runs :func:`handle`'s steps in a task. The answer is the same either way.
    With the request's ``body``, a fetch sent this way is remembered on the connection
    (``ctx.fetch_repeat``) for :func:`start_repeated`."""
    plan = _plan(gw, ctx, header, request)
    loop = ctx.loop or asyncio.get_running_loop()
    if plan.version > 3 and len(plan.by_node) <= 1:
        out: asyncio.Future[Result] = loop.create_future()
        if not plan.by_node:  # every partition answered here (errors)
            _deliver(out, plan, encode)
            return out
        [(node, parts)] = plan.by_node.items()
        rpc = _rpc(parts, plan.max_wait_ms, plan.min_bytes, plan.max_bytes, plan.isolation)
        try:
            call = gw.storage.fetch_started(node, rpc, _timeout(plan.max_wait_ms))
        except Exception as exc:  # the connection closed under us: as a failed call
            _take_failure(node, parts, exc, plan.results)
            _deliver(out, plan, encode)
            return out
        if call is not None:
            if body is not None and not plan.results and not gw.authorizer.enabled:
                ctx.fetch_repeat = _repeat(gw, plan, body, node, parts, rpc)
            call.add_done_callback(functools.partial(_called, out, plan, node, parts, encode))
            return out
    return loop.create_task(_encoded(gw, plan, encode))


def _repeat(
    gw: GatewayApi,
    plan: _Plan,
    body: memoryview,
    node: int,
    parts: list[storage_pb2.FetchPartition],
    rpc: storage_pb2.FetchRequest,
) -> Repeat | None:
    """``plan`` remembered for the same request with other offsets, when the body's
    offsets are found where the decoded request has them (every partition sent to
    ``node``, none answered here: no error of its own, no authorizer)."""
    positions = offset_positions(plan.version, body)
    if positions is None or len(positions) != len(parts):
        return None
    shape = RepeatedFetch(plan.version, body, positions)
    if shape.offsets(plan.version, body) != [p.fetch_offset for p in parts]:
        return None
    # The plan without its results table, which the answer fills with record buffers
    # (views of the data link's read buffer: not to be kept alive with the connection).
    kept = _Plan(
        plan.version,
        plan.order,
        {},
        plan.by_node,
        plan.max_wait_ms,
        plan.min_bytes,
        plan.max_bytes,
        plan.isolation,
    )
    return Repeat(shape, gw.metadata.current, kept, node, parts, rpc, list(rpc.partitions))


def start_repeated(
    gw: GatewayApi,
    ctx: ConnectionContext,
    repeat: Repeat,
    offsets: list[int],
    encode: Callable[[FetchResponse | TopicAnswers], Result],
) -> asyncio.Future[Result] | None:
    """:func:`start` for a request that is the connection's last sent Fetch with other
    offsets (``repeat.shape``): no decode, no plan, no storage request built (its
    offsets are set in the one sent last time), so a consumer's long poll per record
    costs less (issue 18; Kafka's fetch sessions, KIP-227, spare the broker the same
    work for a client that uses them). The same storage call and answer as
    :func:`start`; None (nothing done: decode and :func:`start` then) when the
    metadata changed since, or the node has no open data link."""
    if repeat.snapshot is not gw.metadata.current:
        ctx.fetch_repeat = None
        return None
    for part, offset in zip(repeat.request_parts, offsets, strict=True):
        part.fetch_offset = offset
    first = repeat.plan
    node, parts = repeat.node, repeat.parts
    plan = _Plan(
        first.version,
        first.order,
        {},
        first.by_node,
        first.max_wait_ms,
        first.min_bytes,
        first.max_bytes,
        first.isolation,
    )
    out: asyncio.Future[Result] = (ctx.loop or asyncio.get_running_loop()).create_future()
    try:
        call = gw.storage.fetch_started(node, repeat.request, _timeout(plan.max_wait_ms))
    except Exception as exc:  # the connection closed under us: as a failed call
        _take_failure(node, parts, exc, plan.results)
        _deliver(out, plan, encode)
        return out
    if call is None:
        return None
    call.add_done_callback(functools.partial(_called, out, plan, node, parts, encode))
    return out


async def _encoded(
    gw: GatewayApi, plan: _Plan, encode: Callable[[FetchResponse | TopicAnswers], Result]
) -> Result:
    return encode(await _answer(gw, plan))


def _called(
    out: asyncio.Future[Result],
    plan: _Plan,
    node: int,
    parts: list[storage_pb2.FetchPartition],
    encode: Callable[[FetchResponse | TopicAnswers], Result],
    call: asyncio.Future[Frame],
) -> None:
    """The leader's answer to a fetch :func:`start` sent: the response, as
    :func:`_fan_out` takes one answer."""
    if out.done():
        return  # the client's connection closed meanwhile
    try:
        if call.cancelled():  # (nothing cancels it: no one awaits it)
            raise TimeoutError()
        answer = fetch_answer(answer_of(call.result()))
    except Exception as exc:  # DataLinkError, TimeoutError: as _fan_out takes them
        _take_failure(node, parts, exc, plan.results)
    else:
        _take_answer(answer, plan.results)
    _deliver(out, plan, encode)


def _deliver(
    out: asyncio.Future[Result],
    plan: _Plan,
    encode: Callable[[FetchResponse | TopicAnswers], Result],
) -> None:
    """The answer to ``encode``: as plain tuples (``encode_fetch_answer``) from version
    4 on (nothing to down-convert), else as a response."""
    try:
        result = encode(
            _answers(plan)
            if plan.version >= 4
            else _assemble(plan.version, plan.order, plan.results, plan.max_bytes, plan.isolation)
        )
    except Exception as exc:  # the connection closes, as for a task that raised
        out.set_exception(exc)
    else:
        out.set_result(result)


def _plan(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: FetchRequest
) -> _Plan:
    version = header.api_version
    snap = gw.metadata.current
    by_id = version >= 13
    # (key in the response, topic name or None, partition index) in request order
    order: list[tuple[TopicKey, str | None, int]] = []
    results: dict[tuple[str | None, int], Answer] = {}
    by_node: dict[int, list[storage_pb2.FetchPartition]] = defaultdict(list)
    for t in request.topics:
        if by_id:
            key: TopicKey = t.topic_id
            topic = snap.topics_by_id.get(t.topic_id.bytes) if t.topic_id is not None else None
            name = topic.name if topic is not None else None
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            key = name = t.topic
            topic = snap.topics.get(name)
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # Each partition's leader by index, cached per snapshot (Snapshot.leaders; -1:
        # no leader or no such partition entry, told apart below).
        leaders = snap.leaders(name) if name is not None else None
        for p in t.partitions:
            index = p.partition
            order.append((key, name, index))
            rkey = (name if name is not None else str(key), index)
            leader = leaders[index] if leaders is not None and 0 <= index < len(leaders) else -1
            if topic is None:
                results[rkey] = _empty(unknown)
            elif not gw.authorizer.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name):
                results[rkey] = _empty(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif leader < 0:
                part = snap.partition(name, index) if name is not None else None
                results[rkey] = _empty(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if part is None
                    else ErrorCode.NOT_LEADER_OR_FOLLOWER
                )
            else:
                by_node[leader].append(
                    storage_pb2.FetchPartition(
                        topic=name,
                        partition=index,
                        fetch_offset=p.fetch_offset,
                        partition_max_bytes=p.partition_max_bytes,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1)
                        if version >= 9
                        else -1,
                        log_start_offset=-1,
                        last_fetched_epoch=-1,
                    )
                )
    max_bytes = request.max_bytes if version >= 3 else 0x7FFFFFFF
    min_bytes = request.min_bytes
    # KafkaApis: never more than consumer_byte_rate allows in one quota window, which
    # would be throttled for certain (client_quotas.py).
    cap = gw.quotas.fetch_max_bytes(Who.of(ctx.principal, header.client_id))
    if cap is not None:
        max_bytes = min(max_bytes, cap)
        min_bytes = min(min_bytes, max_bytes)
    isolation = request.isolation_level if version >= 4 else 0
    return _Plan(
        version, order, results, by_node, request.max_wait_ms, min_bytes, max_bytes, isolation
    )


def _rpc(
    parts: list[storage_pb2.FetchPartition],
    wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation: int,
) -> storage_pb2.FetchRequest:
    return storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=max(0, wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        partitions=parts,
    )


def _timeout(wait_ms: int) -> float:
    """A storage call's deadline: its long poll and then some."""
    return max(0, wait_ms) / 1000.0 + 10.0


async def _call(
    gw: GatewayApi,
    node: int,
    parts: list[storage_pb2.FetchPartition],
    wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation: int,
) -> tuple[storage_pb2.FetchResponse, list[Buffer]]:
    rpc = _rpc(parts, wait_ms, min_bytes, max_bytes, isolation)
    return await gw.storage.fetch(node, rpc, timeout=_timeout(wait_ms))


async def _fan_out(
    gw: GatewayApi,
    by_node: dict[int, list[storage_pb2.FetchPartition]],
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation: int,
    results: dict[tuple[str | None, int], Answer],
) -> None:
    if len(by_node) == 1:
        # One leader (a consumer fetching from one broker's port): its long poll is the
        # whole wait, awaited here without a task or a wait set (issue 18).
        [(node, parts)] = by_node.items()
        try:
            answer = await _call(gw, node, parts, max_wait_ms, min_bytes, max_bytes, isolation)
        except Exception as exc:
            _take_failure(node, parts, exc, results)
        else:
            _take_answer(answer, results)
        return
    tasks: dict[asyncio.Task[tuple[storage_pb2.FetchResponse, list[Buffer]]], int] = {
        asyncio.ensure_future(
            _call(gw, node, parts, max_wait_ms, min_bytes, max_bytes, isolation)
        ): node
        for node, parts in by_node.items()
    }
    pending = set(tasks)
    got = 0
    errored = False

    def take(
        task: asyncio.Task[tuple[storage_pb2.FetchResponse, list[Buffer]]], node: int
    ) -> tuple[int, bool]:
        try:
            answer = task.result()
        except Exception as exc:
            _take_failure(node, by_node[node], exc, results)
            return 0, True
        return _take_answer(answer, results)

    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            size, err = take(task, tasks[task])
            got += size
            errored = errored or err
        if pending and (got >= min_bytes or errored):
            # Enough to answer: stop the long polls and take what the others have now.
            late = [tasks[t] for t in pending]
            for t in pending:
                t.cancel()
            for t in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            quick = {
                asyncio.ensure_future(
                    _call(gw, node, by_node[node], 0, 0, max_bytes, isolation)
                ): node
                for node in late
            }
            await asyncio.wait(set(quick))
            for task, node in quick.items():
                take(task, node)
            return


def _take_failure(
    node: int,
    parts: list[storage_pb2.FetchPartition],
    exc: Exception,
    results: dict[tuple[str | None, int], Answer],
) -> None:
    """A node that did not answer: its partitions get the error a client retries."""
    log.debug("fetch from storage node %s failed: %s", node, exc)
    code = failure_code(exc, timed_out=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    for p in parts:
        results[(p.topic, p.partition)] = _empty(code)


def _take_answer(
    answer: tuple[storage_pb2.FetchResponse, list[Buffer]],
    results: dict[tuple[str | None, int], Answer],
) -> tuple[int, bool]:
    """A node's answer into ``results``: its record bytes, and whether any failed."""
    response, records = answer
    size = 0
    err = False
    for r, data in zip(response.partitions, records, strict=True):
        if r.error_code:  # (a protobuf field set only when there is one to map)
            r.error_code = leader_answer_code(r.error_code)
            err = err or r.error_code != 0
        results[(r.topic, r.partition)] = (r, data)
        size += len(data)
    return size, err


def _answers(plan: _Plan) -> TopicAnswers:
    """:func:`_assemble`'s answer (version 4+: nothing to down-convert) as plain
    tuples for ``encode_fetch_answer``: the same byte budget, metrics, aborted
    transactions and order."""
    committed = plan.isolation == 1
    budget = _ResponseBudget(plan.max_bytes)
    results = plan.results
    topics: TopicAnswers = []
    current_key: object = object()
    current: list[PartAnswer] = []
    for key, name, index in plan.order:
        r, records = results.get((name if name is not None else str(key), index)) or _empty(
            ErrorCode.UNKNOWN_SERVER_ERROR
        )
        records = budget.take(records)
        if records and name is not None:
            _bytes_out(name).inc(len(records))
        if key != current_key:
            current = []
            topics.append((key, current))
            current_key = key
        current.append(
            (
                index,
                r.error_code,
                r.high_watermark,
                r.last_stable_offset,
                r.log_start_offset,
                [(a.producer_id, a.first_offset) for a in r.aborted_transactions]
                if committed
                else None,
                records or b"",
            )
        )
    return topics


def _assemble(
    version: int,
    order: list[tuple[TopicKey, str | None, int]],
    results: dict[tuple[str | None, int], Answer],
    max_bytes: int,
    isolation: int,
) -> FetchResponse:
    budget = _ResponseBudget(max_bytes)
    topics: list[TopicResp] = []
    current_key: object = object()
    current: list[PartResp] = []
    for key, name, index in order:
        r, records = results.get((name if name is not None else str(key), index)) or _empty(
            ErrorCode.UNKNOWN_SERVER_ERROR
        )
        error = r.error_code
        records = budget.take(records)
        if records and version <= 3:
            try:
                records = downconvert(
                    records,
                    0 if version <= 1 else 1,
                    max_output_size=LEGACY_CONVERSION_MAX_BYTES,
                )
            except RecordsError as exc:
                error = int(
                    getattr(
                        ErrorCode,
                        getattr(exc, "kafka_error", "CORRUPT_MESSAGE"),
                        ErrorCode.CORRUPT_MESSAGE,
                    )
                )
                records = b""
        if records and name is not None:
            _bytes_out(name).inc(len(records))
        entry = partition_data(
            index,
            error,
            r.high_watermark,
            r.last_stable_offset,
            r.log_start_offset,
            [
                Aborted(producer_id=a.producer_id, first_offset=a.first_offset)
                for a in r.aborted_transactions
            ]
            if isolation == 1
            else None,
            -1,  # preferred_read_replica
            records or b"",  # the data link's view: both encoders take any buffer
        )
        if key != current_key:
            current = []
            topics.append(
                topic_response(key, None, current)
                if isinstance(key, str)
                else topic_response(None, key, current)
            )
            current_key = key
        current.append(entry)
    return fetch_response(topics)
