"""The ``OffsetStore`` gRPC servicer: a thin shell over :class:`OffsetStore`."""

from __future__ import annotations

import grpc

from odradek.offsets.store import OffsetStore
from odradek.rpc.v1 import offsets_pb2, offsets_pb2_grpc, transactions_pb2


class OffsetStoreServicer(offsets_pb2_grpc.OffsetStoreServicer):
    def __init__(self, store: OffsetStore) -> None:
        self.store = store

    async def CommitOffsets(
        self, request: offsets_pb2.CommitOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> offsets_pb2.CommitOffsetsResponse:
        return await self.store.commit(request)

    async def FetchOffsets(
        self, request: offsets_pb2.FetchOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> offsets_pb2.FetchOffsetsResponse:
        return self.store.fetch(request)

    async def DeleteOffsets(
        self, request: offsets_pb2.DeleteOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> offsets_pb2.DeleteOffsetsResponse:
        return await self.store.delete_offsets(request)

    async def StoreGroups(
        self, request: offsets_pb2.StoreGroupsRequest, context: grpc.aio.ServicerContext
    ) -> offsets_pb2.StoreGroupsResponse:
        return offsets_pb2.StoreGroupsResponse(error_code=await self.store.store_groups(request))

    async def LoadShard(
        self, request: offsets_pb2.LoadShardRequest, context: grpc.aio.ServicerContext
    ) -> offsets_pb2.LoadShardResponse:
        return self.store.load_shard(request)

    async def WriteTxnMarkers(
        self, request: transactions_pb2.WriteTxnMarkersRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.WriteTxnMarkersResponse:
        return await self.store.write_txn_markers(request)
