"""One data link connection as asyncio sees it, shared by the node's server side and
the client side: received bytes land in place in the :class:`FrameReader`'s buffer
(``asyncio.BufferedProtocol``, no copy), and each complete frame is handed on."""

from __future__ import annotations

import asyncio

from odradek.datalink.frame import Frame, FrameError, FrameReader


class FrameProtocol(asyncio.BufferedProtocol):
    """Subclasses answer :meth:`frame_received` and :meth:`bad_frame` (the stream is
    broken: the connection must be closed)."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.reader = FrameReader(max_frame_bytes)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.reader.buffer_updated(nbytes)
        except FrameError as exc:
            self.bad_frame(exc)
            return
        for frame in frames:
            self.frame_received(frame)

    def frame_received(self, frame: Frame) -> None:
        raise NotImplementedError

    def bad_frame(self, exc: FrameError) -> None:
        raise NotImplementedError
