"""On-disk formats of the embedded metadata store (pure: bytes in, bytes out, no I/O).

Journal ``journal.jsonl`` — one line per committed revision, appended and fsync'd
before the write is acknowledged::

    {"rev":R,"ops":[["put",KEY,VALUE,LEASE],["del",KEY],...],"crc":C}\\n

``VALUE`` is a JSON string when the bytes are UTF-8, else ``{"b64": "..."}``; ``LEASE``
is 0 for a plain key. ``C`` is the CRC-32C of ``json.dumps([R, ops])`` in compact form
(the line re-serialises to the same text, so the check needs no second copy).
Invariants: revisions are consecutive; all ops of a line share its revision (one
txn); deletes name single keys (prefixes are expanded before journaling) so replay
is deterministic.

Snapshot ``snapshot.json`` — the whole key space at one revision, one line::

    {"rev":R,"kvs":[[KEY,VALUE,CREATE_REV,MOD_REV,VERSION,LEASE],...],"crc":C}\\n

with ``C`` the CRC-32C of ``json.dumps([R, kvs])``. Journal lines at or below the
snapshot revision are skipped on replay.

Crash behaviour: a write interrupted by a crash leaves at most one torn or garbled
line at the end of the journal (each line is fsync'd before the next is written);
:func:`scan_journal` reports where the good prefix ends so the opener can cut the
tail off. A bad line followed by good ones is real corruption and is refused. The
snapshot is replaced atomically (temp file, fsync, rename, directory fsync), so it is
either the old one or the new one, never a mix.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

import crc32c

from odradek.controller.store import Delete, KeyValue, Put, StoreCorruptError

JournalOp: TypeAlias = Put | Delete


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _encode_value(value: bytes) -> str | dict[str, str]:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(value).decode("ascii")}


def _decode_value(raw: Any) -> bytes:
    if isinstance(raw, str):
        return raw.encode("utf-8")
    if isinstance(raw, dict) and isinstance(raw.get("b64"), str):
        return base64.b64decode(raw["b64"], validate=True)
    raise ValueError(f"bad value encoding: {raw!r}")


def _checksum(body: str) -> int:
    return crc32c.crc32c(body.encode("utf-8"))


def encode_entry(revision: int, ops: Iterable[JournalOp]) -> bytes:
    """One journal line (with its newline) for the ops committed at ``revision``."""
    encoded: list[list[Any]] = []
    for op in ops:
        if isinstance(op, Put):
            encoded.append(["put", op.key, _encode_value(op.value), op.lease])
        else:
            if op.prefix:
                raise ValueError("prefix deletes must be expanded before journaling")
            encoded.append(["del", op.key])
    crc = _checksum(_dumps([revision, encoded]))
    return (_dumps({"rev": revision, "ops": encoded, "crc": crc}) + "\n").encode("utf-8")


def decode_entry(line: bytes) -> tuple[int, list[JournalOp]]:
    """Parse and verify one line (without or with its newline); ValueError if bad."""
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"unparseable journal line: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError("journal line is not an object")
    revision, raw_ops, crc = obj.get("rev"), obj.get("ops"), obj.get("crc")
    if not isinstance(revision, int) or not isinstance(raw_ops, list) or not isinstance(crc, int):
        raise ValueError("journal line lacks rev/ops/crc")
    if _checksum(_dumps([revision, raw_ops])) != crc:
        raise ValueError(f"journal line for revision {revision} fails its CRC")
    ops: list[JournalOp] = []
    for raw in raw_ops:
        if not isinstance(raw, list) or not raw:
            raise ValueError("bad journal op")
        if (
            raw[0] == "put"
            and len(raw) == 4
            and isinstance(raw[1], str)
            and isinstance(raw[3], int)
        ):
            ops.append(Put(raw[1], _decode_value(raw[2]), raw[3]))
        elif raw[0] == "del" and len(raw) == 2 and isinstance(raw[1], str):
            ops.append(Delete(raw[1]))
        else:
            raise ValueError(f"bad journal op {raw!r}")
    return revision, ops


@dataclass(frozen=True, slots=True)
class JournalScan:
    entries: list[tuple[int, list[JournalOp]]]
    good_length: int  # bytes of the file that hold whole, valid lines
    torn: bool  # a partial or corrupt last line follows ``good_length``


def scan_journal(data: bytes) -> JournalScan:
    """Split a journal into verified entries; a bad *last* line is a torn write."""
    entries: list[tuple[int, list[JournalOp]]] = []
    pos = 0
    end = len(data)
    while pos < end:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return JournalScan(entries, pos, True)  # no newline: the write was cut short
        try:
            entries.append(decode_entry(data[pos:nl]))
        except ValueError as exc:
            if data[nl + 1 :].strip(b"\x00\n\r\t ") == b"":
                return JournalScan(entries, pos, True)
            raise StoreCorruptError(f"journal corrupt at byte {pos}: {exc}") from None
        pos = nl + 1
    return JournalScan(entries, pos, False)


def encode_snapshot(revision: int, kvs: Iterable[KeyValue]) -> bytes:
    rows = [
        [kv.key, _encode_value(kv.value), kv.create_revision, kv.mod_revision, kv.version, kv.lease]
        for kv in kvs
    ]
    crc = _checksum(_dumps([revision, rows]))
    return (_dumps({"rev": revision, "kvs": rows, "crc": crc}) + "\n").encode("utf-8")


def decode_snapshot(data: bytes) -> tuple[int, list[KeyValue]]:
    try:
        obj = json.loads(data)
        revision, rows, crc = obj["rev"], obj["kvs"], obj["crc"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise StoreCorruptError(f"unreadable snapshot: {exc}") from None
    if _checksum(_dumps([revision, rows])) != crc:
        raise StoreCorruptError("snapshot fails its CRC")
    try:
        kvs = [
            KeyValue(row[0], _decode_value(row[1]), row[2], row[3], row[4], row[5]) for row in rows
        ]
    except (ValueError, IndexError, TypeError) as exc:
        raise StoreCorruptError(f"bad snapshot row: {exc}") from None
    return revision, kvs
