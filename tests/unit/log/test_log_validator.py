"""Record-level validation of produced batches (Kafka's LogValidator record loops).

Every hostile batch here carries a valid CRC, so only reading the records catches it;
each must be refused with Kafka's error code and leave the log exactly as it was.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest
from log_testkit import NOW, batch, decode_all, open_log, small_config

from odradek.log.errors import (
    InvalidRecordError,
    InvalidRecordsError,
    InvalidTimestampError,
    InvalidTimestampsError,
)
from odradek.log.log import PartitionLog
from odradek.records.batch import BatchView, CorruptRecordError
from odradek.records.header import HEADER_STRUCT, LOG_OVERHEAD, MAX_TIMESTAMP_OFFSET

HOUR = 3_600_000


def forge(
    section: bytes, count: int, last_delta: int, *, codec: int = 0, ts: int = NOW
) -> bytearray:
    """A v2 batch with any records section and header counts, and a correct CRC."""
    length = HEADER_STRUCT.size - LOG_OVERHEAD + len(section)
    buf = bytearray(
        HEADER_STRUCT.pack(0, length, -1, 2, 0, codec, last_delta, ts, ts, -1, -1, -1, count)
    )
    buf += section
    BatchView(buf).update_crc()
    return buf


def section_of(b: bytearray) -> bytes:
    return bytes(b[HEADER_STRUCT.size :])


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    lg = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    lg.append_as_leader(batch(2, NOW), 0)
    yield lg
    lg.close()


def _refused(
    log: PartitionLog, records: bytearray, exc: type[Exception], match: str | None
) -> Exception:
    size = log.size_bytes
    with pytest.raises(exc, match=match) as info:
        log.append_as_leader(records, 0, now_ms=NOW)
    assert log.log_end_offset == 2 and log.size_bytes == size
    return info.value


def test_count_larger_than_records_present(log: PartitionLog) -> None:
    one = batch(1, NOW)
    bad = forge(section_of(one), 5, 4)
    err = _refused(log, bad, InvalidRecordError, "premature EOF")
    assert err.kafka_error == "INVALID_RECORD"  # type: ignore[attr-defined]


def test_count_disagrees_with_last_offset_delta(log: PartitionLog) -> None:
    one = batch(1, NOW)
    err = _refused(log, forge(section_of(one), 1, 2**31 - 1), InvalidRecordError, "Inconsistent")
    assert err.kafka_error == "INVALID_RECORD"  # type: ignore[attr-defined]
    _refused(log, forge(section_of(one), 0, 0), InvalidRecordError, "no records")


def test_garbage_under_a_valid_crc(log: PartitionLog) -> None:
    garbage = bytes(range(7, 47))  # 40 bytes
    _refused(log, forge(garbage, 1, 0), InvalidRecordError, None)


def test_trailing_bytes_after_the_records(log: PartitionLog) -> None:
    _refused(log, forge(section_of(batch(1, NOW)) + b"\0\0", 1, 0), InvalidRecordError, "remaining")


def test_offset_deltas_must_count_up(log: PartitionLog) -> None:
    two = section_of(batch(2, NOW))
    # swap the offsetDelta byte of the second record (0x02 = zigzag 1) for 0x04 (2)
    first_len = two[0] >> 1
    second = bytearray(two[first_len + 1 :])
    assert second[3] == 2
    second[3] = 4
    _refused(log, forge(two[: first_len + 1] + bytes(second), 2, 1), InvalidRecordError, "delta")


def test_compressed_inner_records_are_checked(log: PartitionLog) -> None:
    inner = section_of(batch(1, NOW))
    bad = forge(gzip.compress(inner), 3, 2, codec=1)
    _refused(log, bad, InvalidRecordError, None)
    _refused(log, forge(gzip.compress(bytes(40)), 1, 0, codec=1), InvalidRecordError, None)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(forge(b"not gzip at all", 1, 0, codec=1), 0, now_ms=NOW)
    assert log.log_end_offset == 2
    ok = batch(3, NOW, codec=1)
    assert log.append_as_leader(ok, 0, now_ms=NOW).first_offset == 2


def test_a_bad_batch_after_a_good_one_appends_nothing(log: PartitionLog) -> None:
    blob = batch(1, NOW) + forge(section_of(batch(1, NOW)), 5, 4)
    _refused(log, blob, InvalidRecordError, None)


def test_null_key_on_a_compacted_topic(tmp_path: Path) -> None:
    lg = open_log(tmp_path / "c-0", small_config(cleanup_policy=("compact",)))
    with pytest.raises(InvalidRecordsError) as info:
        lg.append_as_leader(batch(3, NOW, keys=[b"a", None, None]), 0, now_ms=NOW)
    assert info.value.kafka_error == "INVALID_RECORD"
    assert [i for i, _ in info.value.record_errors] == [1, 2]
    assert "Compacted topic cannot accept message without key" in info.value.record_errors[0][1]
    assert lg.log_end_offset == 0
    lg.append_as_leader(batch(1, NOW, key=b"k", value=None), 0, now_ms=NOW)  # tombstone is fine
    assert lg.log_end_offset == 1
    lg.close()


def test_far_future_timestamps_by_kafka4_default(log: PartitionLog) -> None:
    assert log.config.message_timestamp_after_max_ms == HOUR
    err = _refused(log, batch(1, 2**62), InvalidTimestampError, "invalid timestamp")
    assert isinstance(err, InvalidTimestampsError)
    assert err.kafka_error == "INVALID_TIMESTAMP"
    assert err.record_errors[0][0] == 0 and "out of range" in err.record_errors[0][1]
    # one bad record among good ones (timestamp deltas): its index is reported
    _refused(log, batch(3, NOW, ts_step=HOUR), InvalidTimestampError, None)
    log.append_as_leader(batch(1, NOW + HOUR - 1), 0, now_ms=NOW)


def test_forged_max_timestamp_is_replaced_by_the_records_max(log: PartitionLog) -> None:
    b = batch(2, NOW)
    struct.pack_into(">q", b, MAX_TIMESTAMP_OFFSET, 2**62)
    BatchView(b).update_crc()
    res = log.append_as_leader(b, 0, now_ms=NOW)
    assert res.max_timestamp == NOW + 1
    stored = log.read(2, 1 << 20).records
    assert BatchView(bytearray(stored)).max_timestamp == NOW + 1
    assert BatchView(bytearray(stored)).is_valid()
    assert [o for o, *_ in decode_all(bytes(stored))] == [2, 3]
