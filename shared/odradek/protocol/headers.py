"""Request and response headers (the bytes between the frame size and the body).

Request header layout (big-endian)::

    v1:  api_key INT16 | api_version INT16 | correlation_id INT32
         | client_id NULLABLE_STRING (INT16 length, -1 = null)
    v2:  v1 fields | tagged fields (UNSIGNED_VARINT count, then per field
         UNSIGNED_VARINT tag, UNSIGNED_VARINT size, size bytes)

The client_id stays a classic INT16-length string even in v2 (Kafka's
RequestHeader.json: ``"flexibleVersions": "none"`` on ClientId). The version of the
header follows the API's flexible versions (:mod:`odradek.protocol.versions`).

Response header layout::

    v0:  correlation_id INT32
    v1:  correlation_id INT32 | tagged fields (we write none: one 0x00 byte)
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.protocol.decoder import PARSE_ERRORS, as_byte_view, read_uvarint
from odradek.protocol.exceptions import InvalidRequestError, UnknownApiKeyError
from odradek.protocol.versions import request_header_version

_FIXED = struct.Struct(">hhi")
_FIXED_AND_LENGTH = struct.Struct(">hhih")  # + the client id's INT16 length
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class RequestHeader(NamedTuple):
    """A parsed request header. ``api_key`` is the raw INT16 (compare it with
    :class:`~odradek.protocol.api_keys.ApiKey`, which is an IntEnum); unknown keys
    are kept so the connection can log them. Immutable; a named tuple because one is
    built per request and a frozen dataclass's ``__init__`` cost several times more
    (issue 18)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    header_version: int = 1
    tagged_fields: tuple[tuple[int, bytes], ...] = ()


# Per-request work kept small (issue 18: the gateway parses one header per request,
# thousands a second): the header version by (api_key, api_version) and the client id
# by its bytes are looked up, not recomputed. Both bounded: cleared when full (a client
# sending made-up keys or ids costs a recomputation, never memory).
_HEADER_VERSIONS: dict[tuple[int, int], int] = {}
_CLIENT_IDS: dict[bytes, str] = {}
_MAX_CACHED = 4096
# Longer client ids are decoded each time: 4,096 ids of up to 32 KiB each would be a
# quarter GiB a client could make the gateway hold (issue 14's bounded memory).
_MAX_CACHED_CLIENT_ID = 255


def _header_version(api_key: int, api_version: int) -> int:
    key = (api_key, api_version)
    found = _HEADER_VERSIONS.get(key)
    if found is None:
        try:
            found = request_header_version(api_key, api_version)
        except UnknownApiKeyError:
            found = 1
        if len(_HEADER_VERSIONS) >= _MAX_CACHED:
            _HEADER_VERSIONS.clear()
        _HEADER_VERSIONS[key] = found
    return found


def parse_request_header(buf: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header at the start of a frame payload; returns it and the offset
    of the body. The header version comes from the API's flexible versions; for an
    API key without a schema it is v1, so the correlation id can still be read."""
    view = as_byte_view(buf)
    size = len(view)
    if size < 10:  # the fixed fields and the client id's length
        if size < _FIXED.size:
            raise InvalidRequestError(f"request header needs 8 bytes, frame has {size}")
        api_key, api_version, correlation_id = _FIXED.unpack_from(view, 0)
        raise _header_error(
            InvalidRequestError("malformed request header: client_id length cut short"),
            api_key,
            api_version,
            correlation_id,
        )
    api_key, api_version, correlation_id, length = _FIXED_AND_LENGTH.unpack_from(view, 0)
    header_version = _header_version(api_key, api_version)
    pos = 10
    client_id: str | None = None
    if length >= 0:
        end = pos + length
        if end > size:
            raise _header_error(
                InvalidRequestError("client_id overruns the frame"),
                api_key,
                api_version,
                correlation_id,
            )
        raw = bytes(view[pos:end])
        client_id = _CLIENT_IDS.get(raw)
        if client_id is None:
            client_id = str(raw, "utf-8", "replace")
            if length <= _MAX_CACHED_CLIENT_ID:
                if len(_CLIENT_IDS) >= _MAX_CACHED:
                    _CLIENT_IDS.clear()
                _CLIENT_IDS[raw] = client_id
        pos = end
    tags: tuple[tuple[int, bytes], ...] = ()
    if header_version >= 2:
        if pos < size and view[pos] == 0:
            pos += 1  # no tagged fields: what every client sends
        else:
            context = {
                "api_key": api_key,
                "api_version": api_version,
                "correlation_id": correlation_id,
            }
            try:
                tags, pos = _parse_tags(view, pos, context)
            except InvalidRequestError as exc:
                _header_error(exc, api_key, api_version, correlation_id)
                raise
            except PARSE_ERRORS as exc:
                raise _header_error(
                    InvalidRequestError(f"malformed request header: {exc}", **context),
                    api_key,
                    api_version,
                    correlation_id,
                ) from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version, tags), pos


def _header_error(
    exc: InvalidRequestError, api_key: int, api_version: int, correlation_id: int
) -> InvalidRequestError:
    exc.api_key, exc.api_version, exc.correlation_id = api_key, api_version, correlation_id
    return exc


def _parse_tags(
    view: memoryview, pos: int, context: dict[str, int]
) -> tuple[tuple[tuple[int, bytes], ...], int]:
    count, pos = read_uvarint(view, pos)
    if count == 0:
        return (), pos
    if count > (len(view) - pos) // 2:
        raise InvalidRequestError("header tagged fields overrun the frame", **context)
    tags = []
    for _ in range(count):
        tag, pos = read_uvarint(view, pos)
        size, pos = read_uvarint(view, pos)
        if size > len(view) - pos:
            raise InvalidRequestError("header tagged field overruns the frame", **context)
        tags.append((tag, bytes(view[pos : pos + size])))
        pos += size
    return tuple(tags), pos


def encode_request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    header_version: int | None = None,
) -> bytes:
    """Header bytes for a request we send (tools and tests talking to the gateway)."""
    if header_version is None:
        header_version = request_header_version(api_key, api_version)
    parts = [_FIXED.pack(api_key, api_version, correlation_id)]
    if client_id is None:
        parts.append(_INT16.pack(-1))
    else:
        raw = client_id.encode("utf-8")
        parts.append(_INT16.pack(len(raw)))
        parts.append(raw)
    if header_version >= 2:
        parts.append(b"\x00")
    return b"".join(parts)


_RESPONSE_V1_TAIL = b"\x00"


def encode_response_header(correlation_id: int, version: int) -> bytes:
    """v0 is the correlation id alone; v1 adds an empty tagged-field section."""
    head = _INT32.pack(correlation_id)
    return head + _RESPONSE_V1_TAIL if version >= 1 else head


def parse_response_header(buf: bytes | bytearray | memoryview, version: int) -> tuple[int, int]:
    """(correlation_id, body offset) of a response payload; tagged fields skipped."""
    view = as_byte_view(buf)
    try:
        (correlation_id,) = _INT32.unpack_from(view, 0)
        pos = 4
        if version >= 1:
            _, pos = _parse_tags(view, pos, {"correlation_id": correlation_id})
    except InvalidRequestError:
        raise
    except PARSE_ERRORS as exc:
        raise InvalidRequestError(f"malformed response header: {exc}") from exc
    return correlation_id, pos
