"""Executor side: read one offset range of one partition straight from its leader with
Fetch requests, keeping the record batches as bytes for :mod:`record_columns`.

librdkafka hands Python one ``Message`` object per record; this reader asks the
leader (found through a librdkafka metadata client, so bootstrap settings apply)
for large slices of the log over its own connection (Fetch v5, Odradek's codec),
keeps the next request in flight while it decodes the current answer, and builds
Arrow batches column-wise.

It serves ``security.protocol=PLAINTEXT`` and ``read_uncommitted``; the range
reader uses librdkafka for everything else (TLS, SASL, read_committed's aborted
transactions, legacy message formats). Errors: leadership moves and lost
connections are retried against fresh metadata until ``kafkaConsumer.pollTimeoutMs``
passes; offsets out of range are data loss (``DataLossError``), decided with the
log start offset and high watermark of the same answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from odradek.pipeline.record_columns import decode_records, next_offset
from odradek.pipeline.wire_connection import WireConnection, partition_leaders
from odradek.protocol.fetch_request import consumer_fetch
from odradek.protocol.messages import FetchRequest

FETCH = 1
FETCH_VERSION = 5
MAX_WAIT_MS = 200
PARTITION_MAX_BYTES = 16 * 1024 * 1024
NONE = 0
OFFSET_OUT_OF_RANGE = 1
RETRIABLE = {3, 5, 6, 7, 9, 13, 74, 75}  # unknown partition, leader moves, epochs, ...


class DataLoss(RuntimeError):
    """Offsets of the range are gone; carries what the caller needs for its message."""

    def __init__(self, detail: str, resume_at: int) -> None:
        super().__init__(detail)
        self.detail = detail
        self.resume_at = resume_at


def leader_address(conf: Mapping[str, Any], topic: str, partition: int) -> tuple[str, int]:
    found = partition_leaders(conf, topic)
    if found is None or partition not in found[0]:
        raise ConnectionError(f"no leader for {topic}-{partition}")
    return found[0][partition]


def _request(topic: str, partition: int, offset: int, max_bytes: int) -> FetchRequest:
    return consumer_fetch(
        {(topic, partition): offset},
        max_wait_ms=MAX_WAIT_MS,
        min_bytes=1,
        max_bytes=max_bytes,
        partition_max_bytes=max_bytes,
    )


def read_range(
    conf: Mapping[str, Any],
    topic: str,
    partition: int,
    start: int,
    end: int,
    schema: pa.Schema,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    max_bytes: int = PARTITION_MAX_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of ``start <= offset < end``; raises ``DataLoss`` (strict) or skips
    missing offsets (lenient)."""
    pos = start
    timeout_s = poll_timeout_ms / 1000.0
    deadline = time.monotonic() + timeout_s
    conn: WireConnection | None = None
    in_flight: tuple[int, int] | None = None  # (correlation id, fetch offset)
    try:
        while pos < end:
            try:
                if conn is None:
                    conn = WireConnection(*leader_address(conf, topic, partition), timeout_s)
                    in_flight = None
                if in_flight is None:
                    in_flight = (
                        conn.send(FETCH, FETCH_VERSION, _request(topic, partition, pos, max_bytes)),
                        pos,
                    )
                cid, asked = in_flight
                resp = conn.receive(FETCH, FETCH_VERSION, cid)
            except (OSError, ConnectionError) as exc:
                if conn is not None:
                    conn.close()
                conn, in_flight = None, None
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"Cannot fetch offset {pos} of {topic}-{partition} within "
                        f"{poll_timeout_ms} ms: {exc}"
                    ) from exc
                time.sleep(0.2)
                continue
            (part,) = resp.responses[0].partitions
            err = part.error_code
            if err in RETRIABLE:
                conn.close()
                conn, in_flight = None, None
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"Cannot fetch offset {pos} of {topic}-{partition} within "
                        f"{poll_timeout_ms} ms (error code {err})"
                    )
                time.sleep(0.2)
                continue
            if err == OFFSET_OUT_OF_RANGE:
                pos = _out_of_range(topic, partition, pos, end, part, fail_on_data_loss)
                in_flight = None
                continue
            if err != NONE:
                raise RuntimeError(f"Fetch {topic}-{partition} at {pos}: error code {err}")
            records = part.records
            view = memoryview(records) if records is not None else memoryview(b"")
            in_flight = None
            ahead = next_offset(view, asked)
            if pos < ahead < end:  # ask for the next slice while this one is decoded
                in_flight = (
                    conn.send(FETCH, FETCH_VERSION, _request(topic, partition, ahead, max_bytes)),
                    ahead,
                )
            chunk = decode_records(
                view,
                asked,
                start=pos,
                end=end,
                topic=topic,
                partition=partition,
                schema=schema,
                include_headers=include_headers,
            )
            if chunk.next_offset > pos:
                pos = chunk.next_offset
                deadline = time.monotonic() + timeout_s
            elif part.high_watermark < end and pos >= part.high_watermark:
                if fail_on_data_loss:
                    raise DataLoss(
                        f"Offsets [{part.high_watermark}, {end}) were planned but the log "
                        f"now ends at {part.high_watermark}",
                        end,
                    )
                return
            elif pos >= part.high_watermark or time.monotonic() > deadline:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"Cannot fetch record for offset {pos} in {poll_timeout_ms} "
                        f"milliseconds (TopicPartition: {topic}-{partition})"
                    )
            if chunk.batch is not None and chunk.batch.num_rows:
                yield chunk.batch
    finally:
        if conn is not None:
            conn.close()


def _out_of_range(
    topic: str, partition: int, pos: int, end: int, part: Any, fail_on_data_loss: bool
) -> int:
    lo, hi = int(part.log_start_offset), int(part.high_watermark)
    if pos < lo:
        if fail_on_data_loss:
            raise DataLoss(
                f"Cannot fetch offset {pos}: the earliest offset is now {lo}, so offsets "
                f"[{pos}, {min(lo, end)}) are gone",
                lo,
            )
        return lo
    if fail_on_data_loss:
        raise DataLoss(f"Cannot fetch offset {pos}: the log now ends at {hi}", end)
    return end
