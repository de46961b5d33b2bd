"""The storage node process: logs on disk, the Storage gRPC API, replication.

Start-up order (Kafka's broker start, with our controller): bind the gRPC and metrics
listeners (their ports go into the registration) -> ask the controller for the
cluster id -> open the log directories (recovery runs here, off the event loop) ->
register (kind STORAGE) and start heartbeats -> follow the metadata stream and apply
the first snapshot (partitions become leaders/followers) -> ready.

Shutdown on SIGTERM (Kafka's controlled shutdown): tell the controller (ShutdownNode),
keep serving until it reports that this node leads nothing any more (the heartbeat's
``shutdown_ready``) or ``controlled.shutdown.timeout.ms`` passes, then stop serving,
stop fetching, and flush and checkpoint the logs so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from odradek.config import Config
from odradek.controller_client import ControllerClient, Membership
from odradek.datalink.unix_hello import encode_hello, new_token
from odradek.datalink.unix_socket import UnixLinkError, host_id
from odradek.log.manager import LogManager
from odradek.metadata_cache import MetadataCache
from odradek.metrics import MetricsServer
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import common_pb2, controller_pb2, storage_pb2_grpc
from odradek.storage.data_link import DataLinkServer
from odradek.storage.log_maintenance import run_log_maintenance
from odradek.storage.metrics import (
    PartitionCollector,
    StorageMetrics,
    register_collector,
    unregister_collector,
)
from odradek.storage.node import StorageNode
from odradek.storage.servicer import StorageServicer
from odradek.storage.settings import DEFAULTS, StorageSettings
from odradek.storage.tasks import cancel_and_wait

log = logging.getLogger(__name__)

FIRST_METADATA_TIMEOUT_S = 60.0


class StorageService:
    name = "storage"

    def __init__(self, settings: StorageSettings) -> None:
        self.settings = settings
        self.metrics = StorageMetrics()
        self.servicer = StorageServicer()
        self.rpc: RpcServer | None = None  # grpc.aio binds to the loop: built in start()
        self.metrics_server = MetricsServer(settings.host, settings.metrics_port)
        self.controller = ControllerClient(settings.controller_address)
        self.cache = MetadataCache()
        self.log_manager: LogManager | None = None
        self.node: StorageNode | None = None
        self.membership: Membership | None = None
        self.collector: PartitionCollector | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._first_metadata = asyncio.Event()
        self.data_link: DataLinkServer | None = None
        self._shutdown_ready = asyncio.Event()

    # -- start ----------------------------------------------------------------------------
    async def start(self) -> dict[str, int]:
        s = self.settings
        self.rpc = RpcServer(s.host, s.grpc_port)
        storage_pb2_grpc.add_StorageServicer_to_server(self.servicer, self.rpc.server)
        grpc_port = await self.rpc.start()
        metrics_port = await self.metrics_server.start()
        data_port = 0
        data_socket: common_pb2.DataSocket | None = None
        if s.data_port >= 0:
            servicer = self.servicer
            self.data_link = DataLinkServer(s.host, s.data_port, lambda: servicer.handlers)
            data_port = await self.data_link.start()
            if s.data_socket_path:
                data_socket = serve_data_socket(self.data_link, s.node_id, Path(s.data_socket_path))

        metadata = await self.controller.get_metadata(timeout=3600.0)
        log_manager = await asyncio.to_thread(self._open_logs, metadata.cluster_id)
        self.log_manager = log_manager

        self.membership = Membership(
            self.controller,
            common_pb2.Node(
                node_id=s.node_id,
                kind=common_pb2.STORAGE,
                host=s.host,
                grpc_port=grpc_port,
                metrics_port=metrics_port,
                rack=s.rack,
                data_port=data_port,
                data_socket=data_socket,
            ),
        )
        self.membership.on_heartbeat = self._on_heartbeat
        membership = self.membership
        node = StorageNode(
            s,
            log_manager,
            self.controller,
            incarnation=lambda: membership.incarnation,
            metrics=self.metrics,
        )
        self.node = node
        self.servicer.handlers = node.handlers
        self.collector = PartitionCollector(lambda: list(node.replicas))
        register_collector(self.collector)

        await self.membership.register()
        self.membership.start()
        loop = asyncio.get_running_loop()
        self._tasks.append(
            loop.create_task(
                self.controller.watch(self._on_metadata, self._stop), name="metadata-watch"
            )
        )
        self._tasks.append(
            loop.create_task(self._run_log_maintenance(log_manager), name="log-maintenance")
        )
        node.start()
        try:
            async with asyncio.timeout(FIRST_METADATA_TIMEOUT_S):
                await self._first_metadata.wait()
        except TimeoutError:
            log.warning(
                "no metadata from the controller after %.0f s; serving anyway",
                FIRST_METADATA_TIMEOUT_S,
            )
        await self.rpc.set_serving(live=True, ready=True)
        self.metrics_server.ready = True
        log.info(
            "storage node %d up: grpc %d, metrics %d, %d partitions",
            s.node_id,
            grpc_port,
            metrics_port,
            len(node.replicas.partitions),
        )
        return {"grpc": grpc_port, "metrics": metrics_port}

    def _open_logs(self, cluster_id: str) -> LogManager:
        return LogManager(
            [d.resolve() for d in self.settings.log_dirs],
            self.settings.node_id,
            cluster_id,
            self.settings.broker_defaults,
        )

    async def _run_log_maintenance(self, log_manager: LogManager) -> None:
        try:
            await run_log_maintenance(log_manager, self._stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("log maintenance stopped")

    async def _on_metadata(self, raw: common_pb2.ClusterMetadata) -> None:
        await self.cache.update(raw)
        snapshot = self.cache.current
        if self.node is not None:
            self.node.apply(snapshot)
        if snapshot.version > 0:
            self._first_metadata.set()

    def _on_heartbeat(self, response: controller_pb2.HeartbeatResponse) -> None:
        if response.shutdown_ready:
            self._shutdown_ready.set()

    # -- stop -----------------------------------------------------------------------------
    async def stop(self) -> None:
        s = self.settings
        if (
            s.controlled_shutdown_enable
            and self.membership is not None
            and self.membership.registered.is_set()
        ):
            await self._controlled_shutdown(s.controlled_shutdown_timeout_ms / 1000.0)
        self._stop.set()
        if self.rpc is not None:
            await self.rpc.set_serving(live=True, ready=False)
        self.metrics_server.ready = False
        if self.membership is not None:
            # Bounded: a cancellation swallowed inside a gRPC call must not hang the stop.
            await asyncio.wait({asyncio.ensure_future(self.membership.stop())}, timeout=5.0)
        await cancel_and_wait(self._tasks)
        if self.node is not None:
            await self.node.stop()  # answers every long poll and acks=-1 wait
        if self.rpc is not None:
            await self.rpc.stop(grace=1.0)
        if self.data_link is not None:
            await self.data_link.stop()
        if self.log_manager is not None:
            await asyncio.to_thread(self.log_manager.shutdown)
        if self.collector is not None:
            unregister_collector(self.collector)
        await self.controller.close()
        await self.metrics_server.stop()

    async def _controlled_shutdown(self, timeout: float) -> None:
        assert self.membership is not None
        request = controller_pb2.ShutdownNodeRequest(
            node_id=self.settings.node_id, incarnation=self.membership.incarnation
        )
        try:
            async with asyncio.timeout(timeout):
                response = await self.controller.call(
                    lambda st: st.ShutdownNode, request, timeout=timeout
                )
                if response.error_code:
                    log.warning("controlled shutdown refused: error %d", response.error_code)
                    return
                if not response.remaining_leaderships:
                    return
                log.info(
                    "controlled shutdown: waiting for %d leaderships to move",
                    len(response.remaining_leaderships),
                )
                await self._shutdown_ready.wait()
        except TimeoutError:
            log.warning("controlled shutdown did not finish in %.1f s; stopping anyway", timeout)
        except Exception as exc:
            log.warning("controlled shutdown failed: %s", exc)


def build(config: Config) -> StorageService:
    return StorageService(StorageSettings.from_config(config))


def serve_data_socket(
    link: DataLinkServer, node_id: int, path: Path
) -> common_pb2.DataSocket | None:
    """The data link also on the Unix socket ``path`` (docs/data-link.md, "Same host"):
    what to register, or None when the path cannot be served (gateways then use TCP)."""
    token = new_token()
    try:
        link.serve_unix(path, encode_hello(node_id, token))
    except (UnixLinkError, OSError) as exc:
        log.warning("data link: no Unix socket, gateways on this host use TCP: %s", exc)
        return None
    log.info("data link: also on the Unix socket %s", path)
    return common_pb2.DataSocket(path=str(path), host_id=host_id(), token=token)


__all__ = ["DEFAULTS", "StorageService", "build"]
