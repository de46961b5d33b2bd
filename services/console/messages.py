"""Reading a partition's records for the browser, and producing one record.

Browsing is a bounded scan with Fetch requests to the partition's leader (no consumer
group, nothing committed): oldest first walks forward from the start offset; newest
first walks backwards in windows ending at the start offset (default: the high
watermark). A timestamp is turned into an offset with ListOffsets first. Filters (key
equals, substring of key or value) apply while scanning; every scan stops after
:data:`MAX_SCAN_BYTES` so a filter that matches nothing cannot run away.

Producing builds one v2 batch (odradek.records) and sends it with acks=all; with no
partition given, a keyed record goes where Kafka's default partitioner puts it
(murmur2 of the key), an unkeyed one to a random partition.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from odradek.console.offsets import EARLIEST, LATEST, list_offsets
from odradek.kafka_client import KafkaClient, KafkaClientError, check
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_request import consumer_fetch
from odradek.protocol.messages import ProduceRequest
from odradek.records.batch import iter_entries
from odradek.records.legacy import iter_records as legacy_records
from odradek.records.record import BatchBuilder, decode_batch

MAX_LIMIT = 500
FETCH_BYTES = 1024 * 1024
MAX_SCAN_BYTES = 32 * 1024 * 1024
BACKWARD_WINDOW = 200  # offsets per step when reading newest first


@dataclass
class Message:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class Page:
    topic: str
    partition: int
    messages: list[Message]
    log_start: int
    log_end: int
    scanned: int = 0
    truncated: bool = False  # the scan limit was hit before ``limit`` matches

    @property
    def first_offset(self) -> int | None:
        return min((m.offset for m in self.messages), default=None)

    @property
    def last_offset(self) -> int | None:
        return max((m.offset for m in self.messages), default=None)


@dataclass(frozen=True)
class BrowseRequest:
    partition: int = 0
    offset: int | None = None
    timestamp: int | None = None
    newest_first: bool = True
    limit: int = 50
    key: str | None = None
    contains: str | None = None

    def matches(self, m: Message) -> bool:
        if self.key is not None and (m.key or b"") != self.key.encode():
            return False
        if self.contains:
            needle = self.contains.encode()
            return needle in (m.key or b"") or needle in (m.value or b"")
        return True


async def _leader(client: KafkaClient, topic: str, partition: int) -> tuple[int, int]:
    t = await client.topic(topic)
    part = next((p for p in t.partitions if p.partition_index == partition), None)
    if part is None:
        raise KafkaClientError(
            f"Partition {partition} of topic '{topic}' does not exist (it has {len(t.partitions)})",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
    if part.leader_id < 0:
        raise KafkaClientError(f"{topic}-{partition} has no leader", ErrorCode.LEADER_NOT_AVAILABLE)
    return part.leader_id, len(t.partitions)


async def _fetch(
    client: KafkaClient, leader: int, topic: str, partition: int, offset: int
) -> tuple[list[Message], int, int]:
    """Records at or after ``offset`` (one fetch), with the high watermark and log start."""
    request = consumer_fetch(
        {(topic, partition): offset},
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=FETCH_BYTES,
        partition_max_bytes=FETCH_BYTES,
    )
    response = await client.send(ApiKey.FETCH, request, leader)
    check(response.error_code)
    data = response.responses[0].partitions[0]
    check(data.error_code)
    return (
        decode_records(bytes(data.records or b""), offset),
        data.high_watermark,
        data.log_start_offset,
    )


def decode_records(buf: bytes, min_offset: int) -> list[Message]:
    """Every data record in a fetched chunk at or after ``min_offset`` (control batches skipped)."""
    out: list[Message] = []
    for entry in iter_entries(buf):
        if entry.magic == 2:
            batch = decode_batch(buf, entry.position)
            if batch.is_control:
                continue
            out.extend(
                Message(r.offset, r.timestamp, r.key, r.value, list(r.headers))
                for r in batch.records
                if r.offset >= min_offset
            )
        else:
            chunk = buf[entry.position : entry.position + entry.size]
            out.extend(
                Message(m.offset, m.timestamp, m.key, m.value)
                for m in legacy_records(chunk)
                if m.offset >= min_offset
            )
    return out


async def browse(client: KafkaClient, topic: str, req: BrowseRequest) -> Page:
    leader, _ = await _leader(client, topic, req.partition)
    tp = (topic, req.partition)
    bounds = await list_offsets(client, {tp: EARLIEST}), await list_offsets(client, {tp: LATEST})
    for found in bounds:
        if found[tp].error:
            raise KafkaClientError(found[tp].error)
    log_start, log_end = bounds[0][tp].offset, bounds[1][tp].offset
    limit = max(1, min(MAX_LIMIT, req.limit))
    position = req.offset
    if req.timestamp is not None:
        at = (await list_offsets(client, {tp: req.timestamp}))[tp]
        if at.error:
            raise KafkaClientError(at.error)
        position = at.offset if at.offset >= 0 else log_end
    page = Page(topic, req.partition, [], log_start, log_end)
    if req.newest_first:
        end = log_end if position is None else min(max(position + 1, log_start), log_end)
        await _scan_backward(client, leader, tp, req, page, end, limit)
    else:
        start = log_start if position is None else min(max(position, log_start), log_end)
        await _scan_forward(client, leader, tp, req, page, start, limit)
    return page


async def _scan_forward(
    client: KafkaClient,
    leader: int,
    tp: tuple[str, int],
    req: BrowseRequest,
    page: Page,
    start: int,
    limit: int,
) -> None:
    offset = start
    while offset < page.log_end and len(page.messages) < limit:
        if page.scanned >= MAX_SCAN_BYTES:
            page.truncated = True
            return
        records, _, _ = await _fetch(client, leader, tp[0], tp[1], offset)
        if not records:
            return
        page.scanned += sum(len(m.value or b"") + len(m.key or b"") for m in records) + 1
        for m in records:
            if m.offset >= page.log_end or len(page.messages) >= limit:
                break
            if req.matches(m):
                page.messages.append(m)
        offset = records[-1].offset + 1


async def _scan_backward(
    client: KafkaClient,
    leader: int,
    tp: tuple[str, int],
    req: BrowseRequest,
    page: Page,
    end: int,
    limit: int,
) -> None:
    """Newest first: windows [end - w, end), read forward, kept in reverse order."""
    window = max(limit, BACKWARD_WINDOW)
    while end > page.log_start and len(page.messages) < limit:
        if page.scanned >= MAX_SCAN_BYTES:
            page.truncated = True
            return
        start = max(page.log_start, end - window)
        found: list[Message] = []
        offset = start
        while offset < end:
            records, _, _ = await _fetch(client, leader, tp[0], tp[1], offset)
            if not records:
                break
            page.scanned += sum(len(m.value or b"") + len(m.key or b"") for m in records) + 1
            found.extend(m for m in records if m.offset < end)
            offset = records[-1].offset + 1
        for m in reversed(found):
            if len(page.messages) >= limit:
                break
            if req.matches(m):
                page.messages.append(m)
        end = start
        window *= 2


@dataclass(frozen=True)
class Produced:
    partition: int
    offset: int


async def produce(
    client: KafkaClient,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
    partition: int | None,
) -> Produced:
    t = await client.topic(topic)
    count = len(t.partitions)
    if partition is None:
        partition = _default_partition(key, count)
    leader, _ = await _leader(client, topic, partition)
    builder = BatchBuilder()
    builder.append(int(time.time() * 1000), key, value, headers)
    cls = ProduceRequest
    request = cls(
        transactional_id=None,
        acks=-1,
        timeout_ms=int(client.timeout * 1000),
        topic_data=[
            cls.TopicProduceData(
                name=topic,
                partition_data=[
                    cls.TopicProduceData.PartitionProduceData(
                        index=partition, records=builder.build()
                    )
                ],
            )
        ],
    )
    response = await client.send(ApiKey.PRODUCE, request, leader)
    result = response.responses[0].partition_responses[0]
    check(result.error_code, getattr(result, "error_message", None))
    return Produced(partition, result.base_offset)


def _default_partition(key: bytes | None, count: int) -> int:
    if key is None:
        return random.randrange(count)
    from kafka.partitioner.default import murmur2  # Kafka's Utils.murmur2, same bits

    return (murmur2(key) & 0x7FFFFFFF) % count
