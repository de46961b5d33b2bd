"""Strict decoders for Kafka message bodies, compiled from kafka-python's schemas.

kafka-python 3.0.12 ships Apache Kafka's JSON schemas, parsed into field trees, and a
decoder generated from them. Its decoder trusts its input, which a broker cannot:
string and bytes lengths are not checked against the buffer (a slice past the end
silently comes back short), unsigned varints have no length limit (a run of 0xff
bytes builds an ever larger integer: quadratic time), every non-empty tagged-field
section copies the rest of the message, and nulls are accepted where the schema
forbids them. This module walks the same field trees and generates decoders that
check what Kafka's generated Java code checks:

* a string/bytes/array length must fit in the bytes that remain, so a huge length
  field costs nothing (Kafka: "Tried to allocate a collection of size N, but there
  are only M bytes remaining");
* a negative length means null only where ``nullableVersions`` allows it;
* compact strings are at most 0x7fff bytes; unsigned varints at most 5 bytes;
* a known tagged field must use exactly the size its tag header announces;
* one message decodes to at most :data:`MAX_DECODED_ITEMS` array items, nested arrays
  and tagged fields included. The byte check alone lets a compact array of tiny
  structs cost 40-45x its size in Python objects (ElectLeaders v2 with 3-byte
  entries: 136 bytes of objects each), so a 3 MB request could hold 140 MB; Java
  objects are smaller, which is why Kafka needs no such cap. Past it the request is
  invalid, and Kafka closes the connection on an invalid request
  (:mod:`odradek.protocol.policy`).

The objects produced are kafka-python's own data classes (equal to what its decoder
returns for valid input), so kafka-python's encoders and ``.pyi`` field names apply.
Fields of type ``records`` are returned as zero-copy memoryviews of the input (the
record batches are neither copied nor parsed); other ``bytes`` fields are copied.
Strings are decoded as UTF-8 with replacement, as Java's ``new String(bytes, UTF_8)``
does.
"""

from __future__ import annotations

import struct
import threading
import uuid
from collections.abc import Callable
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs.types import (
    UUID,
    BitField,
    Bytes,
    FixedCodec,
    String,
)

from odradek.protocol.exceptions import InvalidRequestError

Decoder = Callable[[memoryview, int], tuple[Any, int]]

# What a decoder can raise on bad input besides InvalidRequestError: reads past the
# end of the buffer (struct.error, IndexError); nothing else is expected, but these
# are all converted so a malformed request can never escape as a stray exception.
PARSE_ERRORS: tuple[type[BaseException], ...] = (
    struct.error,
    IndexError,
    ValueError,
    OverflowError,
    UnicodeDecodeError,
    TypeError,
)

_ZERO_UUID = bytes(16)
_MAX_COMPACT_STRING = 0x7FFF

# Array items (all arrays of one message together) a decode may produce: far above any
# real client's request (a Fetch or OffsetCommit names the partitions of a broker:
# thousands), and at most ~70 MB of Python objects (module docstring).
MAX_DECODED_ITEMS = 500_000


class _ItemBudget(threading.local):
    """Items the decode running on this thread may still produce (decodes run on the
    event loop and in offload threads)."""

    left = MAX_DECODED_ITEMS


_BUDGET = _ItemBudget()


def read_uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes (Kafka's ``readUnsignedVarint``)."""
    value = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 35:
            raise InvalidRequestError("unsigned varint longer than 5 bytes")
    if value > 0xFFFFFFFF:
        raise InvalidRequestError("unsigned varint exceeds 32 bits")
    return value, pos


def _read_tags(data: memoryview, pos: int, obj: Any, table: dict[int, tuple[str, Decoder]]) -> int:
    """A non-empty tagged-field section: known tags decode into ``obj`` from exactly
    their announced bytes, unknown ones are kept raw in ``obj.unknown_tags``."""
    end = len(data)
    count, pos = read_uvarint(data, pos)
    if count > (end - pos) // 2:
        raise InvalidRequestError(f"{count} tagged fields cannot fit in {end - pos} bytes")
    for _ in range(count):
        tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        if size > end - pos:
            raise InvalidRequestError(f"tagged field {tag} of {size} bytes overruns the message")
        stop = pos + size
        entry = table.get(tag)
        if entry is None:
            if obj.unknown_tags is None:
                obj.unknown_tags = {}
            obj.unknown_tags[f"_{tag}"] = bytes(data[pos:stop])
        else:
            name, decode = entry
            value, used = decode(data[pos:stop], 0)
            if used != size:
                raise InvalidRequestError(f"tagged field {name} used {used} of {size} bytes")
            setattr(obj, name, value)
            if obj.tags is None:
                obj.tags = set()
            obj.tags.add(name)
        pos = stop
    return pos


class _Source:
    """Python source of one generated function plus the globals it refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.globs: dict[str, Any] = {
            "unpack_from": struct.unpack_from,
            "read_uvarint": read_uvarint,
            "_read_tags": _read_tags,
            "_Invalid": InvalidRequestError,
            "_new": object.__new__,
            "_UUID": uuid.UUID,
            "_ZERO_UUID": _ZERO_UUID,
            "_from_bits": BitField.from_32_bit_field,
            "_budget": _BUDGET,
        }
        self._count = 0

    def var(self, prefix: str) -> str:
        self._count += 1
        return f"_{prefix}{self._count}"

    def const(self, value: Any, prefix: str) -> str:
        name = self.var(prefix)
        self.globs[name] = value
        return name

    def emit(self, indent: str, line: str) -> None:
        self.lines.append(indent + line)

    def compile(self, name: str, filename: str) -> Any:
        exec(compile("\n".join(self.lines), filename, "exec"), self.globs)
        return self.globs[name]


def _fixed_fmt(field: Any) -> str | None:
    """The struct format character of a fixed-size scalar field, else None."""
    if field.is_array() or field.is_struct():
        return None
    codec: Any = field._type
    if isinstance(codec, type) and issubclass(codec, FixedCodec):
        return str(getattr(codec, "fmt"))  # noqa: B009 (kafka-python is untyped)
    return None


def _min_size(field: Any, version: int, flexible: bool) -> int:
    """Fewest bytes an encoding of ``field`` can take (for array count guards)."""
    if field.is_array():
        return 1 if flexible else 4
    if field.is_struct():
        if field.nullable_for_version_q(version):
            return 1
        return _struct_min_size(field, version, flexible)
    fmt = _fixed_fmt(field)
    if fmt is not None:
        return struct.calcsize(">" + fmt)
    codec = field._type
    if codec is UUID:
        return 16
    if codec is BitField:
        return 4
    if isinstance(codec, String):
        return 1 if flexible else 2
    return 1 if flexible else 4  # bytes / records


def _struct_min_size(struct_field: Any, version: int, flexible: bool) -> int:
    size = 1 if flexible else 0  # the tagged-field count
    for field in struct_field.untagged_fields(version):
        size += _min_size(field, version, flexible)
    return size


def _emit_length(src: _Source, ind: str, var: str, flexible: bool, fmt: str, width: int) -> None:
    """Read a length/count: signed INT16/INT32, or compact (unsigned varint - 1)."""
    if flexible:
        src.emit(ind, f"{var} = data[pos]")
        src.emit(ind, f"if {var} < 128:")
        src.emit(ind, "    pos += 1")
        src.emit(ind, "else:")
        src.emit(ind, f"    {var}, pos = read_uvarint(data, pos)")
        src.emit(ind, f"{var} -= 1")
    else:
        src.emit(ind, f'{var} = unpack_from("{fmt}", data, pos)[0]')
        src.emit(ind, f"pos += {width}")


def _emit_null_or_fail(
    src: _Source, ind: str, out: str, nullable: bool, path: str, what: str
) -> None:
    if nullable:
        src.emit(ind, f"{out} = None")
    else:
        src.emit(ind, f'raise _Invalid("non-nullable {what} {path} was serialized as null")')


def _emit_scalar(
    src: _Source, field: Any, out: str, ind: str, version: int, flexible: bool, path: str
) -> None:
    codec = field._type
    nullable = field.nullable_for_version_q(version)
    fmt = _fixed_fmt(field)
    if fmt is not None:
        size = struct.calcsize(">" + fmt)
        src.emit(ind, f'{out} = unpack_from(">{fmt}", data, pos)[0]')
        src.emit(ind, f"pos += {size}")
    elif codec is UUID:
        raw = src.var("raw")
        src.emit(ind, "if pos + 16 > end:")
        src.emit(ind, f'    raise _Invalid("uuid {path} overruns the message")')
        src.emit(ind, f"{raw} = bytes(data[pos:pos + 16])")
        src.emit(ind, "pos += 16")
        src.emit(ind, f"{out} = None if {raw} == _ZERO_UUID else _UUID(bytes={raw})")
    elif codec is BitField:
        raw = src.var("bits")
        src.emit(ind, f'{raw} = unpack_from(">I", data, pos)[0]')
        src.emit(ind, "pos += 4")
        src.emit(ind, f"{out} = _from_bits({raw})")
        src.emit(ind, f"if {out} == {{31}}: {out} = None")
    elif isinstance(codec, String):
        n = src.var("ln")
        _emit_length(src, ind, n, flexible, ">h", 2)
        src.emit(ind, f"if {n} < 0:")
        _emit_null_or_fail(src, ind + "    ", out, nullable, path, "string")
        if flexible:
            src.emit(ind, f"elif {n} > {_MAX_COMPACT_STRING}:")
            src.emit(ind, f'    raise _Invalid("string {path} has invalid length " + str({n}))')
        src.emit(ind, f"elif {n} > end - pos:")
        src.emit(ind, f'    raise _Invalid("string {path} overruns the message")')
        src.emit(ind, "else:")
        src.emit(ind, f'    {out} = str(data[pos:pos + {n}], "utf-8", "replace")')
        src.emit(ind, f"    pos += {n}")
    elif codec is Bytes:
        n = src.var("ln")
        _emit_length(src, ind, n, flexible, ">i", 4)
        src.emit(ind, f"if {n} < 0:")
        _emit_null_or_fail(src, ind + "    ", out, nullable, path, "bytes")
        src.emit(ind, f"elif {n} > end - pos:")
        src.emit(ind, f'    raise _Invalid("bytes {path} overrun the message")')
        src.emit(ind, "else:")
        if field.type_str == "records":
            src.emit(ind, f"    {out} = data[pos:pos + {n}]")  # zero-copy
        else:
            src.emit(ind, f"    {out} = bytes(data[pos:pos + {n}])")
        src.emit(ind, f"    pos += {n}")
    else:  # pragma: no cover - a schema type kafka-python added after 3.0.12
        raise TypeError(f"no decoder for field type {field.type_str}")


def _emit_array(
    src: _Source, field: Any, out: str, ind: str, version: int, flexible: bool, path: str
) -> None:
    n = src.var("n")
    elem = field.array_of
    min_size = max(1, _min_size(elem, version, flexible))
    _emit_length(src, ind, n, flexible, ">i", 4)
    src.emit(ind, f"if {n} < 0:")
    _emit_null_or_fail(src, ind + "    ", out, field.nullable_for_version_q(version), path, "array")
    src.emit(ind, f"elif {n} * {min_size} > end - pos:")
    src.emit(
        ind,
        f'    raise _Invalid("array {path} of " + str({n}) + " items cannot fit in "'
        f' + str(end - pos) + " bytes")',
    )
    src.emit(ind, "else:")
    body = ind + "    "
    src.emit(body, f"_budget.left -= {n}")
    src.emit(body, "if _budget.left < 0:")
    src.emit(
        body,
        f'    raise _Invalid("array {path} of " + str({n}) + " items exceeds the "'
        f' + "{MAX_DECODED_ITEMS} items one message may decode to")',
    )
    fmt = None if field.is_struct_array() else _fixed_fmt(elem)
    if fmt is not None:
        src.emit(body, f'{out} = list(unpack_from(">" + str({n}) + "{fmt}", data, pos))')
        src.emit(body, f"pos += {n} * {min_size}")
        return
    item = src.var("item")
    src.emit(body, f"{out} = []")
    src.emit(body, f"for _ in range({n}):")
    if field.is_struct_array():
        _emit_struct(
            src, elem, field.data_class, item, body + "    ", version, flexible, path + "[]"
        )
    else:
        _emit_scalar(src, elem, item, body + "    ", version, flexible, path + "[]")
    src.emit(body, f"    {out}.append({item})")


def _emit_field(
    src: _Source, field: Any, out: str, ind: str, version: int, flexible: bool, path: str
) -> None:
    if field.is_array():
        _emit_array(src, field, out, ind, version, flexible, path)
    elif field.is_struct():
        if field.nullable_for_version_q(version):
            # INT8 presence marker: negative means null (Kafka's generated readers)
            src.emit(ind, "if data[pos] >= 128:")
            src.emit(ind, "    pos += 1")
            src.emit(ind, f"    {out} = None")
            src.emit(ind, "else:")
            src.emit(ind, "    pos += 1")
            _emit_struct(src, field, field.data_class, out, ind + "    ", version, flexible, path)
        else:
            _emit_struct(src, field, field.data_class, out, ind, version, flexible, path)
    else:
        _emit_scalar(src, field, out, ind, version, flexible, path)


def _emit_struct(
    src: _Source,
    struct_field: Any,
    data_class: Any,
    out: str,
    ind: str,
    version: int,
    flexible: bool,
    path: str,
) -> None:
    dc = src.const(data_class, "dc")
    src.emit(ind, f"{out} = _new({dc})")
    src.emit(ind, f"{out}._version = {version}")
    src.emit(ind, f"{out}.tags = None")
    src.emit(ind, f"{out}.unknown_tags = None")
    if isinstance(data_class, type) and issubclass(data_class, ApiMessage):
        src.emit(ind, f"{out}._header = None")
        src.emit(ind, f"{out}._min_version = None")
        src.emit(ind, f"{out}._max_version = None")
    fields = struct_field.untagged_fields(version)
    i = 0
    while i < len(fields):
        run = []
        while i < len(fields) and _fixed_fmt(fields[i]) is not None:
            run.append(fields[i])
            i += 1
        if run:
            fmt = "".join(str(_fixed_fmt(f)) for f in run)
            names = [src.var("v") for _ in run]
            src.emit(ind, f'{", ".join(names)}, = unpack_from(">{fmt}", data, pos)')
            src.emit(ind, f"pos += {struct.calcsize('>' + fmt)}")
            for f, name in zip(run, names, strict=True):
                src.emit(ind, f"{out}.{f.name} = {name}")
            continue
        field = fields[i]
        i += 1
        value = src.var("v")
        _emit_field(src, field, value, ind, version, flexible, f"{path}.{field.name}")
        src.emit(ind, f"{out}.{field.name} = {value}")
    if flexible:
        table = {
            field.tag: (field.name, _compile_field(field, version, f"{path}.{field.name}"))
            for field in struct_field.tagged_fields(version)._fields
        }
        tags = src.const(table, "tags")
        src.emit(ind, "if data[pos] == 0:")
        src.emit(ind, "    pos += 1")
        src.emit(ind, "else:")
        src.emit(ind, f"    pos = _read_tags(data, pos, {out}, {tags})")


def _compile_field(field: Any, version: int, path: str) -> Decoder:
    """A decoder for one tagged field's value (always the compact encoding)."""
    src = _Source()
    src.lines.append("def _decode(data, pos):")
    src.emit("    ", "end = len(data)")
    _emit_field(src, field, "value", "    ", version, True, path)
    src.emit("    ", "return value, pos")
    decoder: Decoder = src.compile("_decode", f"<odradek-decode:{path}_v{version}>")
    return decoder


_CACHE: dict[tuple[Any, int, bool], Decoder] = {}


def compiled_decoder(data_class: Any, version: int, flexible: bool) -> Decoder:
    """``decode(data: memoryview, pos) -> (obj, end_pos)`` for a kafka-python message
    (or ApiData) class at ``version``; compiled on first use and cached."""
    key = (data_class, version, flexible)
    decoder = _CACHE.get(key)
    if decoder is None:
        src = _Source()
        src.lines.append("def _decode(data, pos):")
        src.emit("    ", "end = len(data)")
        _emit_struct(
            src, data_class._struct, data_class, "obj", "    ", version, flexible, data_class.name
        )
        src.emit("    ", "return obj, pos")
        decoder = src.compile("_decode", f"<odradek-decode:{data_class.name}_v{version}>")
        _CACHE[key] = decoder
    return decoder


def as_byte_view(data: bytes | bytearray | memoryview) -> memoryview:
    """A flat unsigned-byte memoryview, the only input the decoders accept."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def decode_struct(
    data_class: Any,
    version: int,
    flexible: bool,
    data: bytes | bytearray | memoryview,
    *,
    exact: bool = True,
    max_items: int = MAX_DECODED_ITEMS,
) -> Any:
    """Decode one ``data_class`` body. With ``exact`` every byte must be consumed
    (Kafka rejects trailing bytes in a request frame); at most ``max_items`` array
    items in all (module docstring)."""
    view = as_byte_view(data)
    decoder = compiled_decoder(data_class, version, flexible)
    _BUDGET.left = max_items
    try:
        obj, pos = decoder(view, 0)
    except InvalidRequestError:
        raise
    except PARSE_ERRORS as exc:
        raise InvalidRequestError(
            f"malformed {data_class.name} v{version}: {type(exc).__name__}: {exc}"
        ) from exc
    if exact and pos != len(view):
        raise InvalidRequestError(
            f"{data_class.name} v{version} has {len(view) - pos} trailing bytes"
        )
    return obj
