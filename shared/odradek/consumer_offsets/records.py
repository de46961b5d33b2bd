"""Keys and values of the records in ``__consumer_offsets``, in Kafka's own layouts.

Pure code, no I/O. Every record of the compacted topic is keyed so that compaction
keeps only the latest state: one key per (group, topic, partition) for a committed
offset and one per group for its membership. A record with a null value is a
tombstone (offset deleted or expired, group deleted). Byte layouts, big-endian,
``STRING`` = INT16 length + UTF-8, ``NULLABLE_STRING`` the same with length -1 for
null, ``BYTES`` = INT32 length + bytes; flexible versions (v4 values) use Kafka's
compact forms (UNSIGNED_VARINT length + 1) and end every struct with tagged fields::

    key   version INT16 = 0 or 1 (OffsetCommitKey; we write 1 as Kafka does)
          group STRING | topic STRING | partition INT32
    key   version INT16 = 2 (GroupMetadataKey)
          group STRING
    key   version >= 3: records of other coordinators (KIP-848 consumer groups,
          share groups); not ours, skipped when loading.

    OffsetCommitValue   version INT16, then
      v0, v2   offset INT64 | metadata STRING | commit_timestamp INT64
      v1       offset INT64 | metadata STRING | commit_timestamp INT64
               | expire_timestamp INT64    (written when a v2-v4 OffsetCommit sets
                                            retention_time_ms, as Kafka does)
      v3       offset INT64 | leader_epoch INT32 | metadata STRING
               | commit_timestamp INT64    (the version we write otherwise)
      v4       as v3, flexible (read only)

    GroupMetadataValue  version INT16, then
      protocol_type STRING | generation INT32 | protocol NULLABLE_STRING
      | leader NULLABLE_STRING | v2+: current_state_timestamp INT64
      | members ARRAY[member_id STRING | v3+: group_instance_id NULLABLE_STRING
                      | client_id STRING | client_host STRING
                      | v1+: rebalance_timeout INT32 | session_timeout INT32
                      | subscription BYTES | assignment BYTES]
      we write v3; v4 (flexible) is read.

Invariants: decoding consumes the whole buffer for non-flexible versions (trailing
bytes mean corruption, except after a version newer than we know, which Kafka only
extends with tagged fields); every decode error is a :class:`CoordinatorRecordError`,
so a corrupt record fails a shard load loudly instead of silently dropping offsets.
Crash behaviour: records are written whole inside a record batch whose CRC the storage
node checks, so a torn write never reaches this decoder.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.records.message_fields import FieldReader, FieldWriter, MessageFieldError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_H = struct.Struct(">h")
_HIGHEST_OFFSET_VALUE = 4
_HIGHEST_GROUP_VALUE = 4


class CoordinatorRecordError(MessageFieldError):
    """A ``__consumer_offsets`` key or value that does not parse."""

    kafka_error = "CORRUPT_MESSAGE"


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OtherKey:
    """A key of a record type we do not own (version >= 3); loaders skip it."""

    version: int


@dataclass(slots=True)
class OffsetValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(slots=True)
class MemberValue:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = -1
    session_timeout: int = 0
    subscription: bytes = b""
    assignment: bytes = b""
    group_instance_id: str | None = None


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


# -- writing ------------------------------------------------------------------------------
class _Writer(FieldWriter):
    __slots__ = ()
    error = CoordinatorRecordError


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return bytes(w.out)


def encode_group_key(group: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def encode_offset_value(value: OffsetValue, version: int | None = None) -> bytes:
    """v3 by default; v1 when the value carries an explicit expire timestamp."""
    if version is None:
        version = (
            OFFSET_COMMIT_VALUE_VERSION_EXPIRE
            if value.expire_timestamp >= 0
            else OFFSET_COMMIT_VALUE_VERSION
        )
    if not 0 <= version <= _HIGHEST_OFFSET_VALUE:
        raise CoordinatorRecordError(f"unknown OffsetCommitValue version {version}")
    w = _Writer(version, flexible=version >= 4)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata or "")
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    w.tags()
    return bytes(w.out)


def encode_group_value(value: GroupValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= _HIGHEST_GROUP_VALUE:
        raise CoordinatorRecordError(f"unknown GroupMetadataValue version {version}")
    w = _Writer(version, flexible=version >= 4)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.out)


# -- reading ------------------------------------------------------------------------------
class _Reader(FieldReader):
    __slots__ = ()
    error = CoordinatorRecordError


def record_version(buf: bytes | bytearray | memoryview) -> int:
    if len(buf) < 2:
        raise CoordinatorRecordError(f"record of {len(buf)} bytes has no version")
    (v,) = _H.unpack_from(buf, 0)
    return int(v)


def decode_key(buf: bytes | bytearray | memoryview) -> OffsetKey | GroupKey | OtherKey:
    version = record_version(buf)
    r = _Reader(buf)
    r.pos = 2
    if version in (0, 1):
        key: OffsetKey | GroupKey = OffsetKey(r.string(), r.string(), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupKey(r.string())
    elif version > GROUP_METADATA_KEY_VERSION:
        return OtherKey(version)
    else:
        raise CoordinatorRecordError(f"negative key version {version}")
    r.done(strict=True)
    return key


def _value_reader(
    buf: bytes | bytearray | memoryview, name: str, highest: int
) -> tuple[int, int, _Reader]:
    """(the value's version, the newest layout known at or below it, a reader past the
    version); versions 4+ are flexible (tagged fields), as in Kafka's message specs."""
    version = record_version(buf)
    if version < 0:
        raise CoordinatorRecordError(f"negative {name} version {version}")
    known = min(version, highest)
    r = _Reader(buf, flexible=known >= 4)
    r.pos = 2
    return version, known, r


def decode_offset_value(buf: bytes | bytearray | memoryview) -> OffsetValue:
    version, known, r = _value_reader(buf, "OffsetCommitValue", _HIGHEST_OFFSET_VALUE)
    offset = r.int64()
    leader_epoch = r.int32() if known >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire = r.int64() if known == 1 else -1
    r.skip_tags()
    r.done(strict=version <= _HIGHEST_OFFSET_VALUE)
    return OffsetValue(offset, metadata, commit_timestamp, leader_epoch, expire)


def decode_group_value(buf: bytes | bytearray | memoryview) -> GroupValue:
    version, known, r = _value_reader(buf, "GroupMetadataValue", _HIGHEST_GROUP_VALUE)
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.int64() if known >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance = r.nullable_string() if known >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if known >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        members.append(
            MemberValue(
                member_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
                instance,
            )
        )
    r.skip_tags()
    r.done(strict=version <= _HIGHEST_GROUP_VALUE)
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)
