"""A Produce response framed by hand (sans-io): the generic encoder's bytes, cheaper.

librdkafka at ``linger.ms=0`` sends one ProduceRequest per record, so the gateway
encodes thousands of tiny Produce responses a second; kafka-python's generic encoder
(:func:`odradek.protocol.messages.encode_response`) took about 20 us for one of them,
the largest single share of the gateway's CPU per request after coalescing (issue 18).
Here the few fields are packed with :mod:`struct` directly. The bytes are exactly the
generic encoder's at every version (tests/unit/protocol/test_produce_response_frame.py
compares them); a response with fields this layout does not cover (the v10+ tagged
fields ``current_leader`` and ``node_endpoints``, which the gateway does not set) gets
``None`` and takes the generic path.

The response objects themselves are built by :func:`partition_response`,
:func:`topic_response` and :func:`produce_response`: kafka-python's
``DataContainer.__init__`` walks the message schema for every object it builds (about
20 us for the three objects of a one-record answer); these set the fields directly and
give objects that compare, encode and read exactly like constructed ones (the tagged
fields they leave unset hold their schema default, None and [], as unset ones read).
They return their ``Any`` object as the declared type without ``typing.cast``, which
is a function call at run time (five per one-record answer).

Field layout: Kafka's ``ProduceResponse.json`` (clients/src/main/resources/common/message).
"""

from __future__ import annotations

import struct
from typing import Any

from odradek.protocol.headers import encode_response_header
from odradek.protocol.messages import ProduceResponse, blank_message

FIRST_FLEXIBLE = 9  # compact arrays and strings, tagged fields
_FIRST_LEADER_HINTS = 10  # the tagged current_leader and node_endpoints (KIP-951)
_FIRST_TOPIC_ID = 13  # topics named by id: not served (versions.py)

TopicResp = ProduceResponse.TopicProduceResponse
PartResp = TopicResp.PartitionProduceResponse
RecordError = PartResp.BatchIndexAndErrorMessage


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V0 = struct.Struct(">ihq")  # index, error_code, base_offset
_PART_V2 = struct.Struct(">ihqq")  # + log_append_time_ms
_PART_V5 = struct.Struct(">ihqqq")  # + log_start_offset


def _uvarint(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _string(value: str | None, flexible: bool, out: bytearray) -> None:
    """A (nullable) string: compact in flexible versions."""
    if value is None:
        if flexible:
            out.append(0)
        else:
            out += _I16.pack(-1)
        return
    data = value.encode()
    if flexible:
        _uvarint(len(data) + 1, out)
    else:
        out += _I16.pack(len(data))
    out += data


def _array_length(n: int, flexible: bool, out: bytearray) -> None:
    if flexible:
        if n < 0x7F:
            out.append(n + 1)
        else:
            _uvarint(n + 1, out)
    else:
        out += _I32.pack(n)


# Topic names as the frame carries them, by (name, flexible): a gateway answers the
# same few topics thousands of times a second. Bounded: cleared when full.
_NAMES: dict[tuple[str | None, bool], bytes] = {}
_MAX_NAMES = 4096


def _topic_name(name: str | None, flexible: bool) -> bytes:
    key = (name, flexible)
    found = _NAMES.get(key)
    if found is None:
        out = bytearray()
        _string(name, flexible, out)
        found = bytes(out)
        if len(_NAMES) >= _MAX_NAMES:
            _NAMES.clear()
        _NAMES[key] = found
    return found


def encode_produce_response(
    correlation_id: int, header_version: int, version: int, response: ProduceResponse
) -> bytes | None:
    """The whole response frame (size prefix, header, body), or None when ``response``
    carries fields only the generic encoder writes."""
    if version >= _FIRST_TOPIC_ID:
        return None
    r: Any = response
    flexible = version >= FIRST_FLEXIBLE
    hints = version >= _FIRST_LEADER_HINTS
    # (An unset schema field reads as its default: DataContainer.__getattr__.)
    if hints and r.node_endpoints:
        return None
    out = bytearray(4)
    out += encode_response_header(correlation_id, header_version)
    topics = r.responses or []
    _array_length(len(topics), flexible, out)
    part_struct = _PART_V5 if version >= 5 else _PART_V2 if version >= 2 else _PART_V0
    for topic in topics:
        out += _topic_name(topic.name, flexible)
        parts = topic.partition_responses or []
        _array_length(len(parts), flexible, out)
        for p in parts:
            if hints and p.current_leader is not None:
                return None
            if version >= 5:
                out += part_struct.pack(
                    p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset
                )
            elif version >= 2:
                out += part_struct.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            else:
                out += part_struct.pack(p.index, p.error_code, p.base_offset)
            if version >= 8:
                errors = p.record_errors or []
                _array_length(len(errors), flexible, out)
                for e in errors:
                    out += _I32.pack(e.batch_index)
                    _string(e.batch_index_error_message, flexible, out)
                    if flexible:
                        out.append(0)
                _string(p.error_message, flexible, out)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if version >= 1:
        out += _I32.pack(r.throttle_time_ms)
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def partition_response(
    index: int,
    error_code: int,
    base_offset: int = -1,
    log_append_time_ms: int = -1,
    log_start_offset: int = -1,
    record_errors: list[RecordError] | None = None,
    error_message: str | None = None,
) -> PartResp:
    """A ``PartitionProduceResponse`` as ``PartResp(index=..., ...)`` builds it, cheaply
    (module docstring)."""
    p: Any = blank_message(PartResp)
    p.index = index
    p.error_code = error_code
    p.base_offset = base_offset
    p.log_append_time_ms = log_append_time_ms
    p.log_start_offset = log_start_offset
    p.record_errors = [] if record_errors is None else record_errors
    p.error_message = error_message
    p.current_leader = None  # the schema default; set, so reading it is a slot read
    return p


def topic_response(name: str, partitions: list[PartResp]) -> TopicResp:
    """A ``TopicProduceResponse`` named by ``name`` (versions before 13), cheaply."""
    t: Any = blank_message(TopicResp)
    t.name = name
    t.partition_responses = partitions
    return t


def produce_response(topics: list[TopicResp], throttle_time_ms: int = 0) -> ProduceResponse:
    """A ``ProduceResponse`` of ``topics``, cheaply."""
    r: Any = blank_message(ProduceResponse)
    r.responses = topics
    r.throttle_time_ms = throttle_time_ms
    r.node_endpoints = []  # the schema default, set (see partition_response)
    return r
