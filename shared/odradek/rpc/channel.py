"""Client channels between services, with the same limits as the servers, over mutual
TLS when the process has internal TLS settings (:mod:`odradek.internal_tls`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

import grpc

from odradek import internal_tls
from odradek.rpc.server import CHANNEL_OPTIONS

StubT = TypeVar("StubT")


def open_channel(address: str, tls: internal_tls.InternalTls | None = None) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel to ``host:port`` (services bind loopback or a pod IP);
    ``tls``: an identity other than the process's (a tool acting as ``admin``)."""
    tls = tls or internal_tls.active()
    if tls is None:
        return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
    return grpc.aio.secure_channel(
        address, tls.channel_credentials(), options=CHANNEL_OPTIONS + tls.channel_options()
    )


def open_sync_channel(address: str, tls: internal_tls.InternalTls | None = None) -> grpc.Channel:
    """A blocking channel (for a thread outside the event loop), same rules."""
    tls = tls or internal_tls.active()
    if tls is None:
        return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    return grpc.secure_channel(
        address, tls.channel_credentials(), options=CHANNEL_OPTIONS + tls.channel_options()
    )


class NodeChannels(Generic[StubT]):
    """One channel and stub per node id, re-opened when the node's address moves or
    this process's internal TLS client certificate was renewed (a channel keeps the
    credentials it was opened with).

    A replaced channel is kept open until :meth:`close`: calls in flight on it may
    still finish.
    """

    def __init__(self, make_stub: Callable[[grpc.aio.Channel], StubT]) -> None:
        self._make_stub = make_stub
        self._channels: dict[int, tuple[str, grpc.aio.Channel, StubT, int]] = {}
        self._retired: list[grpc.aio.Channel] = []

    def stub(self, node_id: int, address: str) -> StubT:
        tls = internal_tls.active()
        generation = tls.client_generation() if tls is not None else 0
        entry = self._channels.get(node_id)
        if entry is None or entry[0] != address or entry[3] != generation:
            if entry is not None:
                self._retired.append(entry[1])
            channel = open_channel(address)
            # (opened after client_generation: a renewal in between reopens once more)
            entry = (address, channel, self._make_stub(channel), generation)
            self._channels[node_id] = entry
        return entry[2]

    async def close(self) -> None:
        channels = [entry[1] for entry in self._channels.values()] + self._retired
        for channel in channels:
            with contextlib.suppress(Exception):
                await channel.close(None)
        self._channels.clear()
        self._retired.clear()
