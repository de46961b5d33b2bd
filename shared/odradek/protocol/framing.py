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

Read in place (``get_buffer``/``buffer_updated``, for an ``asyncio.BufferedProtocol``):
the transport writes into buffers the decoder hands out, so a TLS transport decrypts
straight into them instead of into a new bytes object per read that the decoder then
joins (docs/security.md, "Throughput"). Each read gets a new buffer of about the size
the transport offers (frames inside it are returned as views, so it is never reused);
once a frame of ``DIRECT_READ_BYTES`` or more has begun, the rest of it lands in that
frame's own buffer, which is returned whole when full. A small read (a one-record
request) is copied into bytes instead and its buffer handed out again.

At most ``limit`` frames per call when the caller gives one (the requests its
connection may still queue): a 256 KiB read of 30-byte pipelined requests is thousands
of frames, milliseconds of splitting on one callback and far past
``queued.max.requests``. The bytes after the last frame returned are kept unparsed
(:attr:`unparsed_bytes`, a view of the read, not a copy) until :meth:`more` asks for
the next frames; bytes fed meanwhile go after them.
"""

from __future__ import annotations

import struct

from odradek.byte_buffers import receive_buffer
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.protocol.exceptions import FrameTooLargeError, InvalidFrameError

DEFAULT_MAX_FRAME_BYTES = GATEWAY_CONFIGS.int("socket.request.max.bytes")

_SIZE = struct.Struct(">i")
# A frame at least this large is read into a buffer of its own (read in place); smaller
# ones are joined from their chunks, which costs less than a read per frame.
DIRECT_READ_BYTES = 16 * 1024
# The size of a read's new buffer: what the transport offers, within these bounds
# (-1, "any", from a plain asyncio transport: the default).
READ_MIN_BYTES = 1024
READ_DEFAULT_BYTES = 64 * 1024
READ_MAX_BYTES = 256 * 1024
# A read smaller than this is copied into bytes and its buffer handed out again for the
# next read: for a one-record request the copy costs less than a new buffer.
REUSE_BELOW_BYTES = 4 * 1024


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix ``payload`` with its INT32 size."""
    return _SIZE.pack(len(payload)) + bytes(payload)


class FrameDecoder:
    """Splits a byte stream into frame payloads (without the size prefix)."""

    __slots__ = (
        "_body",
        "_chunks",
        "_failed",
        "_fresh",
        "_have",
        "_head",
        "_need",
        "_rest",
        "_spare",
        "max_frame_bytes",
    )

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._head = b""  # 0-3 bytes of a size prefix not yet complete
        self._need = -1  # payload size of the frame being accumulated, -1 if none
        self._have = 0  # payload bytes of that frame buffered so far
        self._chunks: list[bytes | memoryview] = []
        self._failed: Exception | None = None
        self._body: bytearray | None = None  # that frame's own buffer (read in place)
        self._fresh: bytearray | None = None  # the buffer handed out by get_buffer
        self._rest: memoryview | None = None  # bytes not parsed yet (past a call's limit)
        self._spare: bytearray | None = None  # a read buffer nothing refers to any more

    @property
    def buffered_bytes(self) -> int:
        """Bytes held (for connection memory accounting): those of an incomplete frame
        (a frame read in place holds its whole buffer) and those not parsed yet."""
        return self.partial_bytes + self.unparsed_bytes

    @property
    def partial_bytes(self) -> int:
        """Bytes of a frame begun and not complete (a request still being read)."""
        return len(self._head) + (self._need if self._body is not None else self._have)

    @property
    def unparsed_bytes(self) -> int:
        """Bytes read but not parsed yet: a call's ``limit`` was reached before them."""
        return len(self._rest) if self._rest is not None else 0

    def more(self, limit: int | None = None) -> list[memoryview | bytes]:
        """The next frames (at most ``limit``) of the bytes kept unparsed."""
        if self._failed is not None:
            raise self._failed
        rest, self._rest = self._rest, None
        if rest is None:
            return []
        return self._guarded(rest, limit)

    def _guarded(self, data: bytes | memoryview, limit: int | None) -> list[memoryview | bytes]:
        try:
            return self._feed(data, limit)
        except InvalidFrameError as exc:
            self._failed = exc
            self._chunks = []
            self._rest = None
            raise

    @property
    def missing_bytes(self) -> int:
        """Bytes the frame being read in place still needs (with :attr:`filling_frame`)."""
        return self._need - self._have

    @property
    def filling_frame(self) -> bool:
        """Whether the next read lands in a frame's own buffer (not a new one)."""
        return self._body is not None

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the transport should write the next bytes (``BufferedProtocol.get_buffer``).
        Follow with :meth:`buffer_updated` (or :meth:`take_read`) before asking again."""
        if self._failed is not None:
            raise self._failed
        if self._need >= DIRECT_READ_BYTES:
            if self._body is None:
                body = receive_buffer(self._need)  # returned only when full
                into = memoryview(body)  # (a bytearray slice copies a view first)
                pos = 0
                for chunk in self._chunks:
                    into[pos : pos + len(chunk)] = chunk
                    pos += len(chunk)
                self._chunks = []
                self._body = body
            return memoryview(self._body)[self._have :]
        size = READ_DEFAULT_BYTES if sizehint <= 0 else sizehint
        size = min(max(size, READ_MIN_BYTES), READ_MAX_BYTES)
        fresh, self._spare = self._spare, None
        if fresh is None or len(fresh) != size:
            # Not zeroed: only the bytes a read reports are ever looked at.
            fresh = receive_buffer(size)
        self._fresh = fresh
        return memoryview(fresh)

    def take_read(self, nbytes: int) -> bytes:
        """The ``nbytes`` just written into a new buffer, unparsed (for a caller that
        holds them back and feeds them later). Not for a frame's own buffer."""
        assert self._fresh is not None, "take_read after a read into a frame's own buffer"
        fresh, self._fresh = self._fresh, None
        self._spare = fresh
        return bytes(memoryview(fresh)[:nbytes])

    def buffer_updated(self, nbytes: int, limit: int | None = None) -> list[memoryview | bytes]:
        """Every frame completed by the ``nbytes`` just written where :meth:`get_buffer`
        said (``BufferedProtocol.buffer_updated``), at most ``limit`` of them."""
        if self._failed is not None:
            raise self._failed
        body = self._body
        if body is not None:
            self._have += nbytes
            if self._have < self._need:
                return []
            self._body = None
            self._need = -1
            self._have = 0
            return [memoryview(body).toreadonly()]
        fresh, self._fresh = self._fresh, None
        assert fresh is not None, "buffer_updated without get_buffer"
        data: bytes | memoryview
        if nbytes < REUSE_BELOW_BYTES:
            data = bytes(memoryview(fresh)[:nbytes])
            self._spare = fresh
        else:
            # The buffer is never handed out again: frames may be views of it.
            data = memoryview(fresh).toreadonly()[:nbytes]
        if self._rest is not None:  # (read before the kept bytes were parsed)
            data, self._rest = bytes(self._rest) + bytes(data), None
        return self._guarded(data, limit)

    def feed(
        self, data: bytes | bytearray | memoryview, limit: int | None = None
    ) -> list[memoryview | bytes]:
        """Every frame completed by ``data``, in order, at most ``limit`` of them. The
        returned memoryviews refer to ``data``; a bytearray/memoryview argument is
        copied once first so later reuse of the caller's buffer cannot change them."""
        if self._failed is not None:
            raise self._failed
        if self._rest is not None:  # (fed before the kept bytes were parsed)
            data, self._rest = bytes(self._rest) + bytes(data), None
        elif not isinstance(data, bytes):
            data = bytes(data)
        return self._guarded(data, limit)

    def _check(self, size: int) -> int:
        if size < 0:
            raise InvalidFrameError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameTooLargeError(size, self.max_frame_bytes)
        return size

    def _feed(self, data: bytes | memoryview, limit: int | None) -> list[memoryview | bytes]:
        frames: list[memoryview | bytes] = []
        view = memoryview(data)
        end = len(view)
        pos = 0
        if limit is not None and limit <= 0:
            if end:
                self._rest = view
            return frames
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
            body = self._body
            if body is not None:  # (bytes fed while a frame is read in place)
                take = min(missing, end - pos)
                body[self._have : self._have + take] = view[pos : pos + take]
                self._have += take
                if take < missing:
                    return frames
                frames.append(memoryview(body).toreadonly())
                self._body = None
            elif end - pos < missing:
                if end > pos:
                    self._chunks.append(view[pos:] if pos else data)
                    self._have += end - pos
                return frames
            else:
                self._chunks.append(view[pos : pos + missing])
                frames.append(b"".join(self._chunks))
                self._chunks = []
            self._need = -1
            self._have = 0
            pos += missing
        unpack_from = _SIZE.unpack_from
        while end - pos >= 4:
            if limit is not None and len(frames) >= limit:
                self._rest = view[pos:]  # the caller asks for them with more()
                return frames
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
            self._head = bytes(data[pos:])
        return frames
