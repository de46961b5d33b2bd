"""Receive buffers that are not zeroed first (odradek.byte_buffers, issue 18)."""

from __future__ import annotations

import resource

from odradek.byte_buffers import UNZEROED_FROM_BYTES, receive_buffer
from odradek.datalink.frame import FETCH, FrameReader, encode
from odradek.protocol.framing import FrameDecoder


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_large_buffer_is_not_written_before_the_socket_fills_it() -> None:
    """64 MB is above glibc's mmap threshold (odradek.malloc_tuning's too): fresh pages
    that zeroing would fault in one by one (16,384 of them); left unwritten, none is."""
    size = 64 << 20
    before = _minor_faults()
    buf = receive_buffer(size)
    faults = _minor_faults() - before
    assert type(buf) is bytearray and len(buf) == size
    assert faults < 1_000, faults
    buf[-3:] = b"end"  # writable, resizable like any bytearray
    buf += b"!"
    assert bytes(buf[-4:]) == b"end!"


def test_small_buffers_are_plain_zeroed_bytearrays() -> None:
    assert receive_buffer(0) == bytearray()
    assert receive_buffer(UNZEROED_FROM_BYTES - 1) == bytearray(UNZEROED_FROM_BYTES - 1)


def test_frames_read_into_unzeroed_buffers_are_exactly_the_bytes_sent() -> None:
    """Both frame readers give back exactly the received bytes whatever the buffers held
    before (reads of every size, frames larger than the unzeroed threshold)."""
    blob = bytes(range(256)) * (3 * UNZEROED_FROM_BYTES // 256)
    stream = b"".join(bytes(p) for p in encode(7, FETCH, b"meta", [blob, b"tail"]))
    for step in (1000, 65_536, 300_000):
        reader = FrameReader(1 << 24)
        frames = []
        pos = 0
        while pos < len(stream):
            buf = reader.get_buffer()
            n = min(len(buf), step, len(stream) - pos)
            buf[:n] = stream[pos : pos + n]
            pos += n
            frames += reader.buffer_updated(n)
        [frame] = frames
        assert bytes(frame.meta) == b"meta"
        assert [bytes(b) for b in frame.blobs] == [blob, b"tail"]

    kafka = len(blob).to_bytes(4, "big") + blob + (3).to_bytes(4, "big") + b"abc"
    for step in (1000, 65_536, 300_000):
        decoder = FrameDecoder(1 << 24)
        payloads = []
        pos = 0
        while pos < len(kafka):
            buf = decoder.get_buffer(step)
            n = min(len(buf), step, len(kafka) - pos)
            buf[:n] = kafka[pos : pos + n]
            pos += n
            payloads += decoder.buffer_updated(n)
        assert [bytes(p) for p in payloads] == [blob, b"abc"]
