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
from odradek.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, frame

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
