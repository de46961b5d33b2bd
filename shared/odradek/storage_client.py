"""How the gateway and the offset store call storage nodes: gRPC stubs by node id, one
channel per node, re-opened when its address moves."""

from __future__ import annotations

from odradek.metadata_cache import MetadataCache
from odradek.rpc.channel import NodeChannels
from odradek.rpc.v1 import storage_pb2_grpc


class StorageUnavailable(Exception):
    kafka_error = "LEADER_NOT_AVAILABLE"


class StoragePool:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata
        self._channels = NodeChannels(storage_pb2_grpc.StorageStub)

    def stub(self, node_id: int) -> storage_pb2_grpc.StorageStub:
        address = self.metadata.current.grpc_address(node_id)
        if address is None:
            raise StorageUnavailable(f"storage node {node_id} is not known")
        return self._channels.stub(node_id, address)

    async def close(self) -> None:
        await self._channels.close()
