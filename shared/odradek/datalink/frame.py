"""Data link frames: the byte layout and an incremental reader (sans-io).

Produce and Fetch move record batches that the broker never decodes. Over gRPC every
record byte is copied into and out of a protobuf message and through HTTP/2 framing on
both sides; a data link frame carries the small protobuf part (the ``storage_pb2``
request or answer with its ``records`` fields left empty) and the record batches
beside it as raw blobs, which the sender hands to the socket without copying them
(``transport.writelines``) and the receiver gets as views of one buffer the kernel
wrote into.

Layout (big-endian, like Kafka's own framing)::

    INT32  size           bytes after this field
    INT32  correlation_id chosen by the client; the answer carries it back
    INT8   kind           request: 1 PRODUCE, 2 FETCH; answer: 0 OK, 1 ERROR
    INT32  meta_size
    BYTES  meta           a serialized storage_pb2 message (ERROR: UTF-8 text)
    INT32  blob_count
    INT32  blob_size      blob_count times
    BYTES  blobs          concatenated; blob i is the records of partition i of meta

Answers may come in any order (a long-poll Fetch must not hold up a Produce); the
correlation id matches them. A frame that is larger than the reader's limit, or whose
parts do not add up to its size, is a protocol error: the connection is closed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence, Sized
from dataclasses import dataclass
from typing import TypeVar

from odradek.byte_buffers import receive_buffer

Buffer = bytes | bytearray | memoryview
_Blob = TypeVar("_Blob", bound=Sized)

PRODUCE = 1
FETCH = 2
OK = 0
ERROR = 1

_HEAD = struct.Struct(">iiBi")  # size, correlation id, kind, meta size
_INT32 = struct.Struct(">i")
_PARSE_HEAD = struct.Struct(">iBi")  # correlation id, kind, meta size (after the size)
_ONE_BLOB = struct.Struct(">ii")  # blob count 1, its size
_NO_BLOBS = _INT32.pack(0)
# Frame bytes after the size field besides meta and blobs, with one blob and with none.
_ONE_BLOB_OVERHEAD = _HEAD.size - 4 + _ONE_BLOB.size
_NO_BLOB_OVERHEAD = _HEAD.size - 4 + _INT32.size
# Between frames a read takes at most READ_BYTES into the staging buffer. A frame that
# fits in the staging buffer from where it began is completed there (the reads after its
# first one stop at its end); one that does not gets a buffer of its own that the socket
# fills, after one copy of what the first read brought of it.
READ_BYTES = 256 * 1024
STAGING_BYTES = 4 * 1024 * 1024
# A frame at least this large is returned as views of the staging buffer itself, which
# the reader then gives up for a new one (the next frame's first bytes, if any, copied
# over); smaller frames are copied out and the staging buffer is reused.
HAND_OVER_BYTES = 64 * 1024


class FrameError(Exception):
    """Bytes that are not a data link frame: the connection must be closed."""


@dataclass(slots=True)
class Frame:
    correlation_id: int
    kind: int
    meta: memoryview
    blobs: list[memoryview]


def meta_bytes(frame: Frame) -> bytes:
    """The frame's meta for ``Message.FromString``, which parses any buffer (upb copies
    what it keeps): typed as bytes, not copied into bytes first (one copy and 0.5 us less
    per frame, several frames per replicated record; issue 18). Not ``typing.cast``,
    which is a function call at run time."""
    return frame.meta  # type: ignore[return-value]


def encode(
    correlation_id: int, kind: int, meta: bytes, blobs: Sequence[_Blob] = ()
) -> list[bytes | _Blob]:
    """The frame as buffers for ``writelines``: one small head, then the blobs as given
    (any sized parts: the storage node's data link sends a FileRange by ``sendfile``)."""
    count = len(blobs)
    if count == 1:
        # The common case (a one-partition Produce or Fetch, a replica fetch's answer):
        # precompiled layouts, no per-call format string or list of sizes (issue 18:
        # several frames per replicated record, on every process of the path).
        blob = blobs[0]
        n = len(blob)
        size = _ONE_BLOB_OVERHEAD + len(meta) + n
        head = b"".join(
            (_HEAD.pack(size, correlation_id, kind, len(meta)), meta, _ONE_BLOB.pack(1, n))
        )
        return [head, blob] if n else [head]
    if count == 0:
        size = _NO_BLOB_OVERHEAD + len(meta)
        return [b"".join((_HEAD.pack(size, correlation_id, kind, len(meta)), meta, _NO_BLOBS))]
    sizes = [len(b) for b in blobs]
    tail = struct.pack(f">i{count}i", count, *sizes)
    size = _HEAD.size - 4 + len(meta) + len(tail) + sum(sizes)
    head = b"".join((_HEAD.pack(size, correlation_id, kind, len(meta)), meta, tail))
    out: list[bytes | _Blob] = [head]
    out.extend(b for b in blobs if len(b))
    return out


def parse(body: bytearray | bytes | memoryview) -> Frame:
    """One frame from its bytes after the size field; blobs are views of ``body``."""
    view = memoryview(body)
    end = len(view)
    try:
        correlation_id, kind, meta_size = _PARSE_HEAD.unpack_from(view, 0)
        pos = 9
        if meta_size < 0 or pos + meta_size + 4 > end:
            raise FrameError(f"meta of {meta_size} bytes does not fit a {end}-byte frame")
        meta = view[pos : pos + meta_size]
        pos += meta_size
        (count,) = _INT32.unpack_from(view, pos)
        pos += 4
        if count < 0 or pos + 4 * count > end:
            raise FrameError(f"{count} blobs do not fit a {end}-byte frame")
        if count == 1:  # the common case: no per-call format string
            sizes: tuple[int, ...] = _INT32.unpack_from(view, pos)
        elif count == 0:
            sizes = ()
        else:
            sizes = struct.unpack_from(f">{count}i", view, pos)
        pos += 4 * count
    except struct.error as exc:
        raise FrameError(f"truncated frame: {exc}") from None
    blobs = []
    for size in sizes:
        if size < 0 or pos + size > end:
            raise FrameError(f"a blob of {size} bytes does not fit a {end}-byte frame")
        blobs.append(view[pos : pos + size])
        pos += size
    if pos != end:
        raise FrameError(f"{end - pos} bytes after the last blob")
    return Frame(correlation_id, kind, meta, blobs)


class FrameReader:
    """Frames out of a byte stream, for an ``asyncio.BufferedProtocol``:
    ``get_buffer()`` says where the socket should write, ``buffer_updated(n)`` returns
    the frames completed by those ``n`` bytes.

    A large frame (a Produce request's batches, a Fetch answer's) is never copied in
    Python when it fits the staging buffer: the socket writes it there and its blobs are
    views of that buffer, which then belongs to the frame (docs/data-link.md, "Produce
    CPU per GB: the frame copies"). Copying each one out of a 256 KiB staging buffer
    into a buffer of its own was a tenth of the storage node's CPU on a produce run."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._new_staging()
        self._lent = False  # returned frames are views of the staging buffer
        self._pos = 0  # staging bytes before this are parsed
        self._end = 0  # staging bytes filled
        self._stop = READ_BYTES  # where the next read into staging ends
        self._body: bytearray | None = None  # a frame's own buffer (too large for staging)
        self._filled = 0

    def _new_staging(self) -> None:
        # Not zeroed: only bytes the socket wrote are parsed. A large one that is never
        # written to costs address space only.
        self._staging = receive_buffer(STAGING_BYTES)
        # Sliced for every read: one view made once instead of a view and a slice per
        # read (the staging buffer is never resized, so it may stay exported).
        self._staging_view = memoryview(self._staging)

    def get_buffer(self) -> memoryview:
        if self._body is not None:
            return memoryview(self._body)[self._filled :]
        return self._staging_view[self._end : self._stop]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        if self._body is not None:
            self._filled += nbytes
            if self._filled < len(self._body):
                return []
            body, self._body = self._body, None
            return [parse(body)]
        self._end += nbytes
        spans: list[tuple[int, int]] = []  # (start, size) of each complete frame
        lend = self._lent  # frames are views of the staging buffer (else copies)
        staging = self._staging
        pos, end = self._pos, self._end
        in_place = False  # an incomplete frame goes on filling the staging buffer
        while end - pos >= 4:
            (size,) = _INT32.unpack_from(staging, pos)
            if size < _HEAD.size - 4 + 4 or size > self.max_frame_bytes:
                raise FrameError(f"frame size {size} outside [13, {self.max_frame_bytes}]")
            start = pos + 4
            if end - start >= size:
                spans.append((start, size))
                lend = lend or size >= HAND_OVER_BYTES
                pos = start + size
                continue
            if size < HAND_OVER_BYTES:
                break  # moved to the front with the bytes it has (the next read's room)
            if start + size <= STAGING_BYTES:
                in_place = True  # the next reads end where it does
                break
            # Too large for staging: a buffer of its own that the socket writes into (not
            # zeroed first: it is parsed only once every byte was received).
            body = receive_buffer(size)
            have = end - start
            memoryview(body)[:have] = self._staging_view[start:end]  # one copy, no temporary
            self._body, self._filled = body, have
            pos = end
            break
        if lend:
            view = self._staging_view
            frames = [parse(view[start : start + size]) for start, size in spans]
        else:
            frames = [parse(staging[start : start + size]) for start, size in spans]
        if in_place:  # (the bytes before it are never written again)
            (size,) = _INT32.unpack_from(staging, pos)
            self._stop = pos + 4 + size
            self._lent = lend
        else:
            rest = self._staging_view[pos:end]  # a small frame's first bytes, if any
            if lend:  # the frames keep this buffer: the next bytes go to a new one
                self._new_staging()
            self._staging_view[: len(rest)] = rest
            pos, end = 0, len(rest)
            self._stop = READ_BYTES
            self._lent = False
        self._pos, self._end = pos, end
        return frames
