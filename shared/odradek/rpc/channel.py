"""Client channels between services, with the same limits as the servers, over mutual
TLS when the process has internal TLS settings (:mod:`odradek.internal_tls`).

Long-lived channels are kept in :class:`Channels` (``grpc.aio``) or
:class:`SyncChannels` (a thread of its own): one place re-opens them when an address
moves or the internal TLS client certificate was renewed, since a gRPC channel keeps
the credentials it was opened with and would reconnect with the old certificate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import grpc

from odradek import internal_tls
from odradek.rpc.server import CHANNEL_OPTIONS

StubT = TypeVar("StubT")
KeyT = TypeVar("KeyT", bound=Hashable)
ChannelT = TypeVar("ChannelT", grpc.aio.Channel, grpc.Channel)


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


class _KeptChannels(Generic[KeyT, ChannelT, StubT]):
    """One channel and stub per key (a node id, an address), re-opened when the key's
    address moves or the client certificate was renewed
    (:meth:`odradek.internal_tls.InternalTls.client_generation`).

    A replaced channel is kept open until the owner closes them all: calls in flight
    on it (a metadata watch stream) may still finish on the connection they have.
    """

    def __init__(
        self,
        make_stub: Callable[[ChannelT], StubT],
        open_: Callable[[str, internal_tls.InternalTls | None], ChannelT],
        tls: internal_tls.InternalTls | None,
    ) -> None:
        self._make_stub = make_stub
        self._open = open_
        self._tls = tls  # None: the process's own, read at each call
        self._channels: dict[KeyT, tuple[str, ChannelT, StubT, int]] = {}
        self._retired: list[ChannelT] = []

    def stub(self, key: KeyT, address: str) -> StubT:
        tls = self._tls or internal_tls.active()
        generation = tls.client_generation() if tls is not None else 0
        entry = self._channels.get(key)
        if entry is None or entry[0] != address or entry[3] != generation:
            if entry is not None:
                self._retired.append(entry[1])
            channel = self._open(address, self._tls)
            # (opened after client_generation: a renewal in between reopens once more)
            entry = (address, channel, self._make_stub(channel), generation)
            self._channels[key] = entry
        return entry[2]

    def _take_all(self) -> list[ChannelT]:
        channels = [entry[1] for entry in self._channels.values()] + self._retired
        self._channels.clear()
        self._retired = []
        return channels


class Channels(_KeptChannels[KeyT, grpc.aio.Channel, StubT]):
    """``grpc.aio`` channels kept per key (:class:`_KeptChannels`)."""

    def __init__(
        self,
        make_stub: Callable[[grpc.aio.Channel], StubT],
        tls: internal_tls.InternalTls | None = None,
    ) -> None:
        super().__init__(make_stub, open_channel, tls)

    async def close(self) -> None:
        for channel in self._take_all():
            with contextlib.suppress(Exception):
                await channel.close(None)


class NodeChannels(Channels[int, StubT]):
    """Channels kept per node id."""


class SyncChannels(_KeptChannels[KeyT, grpc.Channel, StubT]):
    """Blocking channels kept per key (:class:`_KeptChannels`), for one thread."""

    def __init__(
        self,
        make_stub: Callable[[grpc.Channel], StubT],
        tls: internal_tls.InternalTls | None = None,
    ) -> None:
        super().__init__(make_stub, open_sync_channel, tls)

    def close(self) -> None:
        for channel in self._take_all():
            with contextlib.suppress(Exception):
                channel.close()
