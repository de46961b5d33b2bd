"""Every frame :func:`odradek.datalink.frame.encode` writes follows the layout in the
module docstring, whether it takes the precompiled one-blob and no-blob paths or the
general one, and :func:`parse` reads each back (issue 18: those paths were added for the
frames of the acks=all path). The reference frame is built here by hand from the
documented layout."""

from __future__ import annotations

import struct

import pytest

from odradek.datalink.frame import FETCH, OK, PRODUCE, FrameReader, encode, meta_bytes, parse
from odradek.rpc.v1 import storage_pb2


def _reference(cid: int, kind: int, meta: bytes, blobs: list[bytes]) -> bytes:
    body = struct.pack(">iBi", cid, kind, len(meta)) + meta
    body += struct.pack(">i", len(blobs)) + b"".join(struct.pack(">i", len(b)) for b in blobs)
    body += b"".join(blobs)
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    "blobs",
    [[], [b""], [b"r" * 90], [b"a" * 3, b""], [b"", b"x"], [b"1", b"22", b"333"]],
)
@pytest.mark.parametrize("cid", [0, 7, 2**31 - 1])
def test_encode_follows_the_layout_and_parses_back(cid: int, blobs: list[bytes]) -> None:
    meta = b"\x08\x01meta"
    wire = b"".join(bytes(b) for b in encode(cid, PRODUCE, meta, [bytearray(b) for b in blobs]))
    assert wire == _reference(cid, PRODUCE, meta, blobs)
    frame = parse(bytearray(wire[4:]))
    assert (frame.correlation_id, frame.kind, bytes(frame.meta)) == (cid, PRODUCE, meta)
    assert [bytes(b) for b in frame.blobs] == blobs


def test_empty_blobs_are_not_handed_to_the_socket() -> None:
    """Only the head goes out for an empty blob (writelines of b"" is a wasted entry)."""
    assert len(encode(1, OK, b"m", [b""])) == 1
    assert len(encode(1, OK, b"m", [b"x"])) == 2


def test_a_head_parses_from_the_frame_view() -> None:
    """meta_bytes hands protobuf the frame's view; the message owns its fields after the
    reader's buffer is reused."""
    request = storage_pb2.FetchRequest(
        replica_id=2, partitions=[storage_pb2.FetchPartition(topic="orders", fetch_offset=9)]
    )
    reader = FrameReader(1 << 20)
    wire = b"".join(bytes(b) for b in encode(5, FETCH, request.SerializeToString()))
    view = reader.get_buffer()
    view[: len(wire)] = wire
    [frame] = reader.buffer_updated(len(wire))
    parsed = storage_pb2.FetchRequest.FromString(meta_bytes(frame))
    frame.meta[:] = b"\x00" * len(frame.meta)  # the frame's bytes scribbled over
    assert parsed == request
