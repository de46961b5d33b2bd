"""Fuzzed record batches on the leader's append path (issue 14).

Valid produced blobs (one or two v2 batches, every codec, idempotent or not) are
damaged — bytes flipped, cut, grown, a header field set to an extreme — and, half of
the time, given a correct CRC again so the damage reaches the record-level checks of
Kafka's LogValidator instead of stopping at the CRC. ``append_as_leader`` must either
refuse with one of the log's Kafka-named errors and leave the log exactly as it was,
or append, after which everything in the log decodes as Kafka's record format says
(the appended records at the offsets the append reported). Any other exception, or a
refused append that changed the log end offset, fails the example.

The oracle is the project's own decoder, not kafka-python's: kafka-python reads a
record's attributes as a varint where the format has an int8, so a record whose
attributes byte has its high bit set (accepted by Kafka's LogValidator, which never
reads record attributes) breaks kafka-python's reader but no other client.
``LOG_APPEND_FUZZ_EXAMPLES`` sets the number of examples.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_testkit import CODECS, NOW, batch, open_log, small_config

from odradek.log.errors import LogError
from odradek.log.log import PartitionLog
from odradek.records.batch import crc32c
from odradek.records.errors import RecordsError
from odradek.records.record import decode_batches

EXAMPLES = int(os.environ.get("LOG_APPEND_FUZZ_EXAMPLES", "60"))
# Header fields a hostile producer sets (v2 layout, records/batch.py): offset, size.
FIELDS = {
    "batch_length": (8, ">i"),
    "attributes": (21, ">h"),
    "last_offset_delta": (23, ">i"),
    "base_timestamp": (27, ">q"),
    "max_timestamp": (35, ">q"),
    "producer_id": (43, ">q"),
    "base_sequence": (53, ">i"),
    "records_count": (57, ">i"),
}
EXTREMES = (0, 1, -1, 2**31 - 1, -(2**31), 2**15 - 1, 2**62)


def read_everything(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, timestamp) of every record in the log, by the project's decoder."""
    records = log.read(log.log_start_offset, 1 << 24).records
    return [
        (r.offset, r.key, r.value, r.timestamp)
        for b in decode_batches(bytes(records))
        for r in b.records
    ]


def blob(data: st.DataObject) -> bytearray:
    codec = data.draw(st.sampled_from(sorted(CODECS.values())), label="codec")
    idempotent = data.draw(st.booleans(), label="idempotent")
    out = bytearray()
    for i in range(data.draw(st.integers(1, 2), label="batches")):
        out += batch(
            data.draw(st.integers(1, 6), label="records"),
            NOW,
            codec=codec,
            pid=7 if idempotent else -1,
            epoch=0 if idempotent else -1,
            seq=i * 10 if idempotent else -1,
            keys=None,
            value=data.draw(st.binary(max_size=40), label="value"),
        )
    return out


def damage(records: bytearray, data: st.DataObject) -> bytearray:
    how = data.draw(st.sampled_from(("flip", "cut", "grow", "field")), label="mutation")
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 6), label="flips")):
            at = data.draw(st.integers(0, len(records) - 1), label="flip at")
            records[at] ^= data.draw(st.integers(1, 255), label="xor")
    elif how == "cut":
        records = records[: data.draw(st.integers(0, len(records) - 1), label="cut to")]
    elif how == "grow":
        records += data.draw(st.binary(min_size=1, max_size=64), label="tail")
    else:
        name = data.draw(st.sampled_from(sorted(FIELDS)), label="field")
        at, fmt = FIELDS[name]
        size = struct.calcsize(fmt)
        value = data.draw(st.sampled_from(EXTREMES), label="value")
        records[at : at + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "big")
    if data.draw(st.booleans(), label="fix crc") and len(records) >= 61:
        end = 12 + struct.unpack_from(">i", records, 8)[0]
        if 61 <= end <= len(records):
            struct.pack_into(">I", records, 17, crc32c(memoryview(records)[21:end]))
    return records


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_damaged_batches_are_refused_cleanly_or_appended_readably(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(Path(tmp) / "t-0", small_config(segment_bytes=1 << 20))
        try:
            log.append_as_leader(batch(2, NOW, value=b"before"), 0)
            before = read_everything(log)
            end = log.log_end_offset
            records = damage(blob(data), data)
            try:
                result = log.append_as_leader(records, 0, now_ms=NOW)
            except (LogError, RecordsError):
                assert log.log_end_offset == end, "a refused append moved the log end offset"
                assert read_everything(log) == before
                return
            after = read_everything(log)
            assert after[: len(before)] == before
            assert result.first_offset == end
            assert log.log_end_offset == result.last_offset + 1
            assert [r[0] for r in after[len(before) :]] == list(
                range(result.first_offset, result.last_offset + 1)
            )
        finally:
            log.close()
