"""A Fetch response as a list of buffers whose record payloads are not copied (sans-io).

The generic encoder (:func:`odradek.protocol.messages.encode_response`) writes every
field, record bytes included, into one new buffer and copies that into a bytes object:
two copies of every fetched byte, a quarter of the gateway's CPU on a consume run
(issue 18). Here the Kafka fields around each partition's ``records`` go into small
byte strings and the records stay the buffers the storage node's data link delivered,
so ``transport.writelines`` sends them as they are. The bytes are exactly the generic
encoder's (tests/unit/protocol/test_fetch_response_parts.py compares them at every
version); responses with fields this layout does not cover (the v12+ tagged fields
``diverging_epoch``, ``current_leader``, ``snapshot_id``, ``node_endpoints``, which the
gateway never sets) get ``None`` and take the generic path.

The response objects are built by :func:`partition_data`, :func:`topic_response` and
:func:`fetch_response`, which set the fields directly: kafka-python's
``DataContainer.__init__`` walks the schema for every object it builds, a cost paid
per partition of every Fetch (odradek.protocol.produce_response does the same for
Produce). Their objects compare, encode and read like constructed ones (the tagged
fields are set to their schema default, None).

The gateway's task-free Fetch answers skip those objects too: :func:`encode_fetch_answer`
frames the same bytes from plain tuples (tests/unit/protocol/test_fetch_answer_frame.py).

Field layout: Kafka's ``FetchResponse.json`` (clients/src/main/resources/common/message).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, cast

from odradek.protocol.headers import encode_response_header
from odradek.protocol.messages import FetchResponse, blank_message

Buffer = bytes | bytearray | memoryview

TopicResp = FetchResponse.FetchableTopicResponse
PartResp = TopicResp.PartitionData
Aborted = PartResp.AbortedTransaction


# v12 is Fetch's first flexible version (compact arrays/strings, tagged fields).
FIRST_FLEXIBLE = 12
# Records smaller than this are joined into the surrounding bytes: a separate buffer
# per tiny payload costs more in writev bookkeeping than the copy.
INLINE_RECORDS_BELOW = 4096

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TOPIC_HEAD = struct.Struct(">i")
_PART_V0 = struct.Struct(">ihq")  # partition_index, error_code, high_watermark
_PART_V4 = struct.Struct(">ihqq")  # + last_stable_offset
_PART_V5 = struct.Struct(">ihqqq")  # + log_start_offset
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset


def _slow_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# The lengths a small answer carries (arrays, names, tiny records), encoded once: a
# buffer built per varint was a measurable share of a tiny Fetch answer (issue 18).
_SMALL_UVARINTS = [_slow_uvarint(v) for v in range(0x4000)]


def _uvarint(value: int) -> bytes:
    return _SMALL_UVARINTS[value] if 0 <= value < 0x4000 else _slow_uvarint(value)


# Topic names as the frame carries them, by (name, flexible). Bounded: cleared when full.
_NAMES: dict[tuple[str, bool], bytes] = {}
_MAX_NAMES = 4096


def _topic_name(name: str, flexible: bool) -> bytes:
    key = (name, flexible)
    found = _NAMES.get(key)
    if found is None:
        raw = name.encode()
        found = (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw
        if len(_NAMES) >= _MAX_NAMES:
            _NAMES.clear()
        _NAMES[key] = found
    return found


def _array_len(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def _has_tagged(response: Any) -> bool:
    if getattr(response, "node_endpoints", None):
        return True
    for topic in response.responses:
        for p in topic.partitions:
            if (
                getattr(p, "diverging_epoch", None) is not None
                or getattr(p, "current_leader", None) is not None
                or getattr(p, "snapshot_id", None) is not None
            ):
                return True
    return False


def _put_records(out: list[Buffer], cur: bytearray, records: Buffer, flexible: bool) -> bytearray:
    """A partition's records field: a small one copied into the piece being written, a
    large one handed on as a piece of its own (never copied); the piece to go on with."""
    size = len(records)
    cur += _uvarint(size + 1) if flexible else _I32.pack(size)
    if size < INLINE_RECORDS_BELOW:
        cur += records
        return cur
    out.append(cur)
    out.append(records)
    return bytearray()


def _framed(out: list[Buffer], cur: bytearray) -> list[Buffer]:
    """The response's pieces, the last one added, behind their INT32 total size."""
    out.append(cur)
    out.insert(0, _I32.pack(sum(map(len, out))))
    return out


def encode_fetch_response(
    correlation_id: int, version: int, response: FetchResponse
) -> list[Buffer] | None:
    """The whole response frame (size prefix, header, body) as buffers, or None when
    the response needs the generic encoder."""
    if _has_tagged(response):
        return None
    flexible = version >= FIRST_FLEXIBLE
    out: list[Buffer] = []
    cur = bytearray(encode_response_header(correlation_id, 1 if flexible else 0))

    if version >= 1:
        cur += _I32.pack(response.throttle_time_ms)
    if version >= 7:
        cur += _I16.pack(response.error_code)
        cur += _I32.pack(response.session_id)
    cur += _array_len(len(response.responses), flexible)
    for topic in response.responses:
        if version >= 13:
            topic_id = topic.topic_id
            cur += (topic_id or uuid.UUID(int=0)).bytes
        else:
            cur += _topic_name(topic.topic, flexible)
        cur += _array_len(len(topic.partitions), flexible)
        for p in topic.partitions:
            if version >= 5:
                cur += _PART_V5.pack(
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            elif version >= 4:
                cur += _PART_V4.pack(
                    p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                )
            else:
                cur += _PART_V0.pack(p.partition_index, p.error_code, p.high_watermark)
            if version >= 4:
                aborted = p.aborted_transactions
                if aborted is None:
                    cur += b"\x00" if flexible else b"\xff\xff\xff\xff"
                else:
                    cur += _array_len(len(aborted), flexible)
                    for a in aborted:
                        cur += _ABORTED.pack(a.producer_id, a.first_offset)
                        if flexible:
                            cur += b"\x00"
            if version >= 11:
                cur += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                cur += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                cur = _put_records(out, cur, cast("Buffer", records), flexible)
            if flexible:
                cur += b"\x00"  # the partition's tagged fields
        if flexible:
            cur += b"\x00"  # the topic's tagged fields
    if flexible:
        cur += b"\x00"  # the response's tagged fields
    return _framed(out, cur)


# A partition's answer as :func:`encode_fetch_answer` takes it: partition_index,
# error_code, high_watermark, last_stable_offset, log_start_offset, the aborted
# transactions as (producer_id, first_offset) (None: a null array, READ_UNCOMMITTED),
# records.
PartAnswer = tuple[int, int, int, int, int, list[tuple[int, int]] | None, Buffer]
# Topics in response order: the name (before v13) or the id, and its partitions.
TopicAnswers = list[tuple[str | uuid.UUID | None, list[PartAnswer]]]
_ZERO_ID = uuid.UUID(int=0)


def encode_fetch_answer(correlation_id: int, version: int, topics: TopicAnswers) -> list[Buffer]:
    """:func:`encode_fetch_response`'s frame of the sessionless answer the gateway gives
    (throttle 0, no error, session 0, ``preferred_read_replica`` -1, no tagged
    fields), from plain tuples: no response,
    topic and partition objects built to be read once (issue 18: one such answer per
    consumer long poll). Versions 4 and later (earlier ones are down-converted)."""
    flexible = version >= FIRST_FLEXIBLE
    out: list[Buffer] = []
    cur = bytearray(encode_response_header(correlation_id, 1 if flexible else 0))
    cur += _I32.pack(0)  # throttle_time_ms (v1+)
    if version >= 7:
        cur += b"\x00\x00\x00\x00\x00\x00"  # error_code, session_id
    cur += _array_len(len(topics), flexible)
    null = b"\x00" if flexible else b"\xff\xff\xff\xff"  # a null array
    preferred = b"\xff\xff\xff\xff" if version >= 11 else b""  # preferred_read_replica -1
    part = _PART_V5 if version >= 5 else _PART_V4
    for key, partitions in topics:
        if version >= 13:
            cur += (key if isinstance(key, uuid.UUID) else _ZERO_ID).bytes
        else:
            cur += _topic_name(key if isinstance(key, str) else "", flexible)
        cur += _array_len(len(partitions), flexible)
        for index, error, high_watermark, last_stable, log_start, aborted, records in partitions:
            if version >= 5:
                cur += part.pack(index, error, high_watermark, last_stable, log_start)
            else:
                cur += part.pack(index, error, high_watermark, last_stable)
            if aborted is None:
                cur += null
            else:
                cur += _array_len(len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    cur += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        cur += b"\x00"
            cur += preferred
            cur = _put_records(out, cur, records, flexible)
            if flexible:
                cur += b"\x00"  # the partition's tagged fields
        if flexible:
            cur += b"\x00"  # the topic's tagged fields
    if flexible:
        cur += b"\x00"  # the response's tagged fields
    return _framed(out, cur)


def partition_data(
    partition_index: int,
    error_code: int,
    high_watermark: int,
    last_stable_offset: int,
    log_start_offset: int,
    aborted_transactions: list[Aborted] | None,
    preferred_read_replica: int,
    records: Buffer,
) -> PartResp:
    """A ``PartitionData`` as ``PartResp(...)`` with these fields builds it, cheaply."""
    p: Any = blank_message(PartResp)
    p.partition_index = partition_index
    p.error_code = error_code
    p.high_watermark = high_watermark
    p.last_stable_offset = last_stable_offset
    p.log_start_offset = log_start_offset
    p.aborted_transactions = aborted_transactions
    p.preferred_read_replica = preferred_read_replica
    p.records = records
    # The tagged fields at their schema default, set: reading them is a slot read.
    p.diverging_epoch = None
    p.current_leader = None
    p.snapshot_id = None
    return cast(PartResp, p)


def topic_response(
    topic: str | None, topic_id: uuid.UUID | None, partitions: list[PartResp]
) -> TopicResp:
    """A ``FetchableTopicResponse`` named by ``topic`` (before v13) or ``topic_id``
    (the other left unset, as the constructor leaves it), cheaply."""
    t: Any = blank_message(TopicResp)
    if topic is not None:
        t.topic = topic
    if topic_id is not None:
        t.topic_id = topic_id
    t.partitions = partitions
    return cast(TopicResp, t)


def fetch_response(topics: list[TopicResp]) -> FetchResponse:
    """A sessionless ``FetchResponse`` of ``topics`` (throttle 0, no error), cheaply."""
    r: Any = blank_message(FetchResponse)
    r.throttle_time_ms = 0
    r.error_code = 0
    r.session_id = 0
    r.responses = topics
    r.node_endpoints = []  # the schema default, set
    return cast(FetchResponse, r)
