"""A storage node's data link server on a real socket with stand-in handlers, and a
gateway-side pool whose metadata names it (odradek.storage.data_link,
odradek.datalink.client): for tests of the link itself, without a storage node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from odradek.controller_client import ControllerClient
from odradek.datalink.client import DataLinkPool, fetch_answer
from odradek.datalink.frame import FETCH
from odradek.metadata_cache import MetadataCache
from odradek.rpc.v1 import common_pb2, storage_pb2
from odradek.storage.data_link import DataLinkServer
from odradek.storage.fetch import FetchHandler
from odradek.storage.isr import IsrManager
from odradek.storage.metrics import StorageMetrics
from odradek.storage.produce import ProduceHandler
from odradek.storage.replica_manager import ReplicaManager


@dataclass
class LeaderHandlers:
    """The data link handlers a leader's tests call: Produce and Fetch."""

    produce: ProduceHandler
    fetch: FetchHandler


def leader_handlers(replicas: ReplicaManager, node_id: int) -> LeaderHandlers:
    """A storage node's real Produce and Fetch handlers over ``replicas``, with an ISR
    manager whose controller is never reached (nothing here shrinks or expands the ISR)."""
    metrics = StorageMetrics()
    isr = IsrManager(
        node_id,
        ControllerClient("127.0.0.1:9"),
        lambda: 1,
        lambda: list(replicas),
        replica_lag_time_max_ms=30_000,
        clock_ms=replicas.clock_ms,
        metrics=metrics,
    )
    return LeaderHandlers(
        ProduceHandler(replicas, metrics), FetchHandler(replicas, isr, metrics, lambda: False)
    )


@asynccontextmanager
async def served_data_link(
    handlers: object, node_id: int
) -> AsyncIterator[tuple[DataLinkServer, DataLinkPool]]:
    """``handlers`` stand in for the node's (only the calls a test makes are needed)."""
    server = DataLinkServer("127.0.0.1", 0, lambda: cast(Any, handlers))
    port = await server.start()
    cache = MetadataCache()
    await cache.update(
        common_pb2.ClusterMetadata(
            version=1,
            nodes=[
                common_pb2.Node(
                    node_id=node_id, kind=common_pb2.STORAGE, host="127.0.0.1", data_port=port
                )
            ],
        )
    )
    pool = DataLinkPool(cache)
    try:
        yield server, pool
    finally:
        await pool.close()
        await server.stop()


def fetch_one_partition(
    pool: DataLinkPool,
    node_id: int,
    replica_id: int,
    offset: int,
    *,
    wait_ms: int = 10_000,
    isolation: int = 0,
    topic: str = "t",
) -> asyncio.Future[tuple[storage_pb2.FetchPartitionResult, bytes]]:
    """A data link Fetch of partition 0 from ``offset`` (a follower's when
    ``replica_id`` >= 0, a consumer's otherwise), started now: its partition's result
    and records."""
    request = storage_pb2.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation,
        partitions=[
            storage_pb2.FetchPartition(
                topic=topic,
                partition=0,
                fetch_offset=offset,
                partition_max_bytes=1 << 20,
                current_leader_epoch=0,
                last_fetched_epoch=-1,
            )
        ],
    ).SerializeToString()

    async def call() -> tuple[storage_pb2.FetchPartitionResult, bytes]:
        response, records = fetch_answer(await pool.call(node_id, FETCH, request, [], timeout=30))
        return response.partitions[0], bytes(records[0])

    return asyncio.ensure_future(call())
