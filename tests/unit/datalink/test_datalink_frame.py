"""Data link frames (odradek.datalink.frame): what is encoded is read back exactly, in
any chunking of the stream, with blobs as views; malformed frames are FrameError."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.datalink import frame as frame_module
from odradek.datalink.frame import (
    FETCH,
    PRODUCE,
    READ_BYTES,
    STAGING_BYTES,
    Frame,
    FrameError,
    FrameReader,
    encode,
    parse,
)


def _feed(reader: FrameReader, data: bytes, cuts: list[int]) -> list[Frame]:
    """Write ``data`` into the reader's buffers in pieces no larger than each cut."""
    frames: list[Frame] = []
    pos = 0
    i = 0
    while pos < len(data):
        buf = reader.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, cuts[i % len(cuts)] if cuts else len(data))
        buf[:n] = data[pos : pos + n]
        pos += n
        i += 1
        frames += reader.buffer_updated(n)
    return frames


frame_st = st.tuples(
    st.integers(0, 0x7FFFFFFF),
    st.integers(0, 255),
    st.binary(max_size=64),
    st.lists(st.binary(max_size=300), max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(
    frames=st.lists(frame_st, min_size=1, max_size=6),
    cuts=st.lists(st.integers(1, 700), max_size=8),
)
def test_round_trip_in_any_chunking(
    frames: list[tuple[int, int, bytes, list[bytes]]], cuts: list[int]
) -> None:
    stream = b"".join(b"".join(bytes(x) for x in encode(*f)) for f in frames)
    got = _feed(FrameReader(1 << 20), stream, cuts)
    assert [
        (g.correlation_id, g.kind, bytes(g.meta), [bytes(b) for b in g.blobs]) for g in got
    ] == [(cid, kind, meta, blobs) for cid, kind, meta, blobs in frames]


def test_large_frame_is_received_into_its_own_buffer() -> None:
    blob = bytes(range(256)) * (3 * STAGING_BYTES // 256)
    parts = encode(7, FETCH, b"meta", [blob, b"", b"x"])
    assert parts[1] is blob  # handed to the socket as is, not copied into the head
    stream = b"".join(bytes(p) for p in parts) * 2
    (a, b) = _feed(FrameReader(1 << 24), stream, [65536])
    assert bytes(a.blobs[0]) == blob and bytes(b.blobs[2]) == b"x"
    assert a.blobs[1].nbytes == 0


def test_a_frame_too_large_for_staging_moves_to_its_own_buffer_in_one_copy() -> None:
    """The head of a frame larger than the staging buffer, which arrived in staging, is
    copied into the frame's own buffer directly: the read allocates that buffer and no
    temporary of the head's size (a slice of the staging bytearray was one)."""
    blob = bytes(range(256)) * ((STAGING_BYTES + READ_BYTES) // 256)
    stream = b"".join(bytes(p) for p in encode(3, FETCH, b"m", [blob]))
    reader = FrameReader(1 << 25)
    buf = reader.get_buffer()
    n = len(buf)
    assert n == READ_BYTES  # between frames a read brings at most this much
    buf[:] = stream[:n]
    tracemalloc.start()
    try:
        assert reader.buffer_updated(n) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(stream) - 4 <= peak < len(stream) + n // 2, (peak, n)
    rest = reader.get_buffer()
    rest[:] = stream[n:]
    [frame] = reader.buffer_updated(len(rest))
    assert bytes(frame.blobs[0]) == blob


def test_a_large_frame_is_read_into_staging_and_handed_over_without_a_copy() -> None:
    """A Produce request of a megabyte (issue 18): its first read lands in the staging
    buffer, the next read is offered exactly the rest of the frame in that same buffer,
    and the frame's blobs are views of the very buffer the socket wrote into; no buffer
    of the frame's size is allocated. The reader then takes a new staging buffer for
    the next frame, and the frame already returned keeps its bytes."""
    blobs = [bytes([i]) * 333_333 for i in (1, 2, 3)]
    stream = b"".join(bytes(p) for p in encode(5, PRODUCE, b"head", blobs))
    reader = FrameReader(1 << 24)
    first = reader.get_buffer()
    written_into = first.obj
    first[:] = stream[: len(first)]
    tracemalloc.start()
    try:
        assert reader.buffer_updated(len(first)) == []
        rest = reader.get_buffer()
        assert rest.obj is written_into and len(rest) == len(stream) - len(first)
        rest[:] = stream[len(first) :]
        [frame] = reader.buffer_updated(len(rest))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(b.obj is written_into for b in frame.blobs)
    assert not any(b.readonly for b in frame.blobs)  # the log patches offsets in place
    # The one allocation is the next staging buffer (unwritten: address space only),
    # not a megabyte for the frame besides.
    assert STAGING_BYTES <= peak < STAGING_BYTES + 64 * 1024, peak
    following = encode(6, PRODUCE, b"next", [b"\xff" * 100_000])
    got = _feed(reader, b"".join(bytes(p) for p in following), [])
    assert got[0].blobs[0].obj is not written_into
    assert [bytes(b) for b in frame.blobs] == blobs
    assert bytes(frame.meta) == b"head" and frame.correlation_id == 5


def test_a_frame_that_follows_a_large_one_in_a_read_is_not_copied_either() -> None:
    """One read brings a whole large frame and the start of the next large one: the
    first is returned as views, the second completes in the same buffer after it."""
    one = b"".join(bytes(p) for p in encode(1, PRODUCE, b"a", [b"\x01" * 100_000]))
    two = b"".join(bytes(p) for p in encode(2, PRODUCE, b"b", [b"\x02" * 900_000]))
    reader = FrameReader(1 << 24)
    buf = reader.get_buffer()
    staging = buf.obj
    n = len(buf)
    buf[:] = (one + two)[:n]
    [a] = reader.buffer_updated(n)
    rest = reader.get_buffer()
    assert rest.obj is staging and len(rest) == len(one) + len(two) - n
    rest[:] = (one + two)[n:]
    [b] = reader.buffer_updated(len(rest))
    assert a.blobs[0].obj is staging and b.blobs[0].obj is staging
    assert bytes(a.blobs[0]) == b"\x01" * 100_000 and bytes(b.blobs[0]) == b"\x02" * 900_000


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 700), min_size=1, max_size=8),
    cuts=st.lists(st.integers(1, 900), max_size=8),
)
def test_frames_of_every_size_in_any_chunking_keep_their_bytes(
    sizes: list[int], cuts: list[int]
) -> None:
    """The staging scheme at a small scale (a 1 KB staging buffer, frames of 128 bytes
    or more handed over): every frame read, whether copied out, completed in place,
    handed over or given its own buffer, still holds its own bytes after all the
    frames that followed it were read."""
    frames = [(i, FETCH, b"m", [bytes([i % 251]) * size]) for i, size in enumerate(sizes)]
    stream = b"".join(b"".join(bytes(x) for x in encode(*f)) for f in frames)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frame_module, "STAGING_BYTES", 1024)
        mp.setattr(frame_module, "READ_BYTES", 256)
        mp.setattr(frame_module, "HAND_OVER_BYTES", 128)
        got = _feed(FrameReader(1 << 20), stream, cuts)
    assert [(g.correlation_id, [bytes(b) for b in g.blobs]) for g in got] == [
        (cid, blobs) for cid, _, _, blobs in frames
    ]


@pytest.mark.parametrize("size", [-1, 5, (1 << 20) + 1])
def test_frame_size_out_of_bounds(size: int) -> None:
    reader = FrameReader(1 << 20)
    buf = reader.get_buffer()
    buf[:4] = struct.pack(">i", size)
    with pytest.raises(FrameError):
        reader.buffer_updated(4)


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">iBi", 1, 0, 100) + b"\0" * 4,  # meta past the end
        struct.pack(">iBii", 1, 0, 0, 3) + b"\0" * 4,  # blob sizes past the end
        struct.pack(">iBiii", 1, 0, 0, 1, 10) + b"\0" * 4,  # a blob past the end
        struct.pack(">iBiii", 1, 0, 0, 1, -2),  # negative blob
        struct.pack(">iBii", 1, 0, 0, 0) + b"junk",  # bytes after the last blob
        b"\0\0",
    ],
)
def test_malformed_bodies(body: bytes) -> None:
    with pytest.raises(FrameError):
        parse(body)


def test_meta_bytes_is_the_view_itself_and_calls_nothing() -> None:
    # Every data link answer and request is parsed through meta_bytes: it hands the
    # frame's view over as it is, without a call to typing.cast (issue 18).
    import sys
    from types import FrameType

    from odradek.datalink.frame import meta_bytes

    frame = Frame(1, FETCH, memoryview(b"meta"), [])
    calls: list[str] = []

    def profile(f: FrameType, event: str, _arg: object) -> None:
        if event == "call" and f.f_code.co_filename.endswith("typing.py"):
            calls.append(f.f_code.co_name)

    sys.setprofile(profile)
    try:
        got = meta_bytes(frame)
    finally:
        sys.setprofile(None)
    assert got is frame.meta
    assert calls == []
