"""FrameDecoder: partial input, many frames per chunk, and the size limit enforced
before a single payload byte is buffered."""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest

from odradek.protocol.exceptions import (
    FrameTooLargeError,
    InvalidFrameError,
    ProtocolError,
)
from odradek.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    DIRECT_READ_BYTES,
    REUSE_BELOW_BYTES,
    FrameDecoder,
    frame,
)

PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)) * 3, b"\x00\x00\x00\x04"]


def _stream() -> bytes:
    return b"".join(frame(p) for p in PAYLOADS)


def test_frame_prefixes_the_size() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(memoryview(b"")) == b"\x00\x00\x00\x00"


def test_many_frames_in_one_chunk() -> None:
    data = _stream()
    frames = FrameDecoder().feed(data)
    assert [bytes(f) for f in frames] == PAYLOADS
    # whole frames inside one chunk are views of it, not copies
    assert all(isinstance(f, memoryview) and f.obj is data for f in frames)


def test_byte_by_byte() -> None:
    decoder = FrameDecoder()
    out = []
    for b in _stream():
        out.extend(decoder.feed(bytes([b])))
        assert decoder.buffered_bytes <= 4 + max(len(p) for p in PAYLOADS)
    assert [bytes(f) for f in out] == PAYLOADS
    assert decoder.buffered_bytes == 0


@pytest.mark.parametrize("chunk", [2, 3, 5, 7, 13, 100])
def test_every_chunking(chunk: int) -> None:
    data = _stream()
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(data), chunk):
        out.extend(decoder.feed(data[i : i + chunk]))
    assert [bytes(f) for f in out] == PAYLOADS


def test_split_inside_the_size_prefix_then_many_frames() -> None:
    data = _stream() * 3
    decoder = FrameDecoder()
    first = decoder.feed(data[:2])
    rest = decoder.feed(data[2:])
    assert first == []
    assert [bytes(f) for f in rest] == PAYLOADS * 3


def test_caller_buffer_reuse_cannot_corrupt_frames() -> None:
    buf = bytearray(frame(b"abcd") + frame(b"xy"))
    frames = FrameDecoder().feed(buf)
    buf[:] = b"\xff" * len(buf)
    assert [bytes(f) for f in frames] == [b"abcd", b"xy"]


def test_huge_prefix_raises_before_buffering() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(struct.pack(">i", 2**31 - 1))
    assert info.value.size == 2**31 - 1
    assert info.value.max_frame_bytes == DEFAULT_MAX_FRAME_BYTES
    assert decoder.buffered_bytes == 0
    # the decoder stays failed: the stream position is lost
    with pytest.raises(FrameTooLargeError):
        decoder.feed(b"\x00")


def test_huge_prefix_split_across_feeds_raises_on_the_fourth_byte() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    prefix = struct.pack(">i", 1_000_000)
    assert decoder.feed(prefix[:3]) == []
    with pytest.raises(FrameTooLargeError):
        decoder.feed(prefix[3:])


def test_http_get_on_the_kafka_port() -> None:
    with pytest.raises(FrameTooLargeError) as info:
        FrameDecoder().feed(b"GET / HTTP/1.1\r\n")
    assert info.value.size == 0x47455420


def test_negative_size() -> None:
    with pytest.raises(InvalidFrameError) as info:
        FrameDecoder().feed(b"\xff\xff\xff\xfe")
    assert not isinstance(info.value, FrameTooLargeError)
    assert isinstance(info.value, ProtocolError)


def test_exact_boundary() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    assert [bytes(f) for f in decoder.feed(frame(b"x" * 10))] == [b"x" * 10]
    with pytest.raises(FrameTooLargeError):
        decoder.feed(frame(b"x" * 11))


def test_large_frame_in_small_chunks_is_linear() -> None:
    payload = bytes(range(256)) * 16384  # 4 MiB in 8192 chunks: a copy per chunk
    data = frame(payload)  # (quadratic) would move ~16 GB and take seconds
    decoder = FrameDecoder()
    tracemalloc.start()
    started = time.perf_counter()
    out = []
    for i in range(0, len(data), 512):
        out.extend(decoder.feed(data[i : i + 512]))
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(out) == 1 and out[0] == payload
    # chunks are kept and joined once: ~2x the payload at peak, never quadratic
    assert peak < 4 * len(payload)
    assert elapsed < 5.0, elapsed  # quadratic copying would move ~16 GB: far slower than this


# -- read in place (get_buffer / buffer_updated, for an asyncio.BufferedProtocol) -----------
def _read_in_place(decoder: FrameDecoder, data: bytes, offer: int) -> list[memoryview | bytes]:
    """What a transport does: ask for a buffer (offering ``offer`` bytes), write as much
    of ``data`` as fits, report it; until ``data`` is used up."""
    out: list[memoryview | bytes] = []
    pos = 0
    while pos < len(data):
        buf = decoder.get_buffer(offer)
        n = min(len(buf), len(data) - pos, offer if offer > 0 else len(data))
        buf[:n] = data[pos : pos + n]
        pos += n
        out.extend(decoder.buffer_updated(n))
    return out


BIG = [bytes([i]) * (DIRECT_READ_BYTES * 3 + i) for i in range(3)]
MIXED = [b"a", BIG[0], b"", b"hello", BIG[1], bytes(range(256)) * 3, BIG[2], b"z"]


@pytest.mark.parametrize("offer", [-1, 1, 7, 100, 5000, DIRECT_READ_BYTES + 3, 300_000])
def test_read_in_place_every_offer(offer: int) -> None:
    decoder = FrameDecoder()
    out = _read_in_place(decoder, b"".join(frame(p) for p in MIXED), offer)
    assert [bytes(f) for f in out] == MIXED
    assert decoder.buffered_bytes == 0 and not decoder.filling_frame


def test_a_large_frame_lands_in_its_own_buffer() -> None:
    """The transport writes a large frame's bytes where they stay: the frame handed on
    is a view of that buffer (no join, no copy), read-only like a view of bytes."""
    decoder = FrameDecoder()
    data = frame(BIG[1])
    buf = decoder.get_buffer(1000)
    buf[:1000] = data[:1000]
    assert decoder.buffer_updated(1000) == []
    assert decoder.buffered_bytes == 996
    body = decoder.get_buffer(len(data))
    assert decoder.filling_frame and len(body) == len(BIG[1]) - 996
    assert decoder.buffered_bytes == len(BIG[1])  # the whole buffer is held now
    body[:] = data[1000:]
    (got,) = decoder.buffer_updated(len(body))
    assert isinstance(got, memoryview) and got.readonly and got.obj is body.obj
    assert got == BIG[1]
    assert not decoder.filling_frame and decoder.buffered_bytes == 0


def test_small_frames_are_views_of_a_large_read() -> None:
    decoder = FrameDecoder()
    data = b"".join(frame(p) for p in PAYLOADS) * 8
    assert len(data) >= REUSE_BELOW_BYTES
    buf = decoder.get_buffer(len(data))
    buf[: len(data)] = data
    frames = decoder.buffer_updated(len(data))
    assert [bytes(f) for f in frames] == PAYLOADS * 8
    assert all(isinstance(f, memoryview) and f.readonly and f.obj is buf.obj for f in frames)
    # the next read gets a new buffer: the frames handed on are never overwritten
    assert decoder.get_buffer(len(data)).obj is not buf.obj


def test_a_small_read_is_copied_and_its_buffer_read_into_again() -> None:
    """A one-record request's read: the frames are copied out (a few hundred bytes) and
    the buffer serves the next read, instead of a new one allocated per read (issue 18:
    PLAINTEXT connections read in place too, one read per small request)."""
    decoder = FrameDecoder()
    data = _stream()
    assert len(data) < REUSE_BELOW_BYTES
    buf = decoder.get_buffer(4096)
    buf[: len(data)] = data
    frames = decoder.buffer_updated(len(data))
    again = decoder.get_buffer(4096)
    assert again.obj is buf.obj
    again[: len(data)] = b"\xee" * len(data)  # the next read overwrites it
    assert [bytes(f) for f in frames] == PAYLOADS


def test_held_read_then_fed_keeps_the_stream() -> None:
    """A read taken out unparsed (the connection holds it while its budget is used up)
    and fed later continues the same stream, also into a frame read in place."""
    decoder = FrameDecoder()
    data = frame(b"first") + frame(BIG[0]) + frame(b"last")
    buf = decoder.get_buffer(9)
    buf[:9] = data[:9]
    assert [bytes(f) for f in decoder.buffer_updated(9)] == [b"first"]
    buf = decoder.get_buffer(100)
    buf[:100] = data[9:109]
    held = decoder.take_read(100)
    assert held == data[9:109] and decoder.buffered_bytes == 0
    assert decoder.feed(held) == []
    out = _read_in_place(decoder, data[109:500], 391)  # into the big frame's own buffer
    assert out == [] and decoder.filling_frame
    out = decoder.feed(data[500:])  # the rest fed, as a held read would be
    assert [bytes(f) for f in out] == [BIG[0], b"last"]


def test_read_in_place_refuses_a_huge_prefix() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    buf = decoder.get_buffer(8)
    buf[:4] = struct.pack(">i", 1_000_000)
    with pytest.raises(FrameTooLargeError):
        decoder.buffer_updated(4)
    with pytest.raises(FrameTooLargeError):
        decoder.get_buffer(8)  # failed for good


# -- at most `limit` frames a call (the connection's room under queued.max.requests) --------
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 100])
def test_limit_keeps_the_rest_unparsed_in_order(limit: int) -> None:
    """A read of many small frames is split ``limit`` frames at a time: the bytes after
    the last frame returned stay unparsed (a view of the read) until more() asks."""
    data = _stream() + frame(b"tail")[:6]  # and the start of one more frame
    decoder = FrameDecoder()
    got = decoder.feed(data, limit)
    assert len(got) == min(limit, len(PAYLOADS))
    while decoder.unparsed_bytes:
        before = decoder.unparsed_bytes
        step = decoder.more(max(limit, 1))
        assert 1 <= len(step) <= max(limit, 1) or decoder.unparsed_bytes < before
        got.extend(step)
    assert [bytes(f) for f in got] == PAYLOADS
    assert decoder.partial_bytes == decoder.buffered_bytes == 2  # of frame(b"tail")
    (last,) = decoder.feed(frame(b"tail")[6:], limit=1)
    assert last == b"tail" and decoder.buffered_bytes == 0


def test_limit_counts_the_unparsed_bytes_and_bytes_fed_go_after_them() -> None:
    decoder = FrameDecoder()
    first = decoder.feed(_stream(), 2)
    kept = len(_stream()) - sum(4 + len(p) for p in PAYLOADS[:2])
    assert [bytes(f) for f in first] == PAYLOADS[:2]
    assert decoder.unparsed_bytes == decoder.buffered_bytes == kept
    assert decoder.partial_bytes == 0  # nothing half read: the budget may pause here
    later = decoder.feed(frame(b"later"))  # (a read that came before more())
    assert [bytes(f) for f in later] == [*PAYLOADS[2:], b"later"]
    assert decoder.buffered_bytes == 0 and decoder.more(5) == []


def test_limit_in_place_and_an_oversize_prefix_among_the_unparsed() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    data = frame(b"ok") + struct.pack(">i", 5000) + b"x" * 10
    buf = decoder.get_buffer(len(data))
    buf[: len(data)] = data
    assert [bytes(f) for f in decoder.buffer_updated(len(data), 1)] == [b"ok"]
    with pytest.raises(FrameTooLargeError):
        decoder.more(1)
    with pytest.raises(FrameTooLargeError):
        decoder.more(1)  # failed for good


def test_the_head_of_a_large_frame_moves_to_its_own_buffer_in_one_copy() -> None:
    """The first read's part of a large frame goes into the frame's own buffer directly:
    that buffer is allocated and no temporary copy of the part (a bytearray slice
    assignment from a view makes one)."""
    payload = bytes(range(256)) * 4096  # 1 MB
    data = frame(payload)
    decoder = FrameDecoder(1 << 24)
    buf = decoder.get_buffer(256 * 1024)
    first = len(buf)
    buf[:] = data[:first]
    assert decoder.buffer_updated(first) == []
    tracemalloc.start()
    try:
        rest = decoder.get_buffer(256 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(payload) <= peak < len(payload) + first // 2, (peak, first)
    pos = first
    frames: list[memoryview | bytes] = []
    while pos < len(data):
        n = min(len(rest), len(data) - pos)
        rest[:n] = data[pos : pos + n]
        pos += n
        frames += decoder.buffer_updated(n)
        if pos < len(data):
            rest = decoder.get_buffer(256 * 1024)
    assert [bytes(f) for f in frames] == [payload]
