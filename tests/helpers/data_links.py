"""A storage node's data link server on a real socket with stand-in handlers, and a
gateway-side pool whose metadata names it (odradek.storage.data_link,
odradek.datalink.client): for tests of the link itself, without a storage node."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from odradek.datalink.client import DataLinkPool
from odradek.metadata_cache import MetadataCache
from odradek.rpc.v1 import common_pb2
from odradek.storage.data_link import DataLinkServer


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
