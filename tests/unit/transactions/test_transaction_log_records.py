"""``__transaction_state`` records: Kafka's TransactionLogKey/TransactionLogValue bytes
(v0 and flexible v1), tombstones, corrupt input, and ``dump-log --transaction-log-decoder``."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.records import BatchBuilder
from odradek.tools.dump_log import dump_files
from odradek.transaction_log.records import (
    TransactionLogError,
    TransactionLogValue,
    TransactionState,
    UnknownKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    format_record,
)

ONGOING = TransactionLogValue(
    producer_id=1000,
    producer_epoch=5,
    transaction_timeout_ms=60_000,
    state=TransactionState.ONGOING,
    partitions=frozenset({("t", 3), ("t", 0)}),
    last_update_timestamp_ms=1_700_000_000_123,
    start_timestamp_ms=1_700_000_000_100,
)


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.kafka_name) for s in TransactionState] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert TransactionState.from_name("PrepareEpochFence") is TransactionState.PREPARE_EPOCH_FENCE
    assert TransactionState.from_name("ongoing") is None


def test_key_bytes() -> None:
    assert encode_key("tx-1") == b"\x00\x00\x00\x04tx-1"
    assert decode_key(b"\x00\x00\x00\x04tx-1") == "tx-1"
    assert decode_key(b"\x00\x01\x00\x00") == UnknownKey(1)
    with pytest.raises(TransactionLogError):
        decode_key(b"\x00\x00\x00\x09short")
    with pytest.raises(TransactionLogError):
        decode_key(None)


def test_value_v0_bytes_by_hand() -> None:
    expected = (
        struct.pack(">hqhib", 0, 1000, 5, 60_000, 1)
        + struct.pack(">i", 1)  # one topic
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 3)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_100)
    )
    assert encode_value(ONGOING, version=0) == expected
    assert decode_value(expected) == ONGOING


def test_value_v1_bytes_by_hand_with_tagged_fields() -> None:
    value = TransactionLogValue(
        producer_id=7,
        producer_epoch=0,
        transaction_timeout_ms=1000,
        state=TransactionState.PREPARE_COMMIT,
        partitions=frozenset({("ab", 1)}),
        last_update_timestamp_ms=2,
        start_timestamp_ms=1,
        previous_producer_id=6,
    )
    expected = (
        struct.pack(">hqhib", 1, 7, 0, 1000, 2)
        + b"\x02"  # compact array: 1 topic
        + b"\x03ab"  # compact string
        + b"\x02"
        + struct.pack(">i", 1)
        + b"\x00"  # topic struct: no tagged fields
        + struct.pack(">qq", 2, 1)
        + b"\x01"  # one tagged field
        + b"\x00\x08"  # tag 0 (PreviousProducerId), 8 bytes
        + struct.pack(">q", 6)
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_empty_state_has_null_partitions_and_ignores_stored_ones() -> None:
    empty = TransactionLogValue(9, 1, 100, TransactionState.EMPTY, frozenset(), 5, -1)
    v0 = encode_value(empty, version=0)
    assert v0[2 + 8 + 2 + 4 + 1 : 2 + 8 + 2 + 4 + 1 + 4] == b"\xff\xff\xff\xff"  # null array
    v1 = encode_value(empty)
    assert v1[2 + 8 + 2 + 4 + 1] == 0  # compact null array
    assert decode_value(v0) == decode_value(v1) == empty
    with pytest.raises(TransactionLogError):
        encode_value(
            TransactionLogValue(9, 1, 100, TransactionState.EMPTY, frozenset({("t", 0)}), 5, -1)
        )
    # Kafka's reader drops partitions stored with an Empty state.
    stored = bytearray(encode_value(ONGOING, version=0))
    stored[2 + 8 + 2 + 4] = 0
    decoded = decode_value(bytes(stored))
    assert (
        decoded is not None and decoded.state is TransactionState.EMPTY and not decoded.partitions
    )


def test_unknown_tags_are_skipped_and_defaults_apply() -> None:
    raw = bytearray(encode_value(ONGOING))
    assert raw[-1] == 0
    raw[-1:] = b"\x01\x05\x02zz"  # one unknown tag 5 of 2 bytes
    decoded = decode_value(bytes(raw))
    assert decoded == ONGOING
    assert decoded.previous_producer_id == decoded.next_producer_id == -1


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00",
        b"\x00\x02" + b"\x00" * 40,  # unknown version
        encode_value(ONGOING, version=0)[:-3],  # truncated
        encode_value(ONGOING, version=0) + b"x",  # trailing bytes
        encode_value(ONGOING)[:16] + b"\x09" + encode_value(ONGOING)[17:],  # status 9
    ],
)
def test_corrupt_values_raise(raw: bytes) -> None:
    with pytest.raises(TransactionLogError):
        decode_value(raw)


def test_tombstone() -> None:
    assert decode_value(None) is None
    assert format_record(encode_key("x"), None) == (
        "transaction_metadata::transactionalId=x",
        "<DELETE>",
    )


@given(
    pid=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 32767),
    timeout=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in TransactionState if s is not TransactionState.EMPTY]),
    partitions=st.frozensets(
        st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1)), max_size=8
    ),
    times=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62)),
    prev=st.integers(-1, 2**62),
    version=st.sampled_from([0, 1]),
)
def test_round_trip(
    pid: int,
    epoch: int,
    timeout: int,
    state: TransactionState,
    partitions: frozenset[tuple[str, int]],
    times: tuple[int, int],
    prev: int,
    version: int,
) -> None:
    value = TransactionLogValue(
        pid,
        epoch,
        timeout,
        state,
        partitions,
        times[0],
        times[1],
        previous_producer_id=prev if version else -1,
    )
    assert decode_value(encode_value(value, version)) == value


def test_dump_log_transaction_log_decoder(tmp_path: Path) -> None:
    builder = BatchBuilder()
    builder.append(1, encode_key("tx-1"), encode_value(ONGOING))
    builder.append(2, encode_key("tx-2"), None)
    builder.append(3, b"\x00\x07", b"whatever")
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(builder.build())
    out = io.StringIO()
    assert dump_files([str(segment)], False, out, transaction_log_decoder=True) == 0
    records = [line for line in out.getvalue().splitlines() if line.startswith("| offset")]
    assert records[0].endswith(
        " key: transaction_metadata::transactionalId=tx-1 payload: producerId:1000,"
        "producerEpoch:5,state=Ongoing,partitions=[t-0,t-3],"
        "txnLastUpdateTimestamp=1700000000123,txnTimeoutMs=60000"
    )
    assert records[1].endswith(" key: transaction_metadata::transactionalId=tx-2 payload: <DELETE>")
    assert records[2].endswith(" key: unknown::version=7")
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "dump-log",
            "--transaction-log-decoder",
            "--files",
            str(segment),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0 and "state=Ongoing" in cli.stdout
