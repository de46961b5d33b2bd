"""The gRPC ``Storage`` servicer: protobuf in, handler call, protobuf out.

The handlers do the work (:mod:`produce`, :mod:`fetch`, :mod:`offsets`,
:mod:`txn_markers`); this module
only routes, answers the two describe calls, and turns an unexpected exception into a
gRPC INTERNAL status instead of a dead handler. Until the node has loaded its logs and
applied its first metadata, calls get UNAVAILABLE so callers retry.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import storage_pb2, storage_pb2_grpc, transactions_pb2

if TYPE_CHECKING:
    from odradek.storage.fetch import FetchHandler
    from odradek.storage.leader_offsets import LeaderOffsetsHandler
    from odradek.storage.log_dirs import LogDirsHandler
    from odradek.storage.produce import ProduceHandler
    from odradek.storage.replica_manager import ReplicaManager
    from odradek.storage.txn_markers import TxnMarkersHandler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Handlers:
    """What the servicer needs once the node is up."""

    replicas: ReplicaManager
    produce: ProduceHandler
    fetch: FetchHandler
    offsets: LeaderOffsetsHandler
    log_dirs: LogDirsHandler
    txn_markers: TxnMarkersHandler


class StorageServicer(storage_pb2_grpc.StorageServicer):
    def __init__(self) -> None:
        self.handlers: Handlers | None = None

    async def _ready(self, context: grpc.aio.ServicerContext) -> Handlers:
        handlers = self.handlers
        if handlers is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "storage node is starting")
            raise AssertionError("unreachable")
        return handlers

    async def Produce(
        self, request: storage_pb2.ProduceRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.ProduceResponse:
        handlers = await self._ready(context)
        return await handlers.produce.produce(request)

    async def Fetch(
        self, request: storage_pb2.FetchRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.FetchResponse:
        handlers = await self._ready(context)
        return await handlers.fetch.fetch(request)

    async def ListOffsets(
        self, request: storage_pb2.ListOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.ListOffsetsResponse:
        handlers = await self._ready(context)
        return handlers.offsets.list_offsets(request)

    async def DeleteRecords(
        self, request: storage_pb2.DeleteRecordsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.DeleteRecordsResponse:
        handlers = await self._ready(context)
        return await handlers.offsets.delete_records(request)

    async def OffsetForLeaderEpoch(
        self, request: storage_pb2.OffsetForLeaderEpochRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.OffsetForLeaderEpochResponse:
        handlers = await self._ready(context)
        return handlers.offsets.offset_for_leader_epoch(request)

    async def ReplicaFetch(
        self,
        request_iterator: AsyncIterator[storage_pb2.FetchRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[storage_pb2.FetchResponse]:
        handlers = await self._ready(context)
        async for request in request_iterator:
            yield await handlers.fetch.fetch(request)

    async def WriteTxnMarkers(
        self, request: transactions_pb2.WriteTxnMarkersRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.WriteTxnMarkersResponse:
        handlers = await self._ready(context)
        return await handlers.txn_markers.write_txn_markers(request)

    async def DescribePartitions(
        self, request: storage_pb2.DescribePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.DescribePartitionsResponse:
        handlers = await self._ready(context)
        replicas = handlers.replicas
        if request.partitions:
            wanted = [(tp.topic, tp.partition) for tp in request.partitions]
        else:
            wanted = sorted(replicas.partitions)
        out = []
        for topic, index in wanted:
            part = replicas.get(topic, index)
            if part is None:
                out.append(
                    storage_pb2.PartitionState(
                        topic=topic,
                        partition=index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    )
                )
                continue
            out.append(
                storage_pb2.PartitionState(
                    topic=topic,
                    partition=index,
                    is_leader=part.is_leader,
                    leader_epoch=part.leader_epoch,
                    log_start_offset=part.log_start_offset,
                    log_end_offset=part.log_end_offset,
                    high_watermark=part.high_watermark,
                    size_bytes=part.size_bytes,
                    segment_count=part.segment_count,
                    log_dir=part.log_dir,
                    isr=list(part.isr),
                )
            )
        return storage_pb2.DescribePartitionsResponse(partitions=out)

    async def DescribeProducers(
        self, request: storage_pb2.DescribeProducersRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.DescribeProducersResponse:
        handlers = await self._ready(context)
        out = []
        for tp in request.partitions:
            entry = storage_pb2.PartitionProducers(topic=tp.topic, partition=tp.partition)
            out.append(entry)
            part = handlers.replicas.get(tp.topic, tp.partition)
            if part is None:
                entry.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if not part.is_leader:
                entry.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            for producer in part.producers():
                entry.producers.append(
                    storage_pb2.ProducerState(
                        producer_id=producer.producer_id,
                        producer_epoch=producer.producer_epoch,
                        last_sequence=producer.last_seq,
                        last_timestamp=producer.last_timestamp,
                        coordinator_epoch=producer.coordinator_epoch,
                        current_txn_start_offset=producer.current_txn_first_offset,
                    )
                )
        return storage_pb2.DescribeProducersResponse(partitions=out)

    async def DescribeLogDirs(
        self, request: storage_pb2.DescribeLogDirsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.DescribeLogDirsResponse:
        handlers = await self._ready(context)
        return handlers.log_dirs.describe(request)

    async def AlterReplicaLogDirs(
        self, request: storage_pb2.AlterReplicaLogDirsRequest, context: grpc.aio.ServicerContext
    ) -> storage_pb2.AlterReplicaLogDirsResponse:
        handlers = await self._ready(context)
        return handlers.log_dirs.alter(request)
