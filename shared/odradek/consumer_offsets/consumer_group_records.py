"""Kafka's ``__consumer_offsets`` records for KIP-848 consumer groups: keys and values.

Pure code, no I/O. The key's leading INT16 is the record type (Kafka's key
"version"); keys are not flexible, values are flexible v0 (compact strings and arrays,
UNSIGNED_VARINT length + 1, a tagged-field section after every struct), ``UUID`` is
16 raw bytes. Layouts (Kafka's ``group-coordinator`` message specifications)::

    type 3  ConsumerGroupMetadataKey                  group STRING
            ConsumerGroupMetadataValue v0             epoch INT32
    type 4  ConsumerGroupPartitionMetadataKey         group STRING
            (value: subscribed topics' metadata; Kafka 4.1 stopped writing it; read and
            ignored here)
    type 5  ConsumerGroupMemberMetadataKey            group STRING | member_id STRING
            ConsumerGroupMemberMetadataValue v0       instance_id NULLABLE | rack_id
              NULLABLE | client_id | client_host | subscribed_topic_names [STRING]
              | subscribed_topic_regex NULLABLE | rebalance_timeout_ms INT32
              | server_assignor NULLABLE | tag 0: ClassicMemberMetadata NULLABLE
              (a member using the classic protocol inside a consumer group: INT8 1
              | session_timeout_ms INT32 | supported_protocols [name STRING
              | metadata BYTES]; absent for consumer-protocol members)
    type 6  ConsumerGroupTargetAssignmentMetadataKey  group STRING
            ...MetadataValue v0                       assignment_epoch INT32
    type 7  ConsumerGroupTargetAssignmentMemberKey    group STRING | member_id STRING
            ...MemberValue v0                         topic_partitions [topic_id UUID
                                                        | partitions [INT32]]
    type 8  ConsumerGroupCurrentMemberAssignmentKey   group STRING | member_id STRING
            ...Value v0                               member_epoch INT32
              | previous_member_epoch INT32 | state INT8 | assigned_partitions
              [TopicPartitions] | partitions_pending_revocation [TopicPartitions]

A null value is a tombstone: compaction then drops every earlier record of the key,
so the latest record per key is the state. Invariants: decoding consumes the whole
buffer (value versions above 0 may only add tagged fields, so their trailing bytes
are tolerated); every decode error is a :class:`CoordinatorRecordError`. Crash
behaviour: records reach the log whole inside a CRC-checked batch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.consumer_offsets.records import (
    CoordinatorRecordError,
    _Reader,
    _Writer,
    record_version,
)

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_RECORD_TYPES = frozenset(range(3, 9))
_MEMBER_KEYED = frozenset({5, 7, 8})

RECORD_NAMES = {
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
}

# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A key of record type 3-8; ``member_id`` is "" for the group-level types."""

    record_type: int
    group: str
    member_id: str = ""


@dataclass(slots=True)
class ClassicMemberMetadata:
    """What a classic-protocol member of a consumer group joined with (KIP-848's
    online migration)."""

    session_timeout_ms: int
    supported_protocols: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class MemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMemberMetadata | None = None


@dataclass(slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


Value = int | MemberMetadataValue | Assignment | CurrentAssignmentValue | None


# -- keys ---------------------------------------------------------------------------------
def encode_key(key: ConsumerGroupKey) -> bytes:
    if key.record_type not in CONSUMER_GROUP_RECORD_TYPES:
        raise CoordinatorRecordError(f"not a consumer group record type: {key.record_type}")
    w = _Writer(key.record_type)
    w.string(key.group)
    if key.record_type in _MEMBER_KEYED:
        w.string(key.member_id)
    return bytes(w.out)


def decode_key(buf: bytes | bytearray | memoryview) -> ConsumerGroupKey:
    record_type = record_version(buf)
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        raise CoordinatorRecordError(f"not a consumer group record type: {record_type}")
    r = _Reader(buf)
    r.pos = 2
    group = r.string()
    member = r.string() if record_type in _MEMBER_KEYED else ""
    r.done(strict=True)
    return ConsumerGroupKey(record_type, group, member)


# -- values -------------------------------------------------------------------------------
def _write_uuid(w: _Writer, value: uuid.UUID) -> None:
    w.out += value.bytes


def _read_uuid(r: _Reader) -> uuid.UUID:
    r._need(16, "uuid")
    raw = r.buf[r.pos : r.pos + 16].tobytes()
    r.pos += 16
    return uuid.UUID(bytes=raw)


def _write_assignment(w: _Writer, assignment: Assignment) -> None:
    topics = sorted(assignment.items(), key=lambda kv: kv[0].bytes)
    w.array_len(len(topics))
    for topic_id, partitions in topics:
        _write_uuid(w, topic_id)
        w.array_len(len(partitions))
        for p in sorted(partitions):
            w.int32(p)
        w.tags()


def _read_assignment(r: _Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        out[topic_id] = frozenset(r.int32() for _ in range(r.array_len()))
        r.skip_tags()
    return out


def _encode_classic(classic: ClassicMemberMetadata) -> bytes:
    w = _Writer(0, flexible=True)
    w.out = bytearray(b"\x01")  # a nullable struct: 1 = present
    w.int32(classic.session_timeout_ms)
    w.array_len(len(classic.supported_protocols))
    for name, metadata in classic.supported_protocols:
        w.string(name)
        w.bytes_(metadata)
        w.tags()
    w.tags()
    return bytes(w.out)


def _decode_classic(raw: bytes) -> ClassicMemberMetadata | None:
    r = _Reader(raw, flexible=True)
    if r.int8() < 0:
        return None
    session = r.int32()
    protocols = []
    for _ in range(r.array_len()):
        name = r.string()
        protocols.append((name, r.bytes_()))
        r.skip_tags()
    r.skip_tags()
    r.done(strict=True)
    return ClassicMemberMetadata(session, protocols)


def encode_value(record_type: int, value: Value) -> bytes | None:
    """The value bytes of a record of ``record_type``; None stays a tombstone."""
    if value is None:
        return None
    w = _Writer(0, flexible=True)
    if record_type in (CONSUMER_GROUP_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA):
        assert isinstance(value, int)
        w.int32(value)
    elif record_type == CONSUMER_GROUP_MEMBER_METADATA:
        assert isinstance(value, MemberMetadataValue)
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.array_len(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            w.string(name)
        w.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        if value.classic is not None:
            w.tags({0: _encode_classic(value.classic)})
            return bytes(w.out)
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        assert isinstance(value, dict)
        _write_assignment(w, value)
    elif record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        assert isinstance(value, CurrentAssignmentValue)
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.out += value.state.to_bytes(1, "big", signed=True)
        _write_assignment(w, value.assigned)
        _write_assignment(w, value.pending_revocation)
    else:
        raise CoordinatorRecordError(f"cannot write consumer group record type {record_type}")
    w.tags()
    return bytes(w.out)


def decode_value(record_type: int, buf: bytes | bytearray | memoryview) -> Value:
    version = record_version(buf)
    if version < 0:
        raise CoordinatorRecordError(f"negative value version {version}")
    r = _Reader(buf, flexible=True)
    r.pos = 2
    value: Value
    if record_type in (CONSUMER_GROUP_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA):
        value = r.int32()
    elif record_type == CONSUMER_GROUP_PARTITION_METADATA:
        return 0  # Kafka 4.1 stopped writing it; nothing here needs it (read as 0)
    elif record_type == CONSUMER_GROUP_MEMBER_METADATA:
        value = MemberMetadataValue(
            instance_id=r.nullable_string(),
            rack_id=r.nullable_string(),
            client_id=r.string(),
            client_host=r.string(),
            subscribed_topic_names=[r.string() for _ in range(r.array_len())],
            subscribed_topic_regex=r.nullable_string(),
            rebalance_timeout_ms=r.int32(),
            server_assignor=r.nullable_string(),
        )
        tagged = r.tags()
        if 0 in tagged:
            value.classic = _decode_classic(tagged[0])
        r.done(strict=version == 0)
        return value
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = _read_assignment(r)
    elif record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        member_epoch = r.int32()
        previous = r.int32()
        r._need(1, "int8")
        state = int.from_bytes(r.buf[r.pos : r.pos + 1], "big", signed=True)
        r.pos += 1
        value = CurrentAssignmentValue(
            member_epoch, previous, state, _read_assignment(r), _read_assignment(r)
        )
    else:
        raise CoordinatorRecordError(f"not a consumer group record type: {record_type}")
    r.skip_tags()
    r.done(strict=version == 0)
    return value


def describe(key: ConsumerGroupKey, value: Value) -> str:
    """One line for ``odradek dump-log``."""
    name = RECORD_NAMES.get(key.record_type, str(key.record_type))
    who = f"group={key.group}" + (f" member={key.member_id}" if key.member_id else "")
    if value is None:
        return f"{name} {who} <tombstone>"
    if key.record_type == CONSUMER_GROUP_PARTITION_METADATA:
        return f"{name} {who} (not decoded)"
    if isinstance(value, MemberMetadataValue):
        body = (
            f"instance={value.instance_id} client={value.client_id} host={value.client_host} "
            f"topics={value.subscribed_topic_names} regex={value.subscribed_topic_regex} "
            f"rebalance_timeout_ms={value.rebalance_timeout_ms} assignor={value.server_assignor}"
        )
        if value.classic is not None:
            body += (
                f" classic(session_timeout_ms={value.classic.session_timeout_ms} "
                f"protocols={[n for n, _ in value.classic.supported_protocols]})"
            )
    elif isinstance(value, CurrentAssignmentValue):
        body = (
            f"epoch={value.member_epoch} previous_epoch={value.previous_member_epoch} "
            f"state={value.state} assigned={_show(value.assigned)} "
            f"pending_revocation={_show(value.pending_revocation)}"
        )
    elif isinstance(value, dict):
        body = f"partitions={_show(value)}"
    else:
        body = f"epoch={value}"
    return f"{name} {who} {body}"


def _show(assignment: Assignment) -> str:
    return (
        "{" + ", ".join(f"{t}: {sorted(ps)}" for t, ps in sorted(assignment.items(), key=str)) + "}"
    )
