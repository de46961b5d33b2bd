"""Executor side of the at-least-once sink: produce Arrow batches as whole Kafka record
batches, from the Arrow buffers, over the task's own connections.

librdkafka takes one message per ``produce`` call, a Python call per row; here the
rows of a Spark Arrow batch are assigned partitions column-wise (explicit
``partition`` column, else the Java client's murmur2 of the key, else one partition
per Arrow batch as the Java sticky partitioner does), grouped, and encoded into v2
batches by :mod:`batch_encoder`. The producer is idempotent, as the librdkafka one
is: one producer id per task (InitProducerId), a sequence per partition, one batch
in flight per partition, so a resent batch is deduplicated by the broker and order is
kept. ``acks=all``. Sending is pipelined: each call sends what it can and reads the
answers that have arrived, so encoding the next Spark batch overlaps the round trips
of the previous ones (up to ``MAX_QUEUED_BATCHES`` batches queued). Leadership changes and lost connections are retried with the
same batches until ``delivery.timeout.ms`` (120 s); any other error fails the task
with its name.

It serves plaintext clusters with the sink's default producer settings and no
``headers`` column; ``record_producer`` (librdkafka) serves everything else.
"""

from __future__ import annotations

import select
import time
from collections import defaultdict, deque
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from odradek.pipeline.batch_encoder import encode_batch
from odradek.pipeline.wire_connection import WireConnection, any_broker, partition_leaders
from odradek.protocol.messages import InitProducerIdRequest, ProduceRequest

PRODUCE = 0
PRODUCE_VERSION = 7
INIT_PRODUCER_ID = 22
INIT_PRODUCER_ID_VERSION = 2
BATCH_BYTES = 900_000  # under the broker's default max.message.bytes (1 MiB)
MAX_RECORD_BYTES = 1_000_000  # librdkafka's message.max.bytes default, as the fallback has
DELIVERY_TIMEOUT_S = 120.0
MAX_QUEUED_BATCHES = 16  # encoded batches waiting or in flight, ~14 MB
DUPLICATE_SEQUENCE_NUMBER = 46
RETRIABLE = {3, 5, 6, 7, 13, 19, 20, 74, 75}
ERROR_NAMES = {
    10: "MESSAGE_TOO_LARGE: the batch is larger than the broker's message.max.bytes (too large)",
    18: "RECORD_LIST_TOO_LARGE",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    87: "INVALID_RECORD",
    29: "TOPIC_AUTHORIZATION_FAILED",
}


def murmur2_partitions(keys: pa.Array, partitions: int) -> np.ndarray:
    """The Java client's default partition of each non-null key:
    ``toPositive(Utils.murmur2(key)) % partitions``, for all keys at once."""
    col = keys.cast(pa.binary()) if not pa.types.is_binary(keys.type) else keys
    col = col.fill_null(b"")
    n = len(col)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int32, count=n + 1 + col.offset)[
        col.offset :
    ].astype(np.int64)
    data_buf = col.buffers()[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(1, np.uint8)
    )
    data = np.concatenate([data, np.zeros(4, dtype=np.uint8)])
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    m = np.uint32(0x5BD1E995)
    h = np.uint32(0x9747B28C) ^ lengths.astype(np.uint32)
    blocks = lengths // 4
    with np.errstate(over="ignore"):
        for j in range(int(blocks.max()) if n else 0):
            live = blocks > j
            at = np.minimum(starts + 4 * j, len(data) - 4)  # rows past their key: ignored
            k = (
                data[at].astype(np.uint32)
                | (data[at + 1].astype(np.uint32) << np.uint32(8))
                | (data[at + 2].astype(np.uint32) << np.uint32(16))
                | (data[at + 3].astype(np.uint32) << np.uint32(24))
            )
            k = k * m
            k ^= k >> np.uint32(24)
            k = k * m
            h = np.where(live, (h * m) ^ k, h)
        tail = lengths % 4
        base = np.minimum(starts + 4 * blocks, len(data) - 4)
        t = np.zeros(n, dtype=np.uint32)
        t ^= np.where(tail >= 3, data[base + 2].astype(np.uint32) << np.uint32(16), 0).astype(
            np.uint32
        )
        t ^= np.where(tail >= 2, data[base + 1].astype(np.uint32) << np.uint32(8), 0).astype(
            np.uint32
        )
        t ^= np.where(tail >= 1, data[base].astype(np.uint32), 0).astype(np.uint32)
        h = np.where(tail > 0, (h ^ t) * m, h)
        h ^= h >> np.uint32(13)
        h = h * m
        h ^= h >> np.uint32(15)
    return ((h & np.uint32(0x7FFFFFFF)) % np.uint32(partitions)).astype(np.int64)


class ArrowProducer:
    """One task's idempotent producer; ``send`` queues, ``flush`` waits for acks."""

    def __init__(self, conf: Mapping[str, Any], timeout_s: float = 30.0) -> None:
        self._conf = conf
        self._timeout = timeout_s
        self._conns: dict[tuple[str, int], WireConnection] = {}
        self._leaders: dict[str, tuple[dict[int, tuple[str, int]], int]] = {}
        self._seq: dict[tuple[str, int], int] = defaultdict(int)
        self._queue: dict[tuple[str, int], deque[bytearray]] = defaultdict(deque)
        self._sticky = 0
        self._in_flight: set[tuple[str, int]] = set()
        # delivery.timeout.ms: retries stop this long after the last acknowledgement.
        self._deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        self._pending: dict[tuple[str, int], deque[tuple[int, list[tuple[str, int]]]]] = (
            defaultdict(deque)
        )
        conn = self._conn(any_broker(conf))
        resp = conn.request(
            INIT_PRODUCER_ID,
            INIT_PRODUCER_ID_VERSION,
            InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
            ),
        )
        if resp.error_code:
            raise RuntimeError(f"InitProducerId failed: error code {resp.error_code}")
        self._pid, self._epoch = int(resp.producer_id), int(resp.producer_epoch)

    def knows(self, topic: str) -> bool:
        """Whether ``topic`` exists (else the caller lets librdkafka create it)."""
        if topic not in self._leaders:
            found = partition_leaders(self._conf, topic)
            if found is None:
                return False
            self._leaders[topic] = found
        return True

    def _conn(self, address: tuple[str, int]) -> WireConnection:
        conn = self._conns.get(address)
        if conn is None:
            conn = WireConnection(address[0], address[1], self._timeout)
            self._conns[address] = conn
        return conn

    def send(
        self, topic: str, keys: pa.Array | None, values: pa.Array, partitions: pa.Array | None
    ) -> None:
        """Queue the rows of one topic as batches per partition (the topic must exist)."""
        _, count = self._leaders[topic]
        n = len(values)
        part = np.full(n, -1, dtype=np.int64)
        if partitions is not None:
            given = partitions.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            bad = given[(given >= count) | (given < -1)]
            if len(bad):
                raise ValueError(
                    f"Unknown partition: {topic}-{int(bad[0])} ({topic} has {count} partitions)"
                )
            part = given
        if keys is not None and keys.null_count < n:
            keyed = (part < 0) & ~pc.is_null(keys).to_numpy(zero_copy_only=False)
            if keyed.any():
                part = np.where(keyed, murmur2_partitions(keys, count), part)
        if (part < 0).any():
            part = np.where(part < 0, self._sticky % count, part)
            self._sticky += 1
        if not self._queued():  # idle until now: the delivery timeout starts here
            self._deadline = time.monotonic() + DELIVERY_TIMEOUT_S
        order = np.argsort(part, kind="stable")
        sorted_parts = part[order]
        sizes = (
            pc.binary_length(values.cast(pa.binary()))
            .fill_null(0)
            .to_numpy(zero_copy_only=False)
            .astype(np.int64)
        )
        if keys is not None:
            sizes = sizes + pc.binary_length(keys.cast(pa.binary())).fill_null(0).to_numpy(
                zero_copy_only=False
            ).astype(np.int64)
        sizes = sizes + 24  # record framing
        if n and int(sizes.max()) > MAX_RECORD_BYTES:
            raise ValueError(
                f"MSG_SIZE_TOO_LARGE: a record of {int(sizes.max())} bytes is too large for "
                f"message.max.bytes ({MAX_RECORD_BYTES}); set kafka.max.request.size"
            )
        bounds = np.nonzero(np.diff(sorted_parts))[0] + 1
        now = int(time.time() * 1000)
        for group in np.split(order, bounds):
            p = int(part[group[0]])
            cum = np.cumsum(sizes[group])
            cuts = np.searchsorted(cum, np.arange(BATCH_BYTES, int(cum[-1]) + 1, BATCH_BYTES))
            for rows in np.split(group, np.unique(cuts[(cuts > 0) & (cuts < len(group))])):
                idx = pa.array(rows)
                tp = (topic, p)
                self._queue[tp].append(
                    encode_batch(
                        keys.take(idx) if keys is not None else None,
                        values.take(idx),
                        timestamp_ms=now,
                        producer_id=self._pid,
                        producer_epoch=self._epoch,
                        base_sequence=self._seq[tp],
                    )
                )
                self._seq[tp] += len(rows)
        self._pump(block=False)
        while self._queued() > MAX_QUEUED_BATCHES:  # bound memory: wait for acks
            self._pump(block=True)

    def flush(self) -> None:
        while self._queued():
            self._pump(block=True)

    def _queued(self) -> int:
        return sum(len(q) for q in self._queue.values())

    def _pump(self, block: bool) -> None:
        """Send the head batch of every partition without one in flight (one Produce
        per leader), then read the answers that have arrived (``block``: at least
        one). Encoding the next Spark batch overlaps the round trips; one batch in
        flight per partition keeps the idempotent sequence in order."""
        deadline = self._deadline
        by_leader: dict[tuple[str, int], list[tuple[tuple[str, int], bytearray]]] = defaultdict(
            list
        )
        for tp, q in self._queue.items():
            if q and tp not in self._in_flight:
                leader = self._leaders[tp[0]][0].get(tp[1])
                if leader is None:
                    self._refresh(tp[0], deadline)
                    continue
                by_leader[leader].append((tp, q[0]))
        for leader, items in by_leader.items():
            topics: dict[str, list[Any]] = defaultdict(list)
            for (topic, p), batch in items:
                # The encoder writes any bytes-like object (the stubs say bytes): no
                # copy of the encoded batch.
                records = cast(bytes, batch)
                topics[topic].append(
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=records)
                )
            request = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=int(self._timeout * 1000),
                topic_data=[
                    ProduceRequest.TopicProduceData(name=t, partition_data=parts)
                    for t, parts in topics.items()
                ],
            )
            tps = [tp for tp, _ in items]
            try:
                cid = self._conn(leader).send(PRODUCE, PRODUCE_VERSION, request)
            except OSError:
                self._drop(leader, deadline)
                continue
            self._pending[leader].append((cid, tps))
            for tp in tps:
                self._in_flight.add(tp)
        waiting = [leader for leader, q in self._pending.items() if q]
        if not waiting:
            return
        socks = {self._conns[leader].sock: leader for leader in waiting}
        ready, _, _ = select.select(list(socks), [], [], self._timeout if block else 0)
        for sock in ready:
            self._answer(socks[sock], deadline)
        if block and not ready:  # request.timeout.ms passed without an answer
            for leader in waiting:
                self._drop(leader, deadline)

    def _answer(self, leader: tuple[str, int], deadline: float) -> None:
        """Read the oldest answer from ``leader`` (answers come in request order)."""
        cid, tps = self._pending[leader].popleft()
        try:
            resp = self._conns[leader].receive(PRODUCE, PRODUCE_VERSION, cid)
        except (OSError, ConnectionError):
            self._pending[leader].appendleft((cid, tps))
            self._drop(leader, deadline)
            return
        for tp in tps:
            self._in_flight.discard(tp)
        for topic_resp in resp.responses:
            for pr in topic_resp.partition_responses:
                tp = (topic_resp.name, pr.index)
                err = pr.error_code
                if err in (0, DUPLICATE_SEQUENCE_NUMBER):
                    self._queue[tp].popleft()
                    self._deadline = time.monotonic() + DELIVERY_TIMEOUT_S  # progress
                elif err in RETRIABLE:
                    self._refresh(tp[0], deadline)
                else:
                    name = ERROR_NAMES.get(err, f"error code {err}")
                    raise RuntimeError(f"delivery to {tp[0]}-{tp[1]} failed: {name}")

    def _drop(self, leader: tuple[str, int], deadline: float) -> None:
        """A lost connection: its unanswered batches go again (same sequence numbers, so
        the broker drops any it already has) after fresh metadata."""
        conn = self._conns.pop(leader, None)
        if conn is not None:
            conn.close()
        tps = [tp for _, sent in self._pending.pop(leader, deque()) for tp in sent]
        for tp in tps:
            self._in_flight.discard(tp)
        for topic in {t for t, _ in tps} or set(self._leaders):
            self._refresh(topic, deadline)

    def _refresh(self, topic: str, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"records for {topic} not delivered within {DELIVERY_TIMEOUT_S:.0f} s"
            )
        time.sleep(0.2)
        found = partition_leaders(self._conf, topic)
        if found is not None:
            self._leaders[topic] = found

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
