"""gRPC stubs to storage nodes, one channel per node, re-opened when its address moves."""

from __future__ import annotations

import contextlib

import grpc

from odradek.metadata_cache import MetadataCache
from odradek.rpc.channel import open_channel
from odradek.rpc.v1 import storage_pb2_grpc


class StorageUnavailable(Exception):
    kafka_error = "LEADER_NOT_AVAILABLE"


class StoragePool:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata
        self._channels: dict[int, tuple[str, grpc.aio.Channel, storage_pb2_grpc.StorageStub]] = {}
        self._retired: list[grpc.aio.Channel] = []

    def stub(self, node_id: int) -> storage_pb2_grpc.StorageStub:
        address = self.metadata.current.grpc_address(node_id)
        if address is None:
            raise StorageUnavailable(f"storage node {node_id} is not known")
        entry = self._channels.get(node_id)
        if entry is None or entry[0] != address:
            if entry is not None:
                # In-flight calls on the old channel may still finish; close it at shutdown.
                self._retired.append(entry[1])
            channel = open_channel(address)
            entry = (address, channel, storage_pb2_grpc.StorageStub(channel))
            self._channels[node_id] = entry
        return entry[2]

    async def close(self) -> None:
        channels = [entry[1] for entry in self._channels.values()] + self._retired
        for channel in channels:
            with contextlib.suppress(Exception):
                await channel.close(None)
        self._channels.clear()
        self._retired.clear()
