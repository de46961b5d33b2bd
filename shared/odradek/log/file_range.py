"""Bytes of a log segment file that a consumer read found but did not copy (issue 18).

The storage node's data link sends a consumer's Fetch answer over a Unix socket with
``os.sendfile``: the kernel hands the page cache's pages to the socket instead of
copying them into a ``bytes`` (``pread``) and again into the socket (docs/data-link.md,
"Consume CPU per GB"). A range holds its own duplicate of the segment's descriptor, so
it stays readable when the segment is closed or deleted before it is sent; it is closed
once sent, or when dropped.
"""

from __future__ import annotations

import os


class FileRange:
    """``size`` bytes at ``position`` of an open file, read when sent."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = os.dup(fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def read(self, skip: int = 0) -> bytes:
        """The bytes from ``skip`` on (a send that stopped part-way goes on from there);
        raises OSError when the file no longer holds them all (truncated)."""
        want = self.size - skip
        data = os.pread(self.fd, want, self.position + skip)
        if len(data) != want:
            raise OSError(f"log file range shrank: {len(data)} of {want} bytes")
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()
