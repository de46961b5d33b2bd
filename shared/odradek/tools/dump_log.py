"""``odradek dump-log``: print segment files the way Kafka's ``kafka-dump-log.sh`` does.

Reads files only, never a running service, so it works on a copy of a log directory
or on the data of a dead node. Every file kind of a partition directory is handled:

- ``.log``: ``Starting offset: <base>``, one line per batch (v2, kafka-dump-log.sh's field order)
  or per legacy message (magic 0/1, as kafka-dump-log.sh prints them), and with
  ``--deep-iteration``/``--print-data-log`` one ``| offset: ...`` line per record;
  ``--transaction-log-decoder`` prints ``__transaction_state`` records as transaction
  metadata (Kafka's ``TransactionLog.formatRecordKeyAndValue``), ``--offsets-decoder``
  ``__consumer_offsets`` records (offset commits, group metadata, KIP-848 consumer
  group records; :mod:`odradek.tools.offsets_decoder`).
  A batch whose CRC does not match prints ``isvalid: false`` and the walk goes on
  while sizes stay plausible; bytes that cannot form a batch end it with
  ``Found N invalid bytes at the end of <file>``.
- ``.index`` (8-byte entries: int32 relative offset, int32 position) and
  ``.timeindex`` (12-byte entries: int64 timestamp, int32 relative offset), base
  offset from the 20-digit file name; the preallocated zero tail ends the listing.
  Offset index entries are checked against the ``.log`` beside them as Kafka does
  (``Mismatches in :<file>`` on stderr).
- ``.snapshot`` (producer state), ``.txnindex`` (aborted transactions), and the text
  checkpoints (``leader-epoch-checkpoint``, ``*-offset-checkpoint``).

A bad file never raises: whatever can be shown is shown, then what went wrong.
"""

from __future__ import annotations

import argparse
import mmap
import os
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from odradek.records.batch import BatchView, RecordsError, crc32c
from odradek.records.control import ControlRecordType, parse_control_key, parse_end_txn_marker
from odradek.records.header import (
    BATCH_LENGTH_MIN,
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    BatchHeader,
    Compression,
    TimestampType,
    read_batch_header,
    read_log_overhead,
    read_magic,
)
from odradek.records.legacy import (
    CODEC_MASK,
    TIMESTAMP_TYPE_MASK,
    LegacyMessage,
    inner_messages,
    read_message,
    record_overhead,
)
from odradek.records.record import DecodedRecord, decode_batch
from odradek.tools import offsets_decoder
from odradek.transaction_log.records import format_record as format_transaction_log_record

# Turns a data record into the `` key: ... payload: ...`` text of a decoder option.
RecordParser = Callable[[DecodedRecord], str]

_LEGACY_CODEC_NAMES = {
    0: "NoCompressionCodec",
    1: "GZIPCompressionCodec",
    2: "SnappyCompressionCodec",
    3: "LZ4CompressionCodec",
}
_TIMESTAMP_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}
_ARCHIVE_SUFFIXES = (".deleted", ".cleaned", ".swap")
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_TXN_ENTRY = struct.Struct(">hqqqq")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


@contextmanager
def _mapped(path: str) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes without reading a 1 GiB segment into memory."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield b""
            return
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mapped
        finally:
            mapped.close()


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


# -- .log ---------------------------------------------------------------------------------
def _codec_name(codec: int) -> str:
    try:
        return Compression(codec).name
    except ValueError:
        return f"UNKNOWN({codec})"


def _v2_batch_line(h: BatchHeader, position: int, valid: bool) -> str:
    ts_type = _TIMESTAMP_NAMES[h.timestamp_type]
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} position: {position} "
        f"{ts_type}: {h.max_timestamp} isvalid: {_bool(valid)} size: {h.size} "
        f"magic: {h.magic} compresscodec: {_codec_name(h.attributes & COMPRESSION_CODEC_MASK)} "
        f"crc: {h.crc}"
    )


def transaction_log_parser(record: DecodedRecord) -> str:
    """``--transaction-log-decoder``: a ``__transaction_state`` record as Kafka prints it."""
    key, payload = format_transaction_log_record(record.key, record.value)
    return (f" key: {key}" if key is not None else "") + (
        f" payload: {payload}" if payload is not None else ""
    )


def offsets_parser(record: DecodedRecord) -> str:
    """``--offsets-decoder``: a ``__consumer_offsets`` record as Kafka prints it."""
    key, payload = offsets_decoder.decode(record.key, record.value)
    return f" key: {key} payload: {payload}"


def _v2_record_line(
    record: DecodedRecord,
    ts_name: str,
    is_control: bool,
    print_data: bool,
    parser: RecordParser | None = None,
) -> str:
    parts = [
        f"| offset: {record.offset} {ts_name}: {record.timestamp} "
        f"keysize: {-1 if record.key is None else len(record.key)} "
        f"valuesize: {-1 if record.value is None else len(record.value)} "
        f"sequence: {record.sequence} "
        f"headerKeys: [{','.join(key for key, _ in record.headers)}]"
    ]
    if is_control:
        parts.append(_control_description(record))
    elif parser is not None:
        parts.append(parser(record))
    elif print_data:
        if record.key is not None:
            parts.append(f" key: {_text(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {_text(record.value)}")
    return "".join(parts)


def _control_description(record: DecodedRecord) -> str:
    try:
        _, type_id = parse_control_key(record.key)
        if type_id in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = parse_end_txn_marker(record.key, record.value)
            return (
                f" endTxnMarker: {marker.control_type.name} "
                f"coordinatorEpoch: {marker.coordinator_epoch}"
            )
        try:
            name = ControlRecordType(type_id).name
        except ValueError:
            name = "UNKNOWN"
        return f" controlType: {name}({type_id})"
    except RecordsError as exc:
        return f" invalid control record: {exc}"


def _dump_v2(
    data: bytes | mmap.mmap,
    pos: int,
    size: int,
    deep: bool,
    print_data: bool,
    parser: RecordParser | None = None,
) -> list[str]:
    raw = data[pos : pos + size]
    valid = BatchView(raw).is_valid()
    lines = [_v2_batch_line(read_batch_header(raw), pos, valid)]
    if deep and valid:
        try:
            batch = decode_batch(raw, verify_crc=False)
        except RecordsError as exc:
            lines.append(f"| could not decode records: {exc}")
        else:
            ts_name = _TIMESTAMP_NAMES[batch.timestamp_type]
            lines.extend(
                _v2_record_line(r, ts_name, batch.is_control, print_data, parser)
                for r in batch.records
            )
    return lines


def _legacy_line(msg: LegacyMessage, position: int, print_data: bool, prefix: str = "") -> str:
    parts = [f"{prefix}offset: {msg.offset} position: {position}"]
    if msg.magic > 0:
        ts_name = "LogAppendTime" if msg.attributes & TIMESTAMP_TYPE_MASK else "CreateTime"
        parts.append(f" {ts_name}: {msg.timestamp}")
    codec = msg.attributes & CODEC_MASK
    parts.append(
        f" isvalid: {_bool(msg.valid)}"
        f" payloadsize: {-1 if msg.value is None else len(msg.value)} magic: {msg.magic}"
        f" compresscodec: {_LEGACY_CODEC_NAMES.get(codec, f'UnknownCodec({codec})')}"
        f" crc: {msg.crc}"
    )
    if msg.key is not None:
        parts.append(f" keysize: {len(msg.key)}")
    if print_data and not codec:
        if msg.key is not None:
            parts.append(f" key: {_text(msg.key)}")
        if msg.value is not None:
            parts.append(f" payload: {_text(msg.value)}")
    return "".join(parts)


def _dump_legacy(
    data: bytes | mmap.mmap, pos: int, size: int, deep: bool, print_data: bool
) -> list[str]:
    raw = data[pos : pos + size]
    try:
        msg = read_message(raw, 0, verify_crc=False)
    except RecordsError as exc:
        offset = read_log_overhead(raw).base_offset
        return [
            f"offset: {offset} position: {pos} isvalid: false size: {size} "
            f"magic: {read_magic(raw)} error: {exc}"
        ]
    lines = [_legacy_line(msg, pos, print_data)]
    if deep and msg.valid and msg.is_compressed:
        try:
            inner = inner_messages(msg, verify_crc=False)
        except RecordsError as exc:
            lines.append(f"| could not decode the compressed message set: {exc}")
        else:
            lines.extend(_legacy_line(m, pos, print_data, "| ") for m in inner)
    return lines


def _min_length(magic: int) -> int | None:
    if magic == 2:
        return BATCH_LENGTH_MIN
    if magic in (0, 1):
        return record_overhead(magic)
    return None


def dump_log(
    path: str, deep: bool, print_data: bool, out: TextIO, parser: RecordParser | None = None
) -> None:
    out.write(f"Starting offset: {_base_offset(path)}\n")
    with _mapped(path) as data:
        end = len(data)
        pos = 0
        while end - pos >= HEADER_SIZE_UP_TO_MAGIC:
            entry = read_log_overhead(data, pos)
            magic = read_magic(data, pos)
            minimum = _min_length(magic)
            if minimum is None or entry.batch_length < minimum or pos + entry.size > end:
                break
            size = entry.size
            if magic == 2:
                lines = _dump_v2(data, pos, size, deep, print_data, parser)
            else:
                lines = _dump_legacy(data, pos, size, deep, print_data)
            out.write("\n".join(lines))
            out.write("\n")
            pos += size
        if pos < end:
            out.write(f"Found {end - pos} invalid bytes at the end of {os.path.basename(path)}\n")


# -- indexes ------------------------------------------------------------------------------
def _batch_last_offset_at(log: bytes | mmap.mmap, position: int) -> int | None:
    """Last offset of the entry at ``position`` (what an offset index entry names)."""
    try:
        magic = read_magic(log, position)
        if magic == 2:
            return read_batch_header(log, position).last_offset
        if magic in (0, 1):
            return read_log_overhead(log, position).base_offset
    except RecordsError:
        pass  # too short for a header: the entry names nothing
    return None


def dump_index(path: str, out: TextIO, err: TextIO) -> None:
    base = _base_offset(path)
    log_path = _sibling(path, ".log")
    mismatches: list[tuple[int, int | None]] = []
    with _mapped(path) as data, _maybe_mapped(log_path) as log:
        for i in range(len(data) // _INDEX_ENTRY.size):
            relative, position = _INDEX_ENTRY.unpack_from(data, i * _INDEX_ENTRY.size)
            # The active index is preallocated with zeros: the first repeat of
            # relative offset 0 is the end (Kafka stops there too).
            if i > 0 and relative == 0:
                break
            out.write(f"offset: {base + relative} position: {position}\n")
            if log is not None:
                found = _batch_last_offset_at(log, position)
                if found != base + relative:
                    mismatches.append((base + relative, found))
    if mismatches:
        err.write(f"Mismatches in :{os.path.abspath(path)}\n")
        for index_offset, log_offset in mismatches:
            shown = "none" if log_offset is None else log_offset
            err.write(f"  Index offset: {index_offset}, log offset: {shown}\n")


def dump_time_index(path: str, out: TextIO) -> None:
    base = _base_offset(path)
    with _mapped(path) as data:
        for i in range(len(data) // _TIME_INDEX_ENTRY.size):
            timestamp, relative = _TIME_INDEX_ENTRY.unpack_from(data, i * _TIME_INDEX_ENTRY.size)
            if (timestamp == 0 and relative == 0) or (i > 0 and relative == 0):
                break
            out.write(f"timestamp: {timestamp} offset: {base + relative}\n")


def _sibling(path: str, suffix: str) -> str:
    directory, name = os.path.split(path)
    return os.path.join(directory, name.split(".", 1)[0] + suffix)


@contextmanager
def _maybe_mapped(path: str) -> Iterator[bytes | mmap.mmap | None]:
    if not os.path.isfile(path):
        yield None
        return
    try:
        with _mapped(path) as data:
            yield data
    except OSError:
        yield None


# -- producer snapshots, transaction index, checkpoints -----------------------------------
def dump_producer_snapshot(path: str, out: TextIO) -> None:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _SNAPSHOT_HEADER.size:
        out.write(f"Snapshot is corrupt: {len(data)} bytes is shorter than its header\n")
        return
    version, stored_crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    computed = crc32c(data[6:])
    if computed != stored_crc:
        out.write(
            "Snapshot is corrupt (CRC is no longer valid). "
            f"Stored crc: {stored_crc}. Computed crc: {computed}\n"
        )
        return
    if version != 1:
        out.write(f"Snapshot version {version} is not supported\n")
        return
    expected = _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size
    if count < 0 or len(data) != expected:
        out.write(f"Snapshot is corrupt: {count} entries do not fit {len(data)} bytes\n")
        return
    for i in range(count):
        (
            producer_id,
            epoch,
            last_sequence,
            last_offset,
            offset_delta,
            timestamp,
            coordinator_epoch,
            txn_first_offset,
        ) = _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size)
        first_sequence = (last_sequence - offset_delta) % 0x80000000 if last_sequence >= 0 else -1
        out.write(
            f"producerId: {producer_id} producerEpoch: {epoch} "
            f"coordinatorEpoch: {coordinator_epoch} currentTxnFirstOffset: {txn_first_offset} "
            f"lastTimestamp: {timestamp} firstSequence: {first_sequence} "
            f"lastSequence: {last_sequence} lastOffset: {last_offset} "
            f"offsetDelta: {offset_delta} timestamp: {timestamp}\n"
        )


def dump_txn_index(path: str, out: TextIO) -> None:
    with open(path, "rb") as f:
        data = f.read()
    for i in range(len(data) // _TXN_ENTRY.size):
        version, producer_id, first, last, lso = _TXN_ENTRY.unpack_from(data, i * _TXN_ENTRY.size)
        out.write(
            f"version: {version} producerId: {producer_id} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {lso}\n"
        )
    if len(data) % _TXN_ENTRY.size:
        out.write(
            f"Found {len(data) % _TXN_ENTRY.size} invalid bytes at the end of {os.path.basename(path)}\n"
        )


def dump_text_checkpoint(path: str, out: TextIO) -> None:
    with open(path, "rb") as f:
        data = f.read()
    text = _text(data)
    out.write(text if text.endswith("\n") or not text else text + "\n")


# -- entry points -------------------------------------------------------------------------
def _kind(path: str) -> str | None:
    name = os.path.basename(path)
    for archive in _ARCHIVE_SUFFIXES:
        if name.endswith(archive):
            name = name[: -len(archive)]
            break
    if name == "leader-epoch-checkpoint" or name.endswith("-checkpoint"):
        return "checkpoint"
    for suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
        if name.endswith(suffix):
            return suffix
    return None


def dump_files(
    paths: list[str],
    print_data_log: bool,
    out: TextIO,
    *,
    deep_iteration: bool = False,
    err: TextIO | None = None,
    transaction_log_decoder: bool = False,
    offsets_decoder: bool = False,
) -> int:
    """Dump each file; 0 when all could be read, 1 if any was missing or of unknown kind.

    Corrupt content is reported in the output, not by the exit code, as Kafka does.
    ``transaction_log_decoder`` prints records as ``__transaction_state`` metadata,
    ``offsets_decoder`` as ``__consumer_offsets`` records (both imply printing data, as
    in Kafka).
    """
    err = sys.stderr if err is None else err
    parser: RecordParser | None = None
    if transaction_log_decoder:
        parser = transaction_log_parser
    elif offsets_decoder:
        parser = offsets_parser
    deep = deep_iteration or print_data_log or parser is not None
    status = 0
    for path in paths:
        out.write(f"Dumping {path}\n")
        kind = _kind(path)
        try:
            if not os.path.isfile(path):
                out.write(f"File {path} does not exist or is not a regular file\n")
                status = 1
            elif kind == ".log":
                dump_log(path, deep, print_data_log, out, parser)
            elif kind == ".index":
                dump_index(path, out, err)
            elif kind == ".timeindex":
                dump_time_index(path, out)
            elif kind == ".snapshot":
                dump_producer_snapshot(path, out)
            elif kind == ".txnindex":
                dump_txn_index(path, out)
            elif kind == "checkpoint":
                dump_text_checkpoint(path, out)
            else:
                out.write(
                    f"Ignoring unknown file {path}: not a .log, .index, .timeindex, "
                    ".snapshot, .txnindex or checkpoint file\n"
                )
                status = 1
        except (OSError, ValueError, RecordsError) as exc:
            out.write(f"Could not dump {path}: {exc}\n")
            status = 1
    out.flush()
    return status


def _run(args: argparse.Namespace) -> int:
    paths = [p for p in args.files.split(",") if p]
    if not paths:
        print("odradek dump-log: --files needs at least one file", file=sys.stderr)
        return 2
    return dump_files(
        paths,
        args.print_data_log,
        sys.stdout,
        deep_iteration=args.deep_iteration,
        transaction_log_decoder=args.transaction_log_decoder,
        offsets_decoder=args.offsets_decoder,
    )


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "dump-log",
        help="print log segments, indexes and snapshots like kafka-dump-log.sh",
        description="Print the contents of partition files (.log, .index, .timeindex, "
        ".snapshot, .txnindex, leader-epoch-checkpoint) the way Kafka's "
        "kafka-dump-log.sh does.",
    )
    p.add_argument(
        "--files",
        required=True,
        metavar="FILE[,FILE...]",
        help="comma-separated list of files to dump",
    )
    p.add_argument(
        "--print-data-log",
        action="store_true",
        help="print each record's key and payload (implies --deep-iteration)",
    )
    p.add_argument(
        "--deep-iteration",
        action="store_true",
        help="print every record, not only batch headers",
    )
    p.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="parse records as transaction metadata from the __transaction_state topic "
        "(implies --print-data-log)",
    )
    p.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="parse records as offset commits and group metadata from the "
        "__consumer_offsets topic, KIP-848 consumer group records included "
        "(implies --print-data-log)",
    )
    p.set_defaults(func=_run)
