"""The cluster-member half of a coordinator-like service: servers, registration, leaving.

The group coordinator, the offset store and the transaction coordinator each serve gRPC
plus ``/metrics``, register with the controller as one node kind, follow the metadata
stream and, on shutdown, stop serving before they leave. :class:`ClusterMember` holds
exactly that; each service keeps its own shards, settings and shutdown order, calling
the steps here in the order it needs (the process shell is :mod:`odradek.service`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from odradek.config import Config
from odradek.config_catalog.definition import Catalog
from odradek.controller_client import ControllerClient, Membership, join_cluster
from odradek.internal_topic.create import InternalTopic, ensure_internal_topic
from odradek.metadata_cache import MetadataCache, Snapshot
from odradek.metrics import MetricsServer
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import common_pb2, controller_pb2

log = logging.getLogger(__name__)


class ClusterMember:
    """gRPC and metrics servers, the controller client, the metadata cache, membership.

    ``catalog`` is the service's config catalog (``node.id``, ``metrics.port``);
    ``grpc.listener`` and ``controller.address`` come from ``config``.
    """

    def __init__(self, config: Config, catalog: Catalog, kind: common_pb2.NodeKind) -> None:
        self.config = config
        self.kind = kind
        self.node_id = catalog.read_int(config, "node.id")
        host, _, port = config.str("grpc.listener").rpartition(":")
        self.host = host or "127.0.0.1"
        self.rpc = RpcServer(self.host, int(port or 0))
        self.metrics_server = MetricsServer(self.host, catalog.read_int(config, "metrics.port"))
        self.controller = ControllerClient(config.str("controller.address"))
        self.metadata = MetadataCache()
        self.membership: Membership | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []

    def _on_metadata(self, previous: Snapshot, current: Snapshot) -> None:
        """Called on every metadata change once :meth:`join` ran."""

    async def join(self) -> dict[str, int]:
        """Start both servers, register this node and follow the metadata stream (not
        ready yet: :meth:`serve` says so). Returns the bound ports by role."""
        grpc_port = await self.rpc.start()
        metrics_port = await self.metrics_server.start()
        self.metadata.listeners.append(self._on_metadata)
        node = common_pb2.Node(
            node_id=self.node_id,
            kind=self.kind,
            host=self.host,
            grpc_port=grpc_port,
            metrics_port=metrics_port,
        )
        self.membership, watch = await join_cluster(
            self.controller, self.metadata, node, self._stop
        )
        self._tasks.append(watch)
        return {"grpc": grpc_port, "metrics": metrics_port}

    async def create_internal_topic(
        self, describe: Callable[[], InternalTopic], timeout_ms: int
    ) -> None:
        """Create the service's internal topic, waiting at most ``timeout_ms``; when it is
        not ready by then the service starts anyway and loads its shards once it is."""
        created = await ensure_internal_topic(
            self.controller, self.metadata, describe, timeout_ms / 1000.0
        )
        if not created:
            log.warning("%s is not ready yet; shards will load once it is", describe().name)

    async def serve(self, ready: bool) -> None:
        """Mark the gRPC health service and ``/readyz`` ready (or no longer ready)."""
        await self.rpc.set_serving(live=True, ready=ready)
        self.metrics_server.ready = ready

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move what this node owns elsewhere (best effort)."""
        if self.membership is not None and self.membership.incarnation:
            with contextlib.suppress(Exception):
                await self.controller.call(
                    lambda s: s.ShutdownNode,
                    controller_pb2.ShutdownNodeRequest(
                        node_id=self.node_id, incarnation=self.membership.incarnation
                    ),
                    timeout=3.0,
                )

    async def leave(self) -> None:
        """Stop heartbeating and every background task (the metadata watch included)."""
        self._stop.set()
        if self.membership is not None:
            await self.membership.stop()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def close_clients(self) -> None:
        """Close the controller client and the metrics server (the last step of stop)."""
        await self.controller.close()
        await self.metrics_server.stop()
