"""Calls to the offset store owning a shard, for the coordinator and the gateway.

The owner of shard ``s`` follows from the metadata (:func:`odradek.group_shard.
offset_store_of`); channels are kept per node and re-opened when its address moves.
Transport failures become Kafka errors the callers can hand to clients:
COORDINATOR_NOT_AVAILABLE (retriable; clients look the coordinator up again).
"""

from __future__ import annotations

import logging

import grpc

from odradek.group_shard import offset_store_of
from odradek.metadata_cache import MetadataCache
from odradek.protocol.errors import ErrorCode
from odradek.rpc.channel import NodeChannels
from odradek.rpc.v1 import offsets_pb2, offsets_pb2_grpc

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0


class OffsetStoreClient:
    def __init__(self, metadata: MetadataCache, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.metadata = metadata
        self.timeout_s = timeout_s
        self._channels = NodeChannels(offsets_pb2_grpc.OffsetStoreStub)

    def stub(self, shard: int) -> offsets_pb2_grpc.OffsetStoreStub | None:
        node = offset_store_of(self.metadata.current.raw, shard)
        if node is None or node.grpc_port <= 0:
            return None
        return self._channels.stub(node.node_id, f"{node.host}:{node.grpc_port}")

    async def close(self) -> None:
        await self._channels.close()

    async def commit(
        self, shard: int, request: offsets_pb2.CommitOffsetsRequest
    ) -> offsets_pb2.CommitOffsetsResponse:
        stub = self.stub(shard)
        if stub is None:
            return offsets_pb2.CommitOffsetsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            return await stub.CommitOffsets(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            log.debug("CommitOffsets to the offset store failed: %s", exc.code())
            return offsets_pb2.CommitOffsetsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def delete(
        self, shard: int, request: offsets_pb2.DeleteOffsetsRequest
    ) -> offsets_pb2.DeleteOffsetsResponse:
        stub = self.stub(shard)
        if stub is None:
            return offsets_pb2.DeleteOffsetsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            return await stub.DeleteOffsets(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError:
            return offsets_pb2.DeleteOffsetsResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def fetch(
        self, shard: int, request: offsets_pb2.FetchOffsetsRequest
    ) -> offsets_pb2.FetchOffsetsResponse:
        """Groups the store could not be asked about come back with a group-level error."""
        stub = self.stub(shard)
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if stub is not None:
            try:
                return await stub.FetchOffsets(request, timeout=self.timeout_s)
            except grpc.aio.AioRpcError as exc:
                log.debug("FetchOffsets failed: %s", exc.code())
        return offsets_pb2.FetchOffsetsResponse(
            groups=[
                offsets_pb2.FetchOffsetsGroupResult(group_id=g.group_id, error_code=error)
                for g in request.groups
            ]
        )

    async def store_groups(self, shard: int, request: offsets_pb2.StoreGroupsRequest) -> int:
        stub = self.stub(shard)
        if stub is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            response = await stub.StoreGroups(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return int(response.error_code)

    async def load_shard(
        self, shard: int, request: offsets_pb2.LoadShardRequest
    ) -> offsets_pb2.LoadShardResponse:
        stub = self.stub(shard)
        if stub is None:
            return offsets_pb2.LoadShardResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            return await stub.LoadShard(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError:
            return offsets_pb2.LoadShardResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
