"""The storage node's data link sends a consumer's FileRanges with ``sendfile``
(odradek.storage.data_link.send_direct, issue 18): over a real Unix socket pair the
peer reads exactly the frame's bytes in order, whether the socket takes everything at
once or stops part-way (the rest comes back as buffers for the transport, a range's
remainder read from where the send stopped)."""

from __future__ import annotations

import concurrent.futures
import os
import socket
from pathlib import Path

from odradek.datalink.frame import Buffer
from odradek.log.file_range import FileRange
from odradek.storage.data_link import send_direct


def _file(tmp_path: Path, size: int) -> int:
    path = tmp_path / "segment.log"
    path.write_bytes(bytes(i % 251 for i in range(size)))
    return os.open(path, os.O_RDONLY)


def _drain(sock: socket.socket, size: int) -> bytes:
    sock.setblocking(True)
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        assert chunk
        out += chunk
    return bytes(out)


def test_everything_the_socket_takes_goes_in_order(tmp_path: Path) -> None:
    fd = _file(tmp_path, 300_000)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    a.setblocking(False)
    try:
        r1, r2 = FileRange(fd, 0, 100_000), FileRange(fd, 150_000, 120_000)
        out: list[Buffer | FileRange] = [b"head", r1, b"mid", memoryview(b"dle"), r2, b"end"]
        expected = b"head" + r1.read() + b"middle" + r2.read() + b"end"
        assert send_direct(a.fileno(), out) == []
        assert _drain(b, len(expected)) == expected
    finally:
        os.close(fd)
        a.close()
        b.close()


def test_what_the_socket_does_not_take_comes_back_in_order(tmp_path: Path) -> None:
    fd = _file(tmp_path, 3_000_000)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    a.setblocking(False)
    try:
        r1, r2 = FileRange(fd, 0, 1_000_000), FileRange(fd, 1_000_000, 900_000)
        out: list[Buffer | FileRange] = [b"h" * 10, r1, b"x" * 7, r2, b"t" * 3]
        expected = b"h" * 10 + r1.read() + b"x" * 7 + r2.read() + b"t" * 3
        rest = send_direct(a.fileno(), out)  # nobody reads: the socket fills up
        assert rest and all(not isinstance(x, FileRange) for x in rest)
        taken = len(expected) - sum(len(x) for x in rest)
        assert 0 < taken < len(expected)
        reader = concurrent.futures.ThreadPoolExecutor(1)
        got = reader.submit(_drain, b, len(expected))
        a.setblocking(True)
        for x in rest:  # as the transport writes them, after what the socket took
            a.sendall(x)
        assert got.result(timeout=30) == expected
        reader.shutdown()
    finally:
        os.close(fd)
        a.close()
        b.close()
