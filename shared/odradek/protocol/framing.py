"""Kafka's length-prefixed framing, sans-io.

Byte layout of one frame on a connection (both directions)::

    offset  size  field
         0     4  size      INT32, big-endian: number of bytes that follow
         4  size  payload   request or response header + body

Invariants: ``0 <= size <= max_frame_bytes`` (Kafka's ``socket.request.max.bytes``,
by default the gateway catalog's). The limit is checked as soon as the 4 size bytes are in, before
any of the payload is buffered, so a bogus prefix (an HTTP ``GET `` reads as 1.1 GB)
costs nothing. After an error the decoder stays failed: the stream position is lost
and the connection has to be closed.

Memory: bytes of a frame that arrive in several chunks are kept as the chunks
themselves and joined once when the frame is complete (one copy, never quadratic);
frames that arrive whole inside one chunk are returned as zero-copy memoryviews of
that chunk.
"""

from __future__ import annotations

import struct

from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.protocol.exceptions import FrameTooLargeError, InvalidFrameError

DEFAULT_MAX_FRAME_BYTES = GATEWAY_CONFIGS.int("socket.request.max.bytes")

_SIZE = struct.Struct(">i")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix ``payload`` with its INT32 size."""
    return _SIZE.pack(len(payload)) + bytes(payload)


class FrameDecoder:
    """Splits a byte stream into frame payloads (without the size prefix)."""

    __slots__ = ("_chunks", "_failed", "_have", "_head", "_need", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._head = b""  # 0-3 bytes of a size prefix not yet complete
        self._need = -1  # payload size of the frame being accumulated, -1 if none
        self._have = 0  # payload bytes of that frame buffered so far
        self._chunks: list[bytes | memoryview] = []
        self._failed: Exception | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (for connection memory accounting)."""
        return len(self._head) + self._have

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview | bytes]:
        """Every frame completed by ``data``, in order. The returned memoryviews refer
        to ``data``; a bytearray/memoryview argument is copied once first so later
        reuse of the caller's buffer cannot change them."""
        if self._failed is not None:
            raise self._failed
        if not isinstance(data, bytes):
            data = bytes(data)
        try:
            return self._feed(data)
        except InvalidFrameError as exc:
            self._failed = exc
            self._chunks = []
            raise

    def _check(self, size: int) -> int:
        if size < 0:
            raise InvalidFrameError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameTooLargeError(size, self.max_frame_bytes)
        return size

    def _feed(self, data: bytes) -> list[memoryview | bytes]:
        frames: list[memoryview | bytes] = []
        view = memoryview(data)
        end = len(view)
        pos = 0
        if self._head:
            take = 4 - len(self._head)
            if end < take:
                self._head += data
                return frames
            head = self._head + data[:take]
            self._head = b""
            pos = take
            self._need = self._check(_SIZE.unpack(head)[0])
            self._have = 0
        if self._need >= 0:
            missing = self._need - self._have
            if end - pos < missing:
                if end > pos:
                    self._chunks.append(view[pos:] if pos else data)
                    self._have += end - pos
                return frames
            self._chunks.append(view[pos : pos + missing])
            frames.append(b"".join(self._chunks))
            self._chunks = []
            self._need = -1
            self._have = 0
            pos += missing
        unpack_from = _SIZE.unpack_from
        while end - pos >= 4:
            size = self._check(unpack_from(view, pos)[0])
            start = pos + 4
            if end - start >= size:
                frames.append(view[start : start + size])
                pos = start + size
            else:
                self._need = size
                self._have = end - start
                if self._have:
                    self._chunks.append(view[start:])
                return frames
        if pos < end:
            self._head = data[pos:]
        return frames
