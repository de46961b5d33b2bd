"""Sample messages for the protocol tests: every field present at a version gets a
distinct non-default value, so a codec that drops, reorders or mis-sizes any field
changes the bytes."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from kafka.protocol.schemas.fields.codecs.types import (
    UUID,
    BitField,
    Boolean,
    Bytes,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    String,
    UnsignedInt16,
)

from odradek.protocol import catalog
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.versions import SUPPORTED


class _Values:
    def __init__(self, seed: int) -> None:
        self._counter = itertools.count(seed)

    def scalar(self, field: Any) -> Any:
        k = next(self._counter)
        codec = field._type
        if codec is Int8:
            return k % 100 + 1
        if codec in (Int16, UnsignedInt16):
            return k % 30000 + 1
        if codec is Int32:
            return k * 1009 + 1
        if codec is Int64:
            return k * 1_000_000_007 + 1
        if codec is Boolean:
            return True
        if codec is Float64:
            return k + 0.5
        if codec is UUID:
            return uuid.UUID(int=k + 1)
        if codec is BitField:  # kafka-python's view of authorized-operations INT32s
            return {k % 8 + 1, 9}
        if isinstance(codec, String):
            return f"s{k}-é"
        if codec is Bytes:
            if field.type_str == "records":
                return bytes(range(k % 50, k % 50 + 70))
            return b"b%d" % k
        raise TypeError(field.type_str)

    def field(self, field: Any, version: int) -> Any:
        if field.is_struct_array():
            return [self.struct(field.array_of, field.data_class, version) for _ in range(2)]
        if field.is_array():
            return [self.scalar(field.array_of) for _ in range(2)]
        if field.is_struct():
            return self.struct(field, field.data_class, version)
        return self.scalar(field)

    def struct(self, struct_field: Any, data_class: Any, version: int, top: bool = False) -> Any:
        values = {
            f.name: self.field(f, version) for f in struct_field._fields if f.for_version_q(version)
        }
        if top:  # messages compare their version too
            return data_class(version=version, **values)
        return data_class(**values)


def sample(cls: Any, version: int, seed: int = 3) -> Any:
    """An instance of the kafka-python message class ``cls`` with every field of
    ``version`` (tagged fields included) set to a non-default value."""
    return _Values(seed).struct(cls._struct, cls, version, top=True)


def supported_versions() -> list[tuple[ApiKey, int]]:
    return [(key, v) for key, (low, high) in SUPPORTED.items() for v in range(low, high + 1)]


def request_sample(key: ApiKey, version: int, seed: int = 3) -> Any:
    return sample(catalog.REQUESTS[key], version, seed)


def response_sample(key: ApiKey, version: int, seed: int = 3) -> Any:
    return sample(catalog.RESPONSES[key], version, seed)
