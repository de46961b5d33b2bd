"""Kafka's message field encodings for version-prefixed records of internal topics.

Kafka writes the keys and values of ``__consumer_offsets`` and ``__transaction_state``
with its generated message classes (``MessageUtil.toVersionPrefixedBytes``): an INT16
version, then the fields of that version. Big-endian; ``STRING`` = INT16 length + UTF-8
(``NULLABLE_STRING`` the same with length -1 for null); ``BYTES`` and arrays = INT32
length (-1: null). Flexible versions use the compact forms (UNSIGNED_VARINT length + 1,
0 for null) and end every struct with tagged fields: UNSIGNED_VARINT count, then per
field UNSIGNED_VARINT tag, UNSIGNED_VARINT size, the bytes; tags in ascending order.

Pure code. Every decode error is the reader's ``error`` class (a ``ValueError``), so a
corrupt record fails loudly where it is read.
"""

from __future__ import annotations

import struct

from odradek.records.varint import decode_unsigned_varint, write_unsigned_varint

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class MessageFieldError(ValueError):
    """A field that does not parse (or cannot be written)."""

    kafka_error = "CORRUPT_MESSAGE"


class FieldWriter:
    """Appends fields to a version-prefixed record."""

    __slots__ = ("flexible", "out")
    error: type[ValueError] = MessageFieldError

    def __init__(self, version: int, flexible: bool = False) -> None:
        self.out = bytearray(_H.pack(version))
        self.flexible = flexible

    def int8(self, v: int) -> None:
        self.out += _B.pack(v)

    def int16(self, v: int) -> None:
        self.out += _H.pack(v)

    def int32(self, v: int) -> None:
        self.out += _I.pack(v)

    def int64(self, v: int) -> None:
        self.out += _Q.pack(v)

    def string(self, v: str | None) -> None:
        if v is None:
            if self.flexible:
                self.out += b"\x00"
            else:
                self.int16(-1)
            return
        raw = v.encode()
        if len(raw) > 0x7FFF:
            raise self.error(f"string of {len(raw)} bytes is too long")
        if self.flexible:
            write_unsigned_varint(self.out, len(raw) + 1)
        else:
            self.int16(len(raw))
        self.out += raw

    def bytes_(self, v: bytes) -> None:
        if self.flexible:
            write_unsigned_varint(self.out, len(v) + 1)
        else:
            self.int32(len(v))
        self.out += v

    def array_len(self, n: int | None) -> None:
        """``None``: a null array."""
        if self.flexible:
            write_unsigned_varint(self.out, 0 if n is None else n + 1)
        else:
            self.int32(-1 if n is None else n)

    def tags(self, fields: dict[int, bytes] | None = None) -> None:
        """The tagged-field section (flexible versions only): ``{tag: encoded value}``."""
        if not self.flexible:
            return
        fields = fields or {}
        write_unsigned_varint(self.out, len(fields))
        for tag in sorted(fields):
            write_unsigned_varint(self.out, tag)
            write_unsigned_varint(self.out, len(fields[tag]))
            self.out += fields[tag]


class FieldReader:
    """Reads fields of a version-prefixed record, starting after the version."""

    __slots__ = ("buf", "flexible", "pos")
    error: type[ValueError] = MessageFieldError

    def __init__(self, buf: bytes | bytearray | memoryview, flexible: bool = False) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.flexible = flexible

    def _need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.error(f"{what}: need {n} bytes at {self.pos}, record has {len(self.buf)}")

    def _fixed(self, s: struct.Struct, what: str) -> int:
        self._need(s.size, what)
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def int8(self) -> int:
        return self._fixed(_B, "int8")

    def int16(self) -> int:
        return self._fixed(_H, "int16")

    def int32(self) -> int:
        return self._fixed(_I, "int32")

    def int64(self) -> int:
        return self._fixed(_Q, "int64")

    def uvarint(self) -> int:
        try:
            v, self.pos = decode_unsigned_varint(self.buf, self.pos)
        except ValueError as exc:
            raise self.error(str(exc)) from None
        return v

    def _length(self, classic: int) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int16() if classic == 2 else self.int32()

    def nullable_string(self) -> str | None:
        n = self._length(2)
        if n < 0:
            return None
        self._need(n, "string")
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        v = self.nullable_string()
        if v is None:
            raise self.error("null where a string is required")
        return v

    def bytes_(self) -> bytes:
        n = self._length(4)
        if n < 0:
            return b""
        self._need(n, "bytes")
        raw = self.buf[self.pos : self.pos + n].tobytes()
        self.pos += n
        return raw

    def nullable_array_len(self) -> int | None:
        n = self._length(4)
        return None if n < 0 else n

    def array_len(self) -> int:
        n = self.nullable_array_len()
        if n is None:
            raise self.error("null array")
        return n

    def tags(self) -> dict[int, bytes]:
        """The tagged fields of the struct just read (empty for classic versions)."""
        if not self.flexible:
            return {}
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            self._need(size, "tagged field")
            out[tag] = self.buf[self.pos : self.pos + size].tobytes()
            self.pos += size
        return out

    def skip_tags(self) -> None:
        self.tags()

    def done(self, strict: bool) -> None:
        if strict and self.pos != len(self.buf):
            raise self.error(f"{len(self.buf) - self.pos} trailing bytes after the record")
