"""Keys and values of the records in ``__transaction_state``, in Kafka's own layouts.

Pure code, no I/O. The topic is compacted and keyed by transactional id, so compaction
keeps each id's latest state; a null value is a tombstone (the id expired,
``transactional.id.expiration.ms``). Byte layouts (Kafka's ``TransactionLogKey.json``
and ``TransactionLogValue.json``; primitives as in :mod:`odradek.records.message_fields`)::

    TransactionLogKey    version INT16 = 0 | transactional_id STRING

    TransactionLogValue  version INT16, then
      producer_id INT64
      producer_epoch INT16
      transaction_timeout_ms INT32
      transaction_status INT8          (TransactionState id, below)
      transaction_partitions NULLABLE ARRAY[topic STRING | partition_ids ARRAY[INT32]]
                                       (null when the state is Empty)
      transaction_last_update_timestamp_ms INT64
      transaction_start_timestamp_ms INT64   (-1 while no transaction runs)
      v1 (flexible: compact lengths, tagged fields after every struct), tags of the
      top-level struct, written only when not their default:
        0: previous_producer_id INT64 (default -1)
        1: next_producer_id INT64 (default -1)
        2: client_transaction_version INT16 (default 0)

We write v1 (so the previous producer id survives a coordinator move, which KIP-360's
retry of a producer-id rotation needs); v0 is read as well. TransactionState ids and
names are Kafka's (``TransactionState.fromId``, the names DescribeTransactions and
ListTransactions show).

Invariants: a non-flexible value is consumed whole (trailing bytes mean corruption);
every decode error is a :class:`TransactionLogError`, so a corrupt record fails a
shard load loudly instead of silently losing a transaction. Crash behaviour: records
are written whole inside a record batch whose CRC the storage node checks, so a torn
write never reaches this decoder.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from odradek.records.message_fields import FieldReader, FieldWriter, MessageFieldError

KEY_VERSION = 0
VALUE_VERSION = 1
HIGHEST_VALUE_VERSION = 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
_Q = struct.Struct(">q")
_H = struct.Struct(">h")


class TransactionLogError(MessageFieldError):
    """A ``__transaction_state`` key or value that does not parse."""


class TransactionState(IntEnum):
    """Kafka's transaction states with their ``TransactionStatus`` ids."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka shows (``TransactionState.name``): ``PrepareCommit``, ..."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a version this code does not know (Kafka skips it while loading)."""

    version: int


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


class _Writer(FieldWriter):
    __slots__ = ()
    error = TransactionLogError


class _Reader(FieldReader):
    __slots__ = ()
    error = TransactionLogError


def group_partitions(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Partitions by topic, topics and partitions sorted (the order we write)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [(topic, sorted(set(by_topic[topic]))) for topic in sorted(by_topic)]


def encode_key(transactional_id: str) -> bytes:
    w = _Writer(KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.out)


def decode_key(buf: bytes | bytearray | memoryview | None) -> str | UnknownKey:
    """The transactional id, or :class:`UnknownKey` for a key version Kafka would skip."""
    if buf is None:
        raise TransactionLogError("a __transaction_state record needs a key")
    r = _Reader(buf)
    version = r.int16()
    if version != KEY_VERSION:
        return UnknownKey(version)
    transactional_id = r.string()
    r.done(strict=True)
    return transactional_id


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    if not 0 <= version <= HIGHEST_VALUE_VERSION:
        raise TransactionLogError(f"unknown TransactionLogValue version {version}")
    if value.state is TransactionState.EMPTY and value.partitions:
        raise TransactionLogError("an Empty transaction has no partitions")
    w = _Writer(version, flexible=version >= 1)
    w.int64(value.producer_id)
    w.int16(value.producer_epoch)
    w.int32(value.transaction_timeout_ms)
    w.int8(int(value.state))
    if value.state is TransactionState.EMPTY:
        w.array_len(None)
    else:
        grouped = group_partitions(value.partitions)
        w.array_len(len(grouped))
        for topic, ids in grouped:
            w.string(topic)
            w.array_len(len(ids))
            for partition in ids:
                w.int32(partition)
            w.tags()
    w.int64(value.last_update_timestamp_ms)
    w.int64(value.start_timestamp_ms)
    tags: dict[int, bytes] = {}
    if value.previous_producer_id != NO_PRODUCER_ID:
        tags[_TAG_PREVIOUS_PRODUCER_ID] = _Q.pack(value.previous_producer_id)
    if value.next_producer_id != NO_PRODUCER_ID:
        tags[_TAG_NEXT_PRODUCER_ID] = _Q.pack(value.next_producer_id)
    if value.client_transaction_version != 0:
        tags[_TAG_CLIENT_TRANSACTION_VERSION] = _H.pack(value.client_transaction_version)
    w.tags(tags)
    return bytes(w.out)


def value_version(buf: bytes | bytearray | memoryview) -> int:
    if len(buf) < 2:
        raise TransactionLogError(f"value of {len(buf)} bytes has no version")
    (version,) = _H.unpack_from(buf, 0)
    return int(version)


def _tag_int(tags: dict[int, bytes], tag: int, s: struct.Struct, default: int) -> int:
    raw = tags.get(tag)
    if raw is None:
        return default
    if len(raw) != s.size:
        raise TransactionLogError(f"tagged field {tag} has {len(raw)} bytes, expected {s.size}")
    (v,) = s.unpack(raw)
    return int(v)


def decode_value(buf: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """The stored state, or None for a tombstone."""
    if buf is None:
        return None
    version = value_version(buf)
    if not 0 <= version <= HIGHEST_VALUE_VERSION:
        raise TransactionLogError(f"unknown TransactionLogValue version {version}")
    r = _Reader(buf, flexible=version >= 1)
    r.pos = 2
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout_ms = r.int32()
    status = r.int8()
    try:
        state = TransactionState(status)
    except ValueError:
        raise TransactionLogError(f"unknown transaction status {status}") from None
    partitions: set[TopicPartition] = set()
    count = r.nullable_array_len()
    for _ in range(count or 0):
        topic = r.string()
        for _ in range(r.array_len()):
            partitions.add((topic, r.int32()))
        r.skip_tags()
    last_update = r.int64()
    start = r.int64()
    tags = r.tags()
    r.done(strict=version <= HIGHEST_VALUE_VERSION)
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        state=state,
        # Kafka ignores partitions stored with an Empty state (TransactionLog.readTxnRecordValue).
        partitions=frozenset() if state is TransactionState.EMPTY else frozenset(partitions),
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        previous_producer_id=_tag_int(tags, _TAG_PREVIOUS_PRODUCER_ID, _Q, NO_PRODUCER_ID),
        next_producer_id=_tag_int(tags, _TAG_NEXT_PRODUCER_ID, _Q, NO_PRODUCER_ID),
        client_transaction_version=_tag_int(tags, _TAG_CLIENT_TRANSACTION_VERSION, _H, 0),
    )


def format_record(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """``(key, payload)`` as ``kafka-dump-log.sh --transaction-log-decoder`` prints them
    (Kafka's ``TransactionLog.formatRecordKeyAndValue``); a record that does not parse
    prints what went wrong instead of failing the dump."""
    try:
        decoded_key = decode_key(key)
    except TransactionLogError as exc:
        return f"<invalid key: {exc}>", None
    if isinstance(decoded_key, UnknownKey):
        return f"unknown::version={decoded_key.version}", None
    key_text = f"transaction_metadata::transactionalId={decoded_key}"
    try:
        decoded = decode_value(value)
    except TransactionLogError as exc:
        return key_text, f"<invalid value: {exc}>"
    if decoded is None:
        return key_text, "<DELETE>"
    partitions = ",".join(
        f"{t}-{p}" for t, ids in group_partitions(decoded.partitions) for p in ids
    )
    return key_text, (
        f"producerId:{decoded.producer_id},producerEpoch:{decoded.producer_epoch},"
        f"state={decoded.state.kafka_name},partitions=[{partitions}],"
        f"txnLastUpdateTimestamp={decoded.last_update_timestamp_ms},"
        f"txnTimeoutMs={decoded.transaction_timeout_ms}"
    )
