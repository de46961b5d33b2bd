"""``odradek dump-log``: seed-golden output, corrupt files, every file kind."""

import io
import os
import struct
import subprocess
import sys
from pathlib import Path

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.records import (
    BatchBuilder,
    Compression,
    ControlRecordType,
    build_end_txn_marker_batch,
    build_message_set,
    encode_message,
)
from odradek.tools.dump_log import dump_files

SEED_TS = 1524709879130
SEED_BATCH_LINE = (
    "baseOffset: 0 lastOffset: 0 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false position: 0 "
    "CreateTime: 1524709879130 isvalid: true size: 76 magic: 2 compresscodec: NONE "
    "crc: 2857248333"
)
SEED_RECORD_LINE = (
    "| offset: 0 CreateTime: 1524709879130 keysize: 3 valuesize: 5 sequence: -1 "
    "headerKeys: [] key: key payload: value"
)
SEED_V0_LINE = (
    "offset: 0 position: 0 isvalid: true payloadsize: 5 magic: 0 "
    "compresscodec: NoCompressionCodec crc: 592888119 keysize: 3"
)
SEGMENT = "00000000000000000000"


def seed_batch(base_offset: int = 0) -> bytes:
    b = BatchBuilder(base_offset=base_offset, partition_leader_epoch=0)
    b.append(SEED_TS, b"key", b"value")
    return b.build()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def dump(path: Path, print_data_log: bool = False, deep: bool = False) -> tuple[int, list[str]]:
    out = io.StringIO()
    err = io.StringIO()
    status = dump_files([str(path)], print_data_log, out, deep_iteration=deep, err=err)
    return status, out.getvalue().splitlines() + err.getvalue().splitlines()


# -- the seed's examples, through the real command -----------------------------------------
def test_seed_v2_batch_with_print_data_log(tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(seed_batch())
    proc = run_cli("dump-log", "--files", str(log), "--print-data-log")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"Dumping {log}",
        "Starting offset: 0",
        SEED_BATCH_LINE,
        SEED_RECORD_LINE,
    ]
    assert proc.stderr == ""


def test_console_script_and_several_files(tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(seed_batch())
    v0 = tmp_path / "00000000000000000100.log"
    v0.write_bytes(encode_message(0, 0, -1, b"key", b"value"))
    script = Path(sys.executable).parent / "odradek"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "odradek.cli"]
    proc = subprocess.run(
        [*cmd, "dump-log", "--files", f"{log},{v0}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"Dumping {log}",
        "Starting offset: 0",
        SEED_BATCH_LINE,
        f"Dumping {v0}",
        "Starting offset: 100",
        SEED_V0_LINE,
    ]


def test_bad_files_never_show_a_traceback(tmp_path: Path) -> None:
    garbage = tmp_path / f"{SEGMENT}.log"
    garbage.write_bytes(os.urandom(5000))
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello")
    missing = tmp_path / "00000000000000000042.index"
    proc = run_cli("dump-log", "--files", f"{garbage},{unknown},{missing}", "--print-data-log")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stdout.splitlines()
    assert f"Dumping {unknown}" in lines and f"Dumping {missing}" in lines
    assert any(line.startswith(f"Ignoring unknown file {unknown}") for line in lines)
    assert any("does not exist" in line for line in lines)
    no_args = run_cli("dump-log")
    assert no_args.returncode == 2 and "--files" in no_args.stderr


# -- .log in process ------------------------------------------------------------------------
def test_v2_batch_without_data_log_prints_only_batches(tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(seed_batch())
    assert dump(log) == (0, [f"Dumping {log}", "Starting offset: 0", SEED_BATCH_LINE])


def test_deep_iteration_without_payloads(tmp_path: Path) -> None:
    b = BatchBuilder(base_offset=5, producer_id=3, producer_epoch=1, base_sequence=9)
    b.append(100, None, b"abc", [("trace", b"1"), ("span", None)])
    b.append(101, b"k", None)
    log = tmp_path / "00000000000000000005.log"
    log.write_bytes(b.build())
    _, lines = dump(log, deep=True)
    assert lines[2].startswith(
        "baseOffset: 5 lastOffset: 6 baseSequence: 9 lastSequence: 10 producerId: 3 "
        "producerEpoch: 1 partitionLeaderEpoch: -1 isTransactional: false position: 0 "
        "CreateTime: 101 isvalid: true"
    )
    assert lines[3:] == [
        "| offset: 5 CreateTime: 100 keysize: -1 valuesize: 3 sequence: 9 headerKeys: [trace,span]",
        "| offset: 6 CreateTime: 101 keysize: 1 valuesize: -1 sequence: 10 headerKeys: []",
    ]


def test_compressed_control_and_log_append_time_batches(tmp_path: Path) -> None:
    z = BatchBuilder(compression=Compression.ZSTD, partition_leader_epoch=2)
    z.append(7, b"a", b"b")
    marker = build_end_txn_marker_batch(
        control_type=ControlRecordType.ABORT,
        coordinator_epoch=4,
        producer_id=11,
        producer_epoch=0,
        timestamp=8,
        base_offset=1,
    )
    lat = BatchBuilder(base_offset=2, timestamp_type=1, log_append_time=99)
    lat.append(9, None, b"x")
    log = tmp_path / f"{SEGMENT}.log"
    first = z.build()
    log.write_bytes(first + marker + lat.build())
    _, lines = dump(log, print_data_log=True)
    assert "compresscodec: ZSTD" in lines[2] and "partitionLeaderEpoch: 2" in lines[2]
    assert lines[3] == (
        "| offset: 0 CreateTime: 7 keysize: 1 valuesize: 1 sequence: -1 headerKeys: [] "
        "key: a payload: b"
    )
    assert "isTransactional: true" in lines[4] and f"position: {len(first)}" in lines[4]
    assert lines[5].endswith("headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 4")
    assert "LogAppendTime: 99" in lines[6]
    assert lines[7].startswith("| offset: 2 LogAppendTime: 99 ")


def test_legacy_entries(tmp_path: Path) -> None:
    v1 = encode_message(1, 1, 1524709879130, None, b"value")
    wrapper = build_message_set(
        1, [(2, 10, b"a", b"1"), (3, 11, b"b", b"2")], compression=Compression.GZIP
    )
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(encode_message(0, 0, -1, b"key", b"value") + v1 + wrapper)
    _, lines = dump(log)
    assert lines[2] == SEED_V0_LINE
    assert lines[3] == (
        "offset: 1 position: 34 CreateTime: 1524709879130 isvalid: true payloadsize: 5 "
        "magic: 1 compresscodec: NoCompressionCodec crc: "
        f"{struct.unpack_from('>I', v1, 12)[0]}"
    )
    assert lines[4].startswith("offset: 3 position: 73 CreateTime: 11 isvalid: true")
    assert "compresscodec: GZIPCompressionCodec" in lines[4]
    assert len(lines) == 5
    _, deep = dump(log, print_data_log=True)
    assert deep[2] == SEED_V0_LINE + " key: key payload: value"
    assert deep[5].startswith("| offset: 2 position: 73 CreateTime: 10 isvalid: true")
    assert deep[5].endswith("keysize: 1 key: a payload: 1")
    assert deep[6].startswith("| offset: 3 ")


def test_corrupt_batch_is_reported_and_the_walk_goes_on(tmp_path: Path) -> None:
    bad = bytearray(seed_batch(0))
    bad[70] ^= 0x01  # inside the value: the CRC no longer matches
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(bytes(bad) + seed_batch(1))
    status, lines = dump(log, print_data_log=True)
    assert status == 0
    assert lines[2].startswith("baseOffset: 0 ") and "isvalid: false" in lines[2]
    assert lines[3].startswith("baseOffset: 1 ") and "isvalid: true" in lines[3]
    assert "position: 76" in lines[3]
    assert lines[4].startswith("| offset: 1 ")
    assert len(lines) == 5  # no records printed for the corrupt batch


def test_garbage_tail(tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(seed_batch() + b"thirteen-byte")
    status, lines = dump(log)
    assert status == 0
    assert lines == [
        f"Dumping {log}",
        "Starting offset: 0",
        SEED_BATCH_LINE,
        f"Found 13 invalid bytes at the end of {SEGMENT}.log",
    ]


def test_zero_filled_and_torn_tails(tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(seed_batch() + bytes(4096))
    assert dump(log)[1][-1] == f"Found 4096 invalid bytes at the end of {SEGMENT}.log"
    log.write_bytes(seed_batch() + seed_batch(1)[:50])
    assert dump(log)[1][-1] == f"Found 50 invalid bytes at the end of {SEGMENT}.log"
    log.write_bytes(b"")
    assert dump(log) == (0, [f"Dumping {log}", "Starting offset: 0"])


def test_archived_segment_names(tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log.deleted"
    log.write_bytes(seed_batch())
    assert dump(log)[1][2] == SEED_BATCH_LINE


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    suffix=st.sampled_from([".log", ".index", ".timeindex", ".snapshot", ".txnindex"]),
    data=st.binary(max_size=400),
    prefix=st.sampled_from([b"", seed_batch()]),
)
def test_random_files_never_raise(tmp_path: Path, suffix: str, data: bytes, prefix: bytes) -> None:
    path = tmp_path / f"{SEGMENT}{suffix}"
    path.write_bytes(prefix + data)
    status, _ = dump(path, print_data_log=True)
    assert status == 0


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(position=st.integers(0, 75), bit=st.integers(0, 7))
def test_any_flipped_bit_is_reported_not_raised(tmp_path: Path, position: int, bit: int) -> None:
    data = bytearray(seed_batch() + seed_batch(1))
    data[position] ^= 1 << bit
    path = tmp_path / f"{SEGMENT}.log"
    path.write_bytes(bytes(data))
    status, lines = dump(path, print_data_log=True)
    assert status == 0
    assert len(lines) >= 3


# -- indexes --------------------------------------------------------------------------------
SEED_INDEX = [(114, 17413), (170, 33770), (226, 50127)]


def test_offset_index_like_the_seed(tmp_path: Path) -> None:
    index = tmp_path / "00000000000003257573.index"
    entries = b"".join(struct.pack(">ii", rel, pos) for rel, pos in SEED_INDEX)
    index.write_bytes(entries + bytes(8 * 100))  # preallocated zero tail
    assert dump(index) == (
        0,
        [
            f"Dumping {index}",
            "offset: 3257687 position: 17413",
            "offset: 3257743 position: 33770",
            "offset: 3257799 position: 50127",
        ],
    )
    empty = tmp_path / "00000000000000000000.index"
    empty.write_bytes(bytes(80))
    assert dump(empty)[1] == [f"Dumping {empty}", "offset: 0 position: 0"]


def test_offset_index_is_checked_against_the_log(tmp_path: Path) -> None:
    log = tmp_path / f"{SEGMENT}.log"
    log.write_bytes(seed_batch(0) + seed_batch(1))
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">ii", 1, 76) + struct.pack(">ii", 2, 76))
    out, err = io.StringIO(), io.StringIO()
    assert dump_files([str(index)], False, out, err=err) == 0
    assert out.getvalue().splitlines()[1:] == ["offset: 1 position: 76", "offset: 2 position: 76"]
    assert err.getvalue().splitlines() == [
        f"Mismatches in :{index}",
        "  Index offset: 2, log offset: 1",
    ]


def test_time_index_like_the_seed(tmp_path: Path) -> None:
    index = tmp_path / "00000000000003257573.timeindex"
    entries = [(1570792689308, 112), (1570792689324, 169)]
    index.write_bytes(b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries) + bytes(120))
    assert dump(index)[1] == [
        f"Dumping {index}",
        "timestamp: 1570792689308 offset: 3257685",
        "timestamp: 1570792689324 offset: 3257742",
    ]


# -- snapshots, transaction index, checkpoints ----------------------------------------------
def snapshot(entries: list[tuple[int, ...]]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_producer_snapshot(tmp_path: Path) -> None:
    empty = tmp_path / "00000000000012999310.snapshot"
    empty.write_bytes(snapshot([]))
    assert empty.stat().st_size == 10  # as in the seed's directory listing
    assert dump(empty) == (0, [f"Dumping {empty}"])
    one = tmp_path / "00000000000016260431.snapshot"
    one.write_bytes(snapshot([(1000, 2, 14, 500, 4, 1570793423505, -1, -1)]))
    assert dump(one)[1][1] == (
        "producerId: 1000 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: -1 "
        "lastTimestamp: 1570793423505 firstSequence: 10 lastSequence: 14 lastOffset: 500 "
        "offsetDelta: 4 timestamp: 1570793423505"
    )
    corrupt = bytearray(snapshot([(1, 0, 0, 0, 0, 0, -1, -1)]))
    corrupt[-1] ^= 1
    one.write_bytes(bytes(corrupt))
    assert dump(one)[1][1].startswith("Snapshot is corrupt (CRC is no longer valid).")


def test_txn_index(tmp_path: Path) -> None:
    path = tmp_path / f"{SEGMENT}.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 77, 10, 20, 21))
    assert dump(path)[1][1] == (
        "version: 0 producerId: 77 firstOffset: 10 lastOffset: 20 lastStableOffset: 21"
    )


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n3 1200\n")
    assert dump(path) == (0, [f"Dumping {path}", "0", "2", "0 0", "3 1200"])
