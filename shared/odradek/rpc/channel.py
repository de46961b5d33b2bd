"""Client channels between services, with the same limits as the servers."""

from __future__ import annotations

import grpc

from odradek.rpc.server import CHANNEL_OPTIONS


def open_channel(address: str) -> grpc.aio.Channel:
    """An insecure ``grpc.aio`` channel to ``host:port`` (services bind loopback or a pod IP)."""
    return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
