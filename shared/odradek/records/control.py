"""Control records: the transaction markers (COMMIT/ABORT) a coordinator writes.

A control batch has the isControl and isTransactional attribute bits set, the
producer id/epoch of the transaction, baseSequence -1, and one record whose key and
value are (big-endian)::

    key   (ControlRecordType schema)     value (EndTxnMarker schema)
    int16 version   (0)                  int16 version          (0)
    int16 type      (0 ABORT, 1 COMMIT)  int32 coordinatorEpoch

Readers accept a higher key/value version with trailing fields they do not know
(Kafka's forward compatibility: only the leading fields are read). Pure code.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from odradek.records.batch import (
    NO_PARTITION_LEADER_EPOCH,
    NO_SEQUENCE,
    Buffer,
    Compression,
    InvalidRecordError,
    TimestampType,
)
from odradek.records.header import read_batch_header
from odradek.records.record import BatchBuilder, decode_batch

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """Kafka's ``ControlRecordType`` ids (only the transaction markers are written here)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType
    coordinator_epoch: int


def encode_control_key(
    control_type: ControlRecordType | int, version: int = CONTROL_KEY_VERSION
) -> bytes:
    return _KEY.pack(version, int(control_type))


def parse_control_key(key: Buffer | None) -> tuple[int, int]:
    """``(version, type id)``; the type id may be one this code does not know."""
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError("control record key needs at least 4 bytes")
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    return int(version), int(type_id)


def encode_end_txn_marker_value(
    coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION
) -> bytes:
    return _VALUE.pack(version, coordinator_epoch)


def parse_end_txn_marker(key: Buffer | None, value: Buffer | None) -> EndTransactionMarker:
    _, type_id = parse_control_key(key)
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record type {type_id} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError("transaction marker value needs at least 6 bytes")
    version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    if version < 0:
        raise InvalidRecordError(f"invalid transaction marker version {version}")
    return EndTransactionMarker(ControlRecordType(type_id), int(coordinator_epoch))


def read_end_txn_marker(batch: Buffer, pos: int = 0) -> EndTransactionMarker | None:
    """The transaction marker the control batch at ``pos`` holds (CRC not checked).

    None for an empty control batch (the cleaner removed its record; Kafka's
    ProducerAppendInfo then applies nothing) and for control types other than
    COMMIT/ABORT, which never belong to a transaction. Raises InvalidRecordError or
    CorruptRecordError when the record cannot be read.
    """
    h = read_batch_header(batch, pos)
    if not h.is_control:
        raise InvalidRecordError("not a control batch")
    if h.records_count == 0:
        return None
    record = decode_batch(batch, pos, verify_crc=False).records[0]
    _, type_id = parse_control_key(record.key)
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return parse_end_txn_marker(record.key, record.value)


def build_end_txn_marker_batch(
    *,
    control_type: ControlRecordType | int,
    coordinator_epoch: int,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One transactional control batch holding a single COMMIT or ABORT marker."""
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"{control_type} is not a transaction marker type")
    builder = BatchBuilder(
        base_offset=base_offset,
        compression=Compression.NONE,
        timestamp_type=TimestampType.CREATE_TIME,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        timestamp,
        encode_control_key(control_type),
        encode_end_txn_marker_value(coordinator_epoch),
    )
    return builder.build()
