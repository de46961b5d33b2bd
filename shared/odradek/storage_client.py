"""How the gateway and the offset store call storage nodes: gRPC stubs by node id, one
channel per node, re-opened when its address moves; and Produce/Fetch, which go over
the node's data link (docs/data-link.md) when it has one, over gRPC otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from odradek.datalink.client import DataLinkPool, fetch_answer, fetch_request
from odradek.datalink.frame import PRODUCE, Buffer, Frame, meta_bytes
from odradek.metadata_cache import MetadataCache
from odradek.rpc.channel import NodeChannels
from odradek.rpc.v1 import storage_pb2, storage_pb2_grpc


class StorageUnavailable(Exception):
    kafka_error = "LEADER_NOT_AVAILABLE"


class StoragePool:
    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata
        self._channels = NodeChannels(storage_pb2_grpc.StorageStub)
        self._links: DataLinkPool | None = None

    def stub(self, node_id: int) -> storage_pb2_grpc.StorageStub:
        address = self.metadata.current.grpc_address(node_id)
        if address is None:
            raise StorageUnavailable(f"storage node {node_id} is not known")
        return self._channels.stub(node_id, address)

    def _link(self, node_id: int) -> DataLinkPool | None:
        if self.metadata.current.data_address(node_id) is None:
            return None
        if self._links is None:
            self._links = DataLinkPool(self.metadata)
        return self._links

    async def produce(
        self,
        node_id: int,
        request: bytes,
        records: Sequence[Buffer],
        timeout: float,
        on_sent: Callable[[], None] | None = None,
    ) -> storage_pb2.ProduceResponse:
        """``request`` is a serialized ProduceRequest with empty ``records`` fields (the
        gateway joins it from parts serialized once, odradek.gateway.apis.produce);
        ``records[i]`` are partition i's batches. Raises what a failed gRPC call raises,
        DataLinkError or TimeoutError.

        ``on_sent`` runs when the next request of the same ``ordering_lane`` may be sent
        without overtaking this one: over the data link once this one is written to the
        connection (the node appends a lane's requests in arrival order), over gRPC only
        when this call is over (the caller runs it then)."""
        link = self._link(node_id)
        if link is not None:
            frame = await link.call(node_id, PRODUCE, request, records, timeout, on_sent)
            return storage_pb2.ProduceResponse.FromString(meta_bytes(frame))
        rpc = storage_pb2.ProduceRequest.FromString(request)
        rpc.ordering_lane = 0
        for part, data in zip(rpc.partitions, records, strict=True):
            part.records = bytes(data)
        response: storage_pb2.ProduceResponse = await self.stub(node_id).Produce(
            rpc, timeout=timeout
        )
        return response

    async def fetch(
        self, node_id: int, request: storage_pb2.FetchRequest, timeout: float
    ) -> tuple[storage_pb2.FetchResponse, list[Buffer]]:
        """The answer and, beside it, each partition's records in the same order (the
        answer's own ``records`` fields are not to be read)."""
        link = self._link(node_id)
        if link is not None:
            kind, meta = fetch_request(request)
            return fetch_answer(await link.call(node_id, kind, meta, (), timeout))
        answer: storage_pb2.FetchResponse = await self.stub(node_id).Fetch(request, timeout=timeout)
        return answer, [r.records for r in answer.partitions]

    def produce_started(
        self, node_id: int, request: bytes, records: Sequence[Buffer], timeout: float
    ) -> asyncio.Future[Frame] | None:
        """:meth:`produce` without a task: the call is written now on the node's open
        data link (the next request of its ordering lane may follow at once) and its
        answer frame comes in the future (:func:`~odradek.datalink.client.answer_of`,
        then a ProduceResponse from its meta); None when the node has no data link or
        no open connection to it (use :meth:`produce`)."""
        if self._links is None or self.metadata.current.data_address(node_id) is None:
            return None
        return self._links.start_call(node_id, PRODUCE, request, records, timeout)

    def fetch_started(
        self, node_id: int, request: storage_pb2.FetchRequest, timeout: float
    ) -> asyncio.Future[Frame] | None:
        """:meth:`fetch` without a task: the call is sent on the node's open data link
        and its answer frame comes in the future (read it with
        :func:`~odradek.datalink.client.fetch_answer` after
        :func:`~odradek.datalink.client.answer_of`); None when the node has no data
        link or no open connection to it (use :meth:`fetch`)."""
        if self._links is None or self.metadata.current.data_address(node_id) is None:
            return None
        kind, meta = fetch_request(request)
        return self._links.start_call(node_id, kind, meta, (), timeout)

    async def close(self) -> None:
        await self._channels.close()
        if self._links is not None:
            await self._links.close()
