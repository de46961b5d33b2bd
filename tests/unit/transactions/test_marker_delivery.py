"""Marker delivery against a gRPC server that answers WriteTxnMarkers as scripted:
retries until every partition accepts, partitions of deleted topics are done, a fenced
answer ends the job, a node that does not serve the RPC is retried, partitions of one
leader travel in one request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from odradek.metadata_cache import MetadataCache
from odradek.offset_store_client import OffsetStoreClient
from odradek.protocol.errors import ErrorCode as E
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import common_pb2, storage_pb2_grpc, transactions_pb2
from odradek.storage_client import StoragePool
from odradek.transactions.markers import MarkerSender
from odradek.transactions.shard import MarkerJob


class ScriptedStorage(storage_pb2_grpc.StorageServicer):
    """Answers each partition with the next code of its script (NONE once it runs out)."""

    def __init__(self) -> None:
        self.script: dict[tuple[str, int], list[int]] = {}
        self.requests: list[transactions_pb2.WriteTxnMarkersRequest] = []
        self.unavailable = 0  # answer UNIMPLEMENTED this many times first

    async def WriteTxnMarkers(
        self, request: transactions_pb2.WriteTxnMarkersRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.WriteTxnMarkersResponse:
        if self.unavailable:
            self.unavailable -= 1
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not yet")
        self.requests.append(request)
        response = transactions_pb2.WriteTxnMarkersResponse()
        for marker in request.markers:
            result = response.markers.add(producer_id=marker.producer_id)
            for topic in marker.topics:
                for p in topic.partitions:
                    codes = self.script.get((topic.topic, p), [])
                    result.partitions.add(
                        topic=topic.topic, partition=p, error_code=codes.pop(0) if codes else 0
                    )
        return response


@pytest.fixture
async def storage() -> AsyncIterator[tuple[ScriptedStorage, MarkerSender, MetadataCache]]:
    servicer = ScriptedStorage()
    server = RpcServer("127.0.0.1", 0)
    storage_pb2_grpc.add_StorageServicer_to_server(servicer, server.server)
    port = await server.start()
    metadata = MetadataCache()
    await metadata.update(
        common_pb2.ClusterMetadata(
            version=1,
            nodes=[
                common_pb2.Node(
                    node_id=100,
                    kind=common_pb2.STORAGE,
                    host="127.0.0.1",
                    grpc_port=port,
                    state=common_pb2.ONLINE,
                )
            ],
            topics=[
                common_pb2.Topic(
                    name="t",
                    partitions=[
                        common_pb2.Partition(partition=0, replicas=[100], isr=[100], leader=100),
                        common_pb2.Partition(partition=1, replicas=[100], isr=[100], leader=100),
                    ],
                )
            ],
        )
    )
    pool = StoragePool(metadata)
    offsets = OffsetStoreClient(metadata)
    sender = MarkerSender(metadata, pool, offsets, backoff_ms=1)
    yield servicer, sender, metadata
    await sender.close()
    await pool.close()
    await offsets.close()
    await server.stop(0)


def job(*partitions: tuple[str, int]) -> MarkerJob:
    return MarkerJob("tx", 7, 3, True, 5, frozenset(partitions))


async def test_retries_until_every_partition_accepts(
    storage: tuple[ScriptedStorage, MarkerSender, MetadataCache],
) -> None:
    servicer, sender, _ = storage
    servicer.script = {
        ("t", 0): [E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT],
        ("t", 1): [E.NOT_LEADER_OR_FOLLOWER],
    }
    servicer.unavailable = 1
    assert await sender.deliver(job(("t", 0), ("t", 1))) == E.NONE
    first = servicer.requests[0]
    (marker,) = first.markers
    assert (marker.producer_id, marker.producer_epoch, marker.committed) == (7, 3, True)
    assert marker.coordinator_epoch == 5
    assert [(t.topic, list(t.partitions)) for t in marker.topics] == [("t", [0, 1])]
    # Only what failed is sent again.
    assert [[list(t.partitions) for t in r.markers[0].topics] for r in servicer.requests] == [
        [[0, 1]],
        [[0, 1]],
        [[0]],
    ]
    assert sender.stats.delivered == 2


async def test_deleted_topics_are_done_and_unknown_partitions_of_live_topics_retried(
    storage: tuple[ScriptedStorage, MarkerSender, MetadataCache],
) -> None:
    servicer, sender, _ = storage
    servicer.script = {("t", 0): [E.UNKNOWN_TOPIC_OR_PARTITION]}
    assert await sender.deliver(job(("t", 0), ("gone", 0))) == E.NONE
    assert len(servicer.requests) == 2  # "gone" was never asked for; t-0 asked twice
    assert all(t.topic == "t" for r in servicer.requests for t in r.markers[0].topics)


@pytest.mark.parametrize("fatal", [E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED])
async def test_a_fenced_answer_ends_the_job(
    storage: tuple[ScriptedStorage, MarkerSender, MetadataCache], fatal: int
) -> None:
    servicer, sender, _ = storage
    servicer.script = {("t", 1): [fatal]}
    assert await sender.deliver(job(("t", 0), ("t", 1))) == fatal


async def test_background_jobs_report_and_cancel(
    storage: tuple[ScriptedStorage, MarkerSender, MetadataCache],
) -> None:
    servicer, sender, _ = storage
    done = asyncio.Event()
    sender.start(3, job(("t", 0)), done.set, lambda e: None)
    await asyncio.wait_for(done.wait(), 10)
    servicer.script = {("t", 0): [E.NOT_ENOUGH_REPLICAS] * 10_000}
    failed: list[int] = []
    sender.start(3, job(("t", 0)), lambda: failed.append(0), failed.append)
    await asyncio.sleep(0.05)
    await sender.cancel_shard(3)
    assert failed == []  # cancelled: neither callback runs
