"""Records as console text, both ways, with Kafka's property names (pure code, no I/O).

- :class:`LineFormat` reads one input line into (headers, key, value) like
  kafka-console-producer's ``LineMessageReader``: ``parse.headers`` / ``parse.key``
  split the line at ``headers.delimiter`` / ``key.separator`` (headers first, then key,
  then value); ``null.marker`` turns a matching key or value into null;
  ``ignore.error`` makes a missing separator mean "no key" instead of an error.
- :class:`MessageFormat` writes records like kafka-console-consumer's
  ``DefaultMessageFormatter``: optional ``CreateTime:<ts>``, ``Partition:<p>``,
  ``Offset:<o>``, headers (``k:v,k2:v2`` or ``NO_HEADERS``) and key, each followed by
  ``key.separator``, then the value and ``line.separator``; null prints ``null.literal``.

Everything works on bytes: separators are UTF-8 encoded, so splitting bytes gives the
same result as splitting the decoded text and binary values pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

_TRUE = "true"


class RecordFormatError(ValueError):
    """A line or a property that cannot be used (Kafka: KafkaException in the reader)."""


def _flag(props: dict[str, str], name: str, default: bool) -> bool:
    if name not in props:
        return default
    return props[name].strip().lower() == _TRUE


def _text(props: dict[str, str], name: str, default: str) -> bytes:
    return props.get(name, default).encode()


def _check_known(props: dict[str, str], known: Iterable[str], what: str) -> None:
    unknown = sorted(set(props) - set(known))
    if unknown:
        raise RecordFormatError(
            f"Unknown {what} propert{'y' if len(unknown) == 1 else 'ies'}: "
            f"{', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )


@dataclass(frozen=True)
class ParsedLine:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


LINE_PROPERTIES = (
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
    "ignore.error",
    "null.marker",
)


@dataclass(frozen=True)
class LineFormat:
    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    ignore_error: bool = False
    null_marker: bytes | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        _check_known(props, LINE_PROPERTIES, "producer line reader")
        fmt = cls(
            parse_key=_flag(props, "parse.key", False),
            key_separator=_text(props, "key.separator", "\t"),
            parse_headers=_flag(props, "parse.headers", False),
            headers_delimiter=_text(props, "headers.delimiter", "\t"),
            headers_separator=_text(props, "headers.separator", ","),
            headers_key_separator=_text(props, "headers.key.separator", ":"),
            ignore_error=_flag(props, "ignore.error", False),
            null_marker=props["null.marker"].encode() if "null.marker" in props else None,
        )
        fmt._validate()
        return fmt

    def _validate(self) -> None:
        # The same pairwise checks as Kafka's reader: equal separators make lines ambiguous.
        if not self.key_separator:
            raise RecordFormatError("key.separator may not be empty")
        if not self.headers_delimiter or not self.headers_separator:
            raise RecordFormatError("headers.delimiter and headers.separator may not be empty")
        if not self.headers_key_separator:
            raise RecordFormatError("headers.key.separator may not be empty")
        pairs = (
            (
                "headers.delimiter",
                self.headers_delimiter,
                "headers.separator",
                self.headers_separator,
            ),
            (
                "headers.delimiter",
                self.headers_delimiter,
                "headers.key.separator",
                self.headers_key_separator,
            ),
            (
                "headers.separator",
                self.headers_separator,
                "headers.key.separator",
                self.headers_key_separator,
            ),
        )
        for a_name, a, b_name, b in pairs:
            if a == b:
                raise RecordFormatError(f"{a_name} and {b_name} may not be equal")
        if self.null_marker is not None:
            for name, sep in (
                ("key.separator", self.key_separator),
                ("headers.separator", self.headers_separator),
                ("headers.delimiter", self.headers_delimiter),
                ("headers.key.separator", self.headers_key_separator),
            ):
                if sep == self.null_marker:
                    raise RecordFormatError(f"null.marker and {name} may not be equal")

    def _split(self, line: bytes, start: int, sep: bytes, what: str, number: int) -> bytes | None:
        index = line.find(sep, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise RecordFormatError(
                f"No {what} found on line number {number}: '{line.decode('utf-8', 'replace')}'"
            )
        return line[start:index]

    def parse(self, line: bytes, number: int) -> ParsedLine:
        """One input line (without its line ending); ``number`` counts from 1 for messages."""
        start = 0
        headers_text: bytes | None = None
        if self.parse_headers:
            headers_text = self._split(line, 0, self.headers_delimiter, "headers delimiter", number)
            if headers_text is not None:
                start = len(headers_text) + len(self.headers_delimiter)
        key: bytes | None = None
        if self.parse_key:
            key = self._split(line, start, self.key_separator, "key separator", number)
            if key is not None:
                start += len(key) + len(self.key_separator)
        value: bytes | None = line[start:] if start else line
        marker = self.null_marker
        if marker is not None:
            if key == marker:
                key = None
            if value == marker:
                value = None
        headers: list[tuple[str, bytes]] = []
        if headers_text is not None and headers_text != marker:
            headers = self._headers(headers_text, number)
        return ParsedLine(key, value, headers)

    def _headers(self, text: bytes, number: int) -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        for pair in text.split(self.headers_separator):
            index = pair.find(self.headers_key_separator)
            if index < 0:
                if self.ignore_error:
                    raise RecordFormatError(
                        f"Header '{pair.decode('utf-8', 'replace')}' on line number {number} has "
                        "no value; null header values are not supported by this producer"
                    )
                raise RecordFormatError(
                    f"No header key separator found in pair "
                    f"'{pair.decode('utf-8', 'replace')}' on line number {number}"
                )
            name = pair[:index]
            value = pair[index + len(self.headers_key_separator) :]
            if self.null_marker is not None and name == self.null_marker:
                raise RecordFormatError(
                    f"Header keys should not be equal to the null marker "
                    f"'{self.null_marker.decode()}' as they can't be null"
                )
            if self.null_marker is not None and value == self.null_marker:
                raise RecordFormatError(
                    f"Header '{name.decode('utf-8', 'replace')}' on line number {number} is "
                    "null; null header values are not supported by this producer"
                )
            out.append((name.decode("utf-8", "replace"), value))
        return out


class ConsumedRecord(Protocol):
    """The fields of kafka-python's ``ConsumerRecord`` the formatter reads."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def timestamp_type(self) -> int | None: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


MESSAGE_PROPERTIES = (
    "print.timestamp",
    "print.key",
    "print.value",
    "print.partition",
    "print.offset",
    "print.headers",
    "key.separator",
    "line.separator",
    "headers.separator",
    "null.literal",
)

_TIMESTAMP_TYPES = {0: b"CreateTime:", 1: b"LogAppendTime:"}


@dataclass(frozen=True)
class MessageFormat:
    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MessageFormat:
        _check_known(props, MESSAGE_PROPERTIES, "consumer formatter")
        return cls(
            print_timestamp=_flag(props, "print.timestamp", False),
            print_key=_flag(props, "print.key", False),
            print_value=_flag(props, "print.value", True),
            print_partition=_flag(props, "print.partition", False),
            print_offset=_flag(props, "print.offset", False),
            print_headers=_flag(props, "print.headers", False),
            key_separator=_text(props, "key.separator", "\t"),
            line_separator=_text(props, "line.separator", "\n"),
            headers_separator=_text(props, "headers.separator", ","),
            null_literal=_text(props, "null.literal", "null"),
        )

    @property
    def value_only(self) -> bool:
        return self.print_value and not (
            self.print_timestamp
            or self.print_key
            or self.print_partition
            or self.print_offset
            or self.print_headers
        )

    def format(self, records: Sequence[ConsumedRecord]) -> bytes:
        """The bytes to write for a run of records (one join, no per-record writes)."""
        null = self.null_literal
        sep = self.line_separator
        if self.value_only:
            values = [null if r.value is None else r.value for r in records]
            if not values:
                return b""
            return sep.join(values) + sep
        parts: list[bytes] = []
        for record in records:
            self._columns(record, parts)
        return b"".join(parts)

    def _columns(self, record: ConsumedRecord, parts: list[bytes]) -> None:
        columns: list[bytes] = []
        if self.print_timestamp:
            ts = record.timestamp
            prefix = _TIMESTAMP_TYPES.get(record.timestamp_type if record.timestamp_type else 0)
            if ts is None or ts < 0 or prefix is None:
                columns.append(b"NO_TIMESTAMP")
            else:
                columns.append(prefix + str(ts).encode())
        if self.print_partition:
            columns.append(b"Partition:" + str(record.partition).encode())
        if self.print_offset:
            columns.append(b"Offset:" + str(record.offset).encode())
        if self.print_headers:
            if record.headers:
                columns.append(
                    self.headers_separator.join(
                        name.encode() + b":" + (self.null_literal if value is None else value)
                        for name, value in record.headers
                    )
                )
            else:
                columns.append(b"NO_HEADERS")
        if self.print_key:
            columns.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            columns.append(self.null_literal if record.value is None else record.value)
        if not columns:
            return
        parts.append(self.key_separator.join(columns))
        parts.append(self.line_separator)
