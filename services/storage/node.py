"""The replication core of one storage node, wired together and driven by metadata.

:class:`StorageNode` owns the hosted partitions (:class:`ReplicaManager`), the
follower side (:class:`ReplicaFetcherManager`), ISR maintenance (:class:`IsrManager`)
and the request handlers the gRPC servicer calls. It knows nothing about processes,
registration or where metadata comes from: the service feeds it the controller's
snapshots, and tests can feed it snapshots of their own to replay exact failure
orders.

It also owns what concerns the node's log directories: moves between them
(:class:`LogDirMover`, AlterReplicaLogDirs) and failures. A directory that fails (an
I/O error seen by a request on the loop or by a maintenance job in a worker thread)
takes only its replicas offline; the node keeps telling the controller which replicas
are offline (ReportOfflineReplicas, again after each re-registration) so leadership
moves to replicas on healthy disks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from odradek.controller_client import ControllerClient
from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2, controller_pb2
from odradek.storage.fetch import FetchHandler
from odradek.storage.fetcher import ReplicaFetcherManager
from odradek.storage.isr import IsrManager
from odradek.storage.leader_offsets import LeaderOffsetsHandler
from odradek.storage.log_dir_mover import LogDirMover
from odradek.storage.log_dirs import LogDirsHandler
from odradek.storage.metrics import StorageMetrics
from odradek.storage.partition import Partition
from odradek.storage.produce import ProduceHandler
from odradek.storage.replica_manager import ReplicaManager, monotonic_ms
from odradek.storage.servicer import Handlers
from odradek.storage.settings import StorageSettings
from odradek.storage.tasks import cancel_and_wait
from odradek.storage.txn_markers import TxnMarkersHandler
from odradek.storage.txn_verification import TxnVerifier

log = logging.getLogger(__name__)


class StorageNode:
    def __init__(
        self,
        settings: StorageSettings,
        log_manager: LogManager,
        controller: ControllerClient,
        *,
        incarnation: Callable[[], int],
        metrics: StorageMetrics | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or StorageMetrics()
        self.stopping = False
        self.snapshot: Snapshot | None = None
        self.replicas = ReplicaManager(
            settings.node_id,
            log_manager,
            settings.broker_defaults,
            replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
            clock_ms=clock_ms,
        )
        self.log_manager = log_manager
        self.controller = controller
        self.incarnation = incarnation
        self.fetchers = ReplicaFetcherManager(
            settings,
            self._leader_address,
            incarnation,
            self.metrics,
            self.replicas.quotas,
            self._leader_data_address,
            self._leader_data_socket,
        )
        self.mover = LogDirMover(log_manager, self.replicas.quotas.alter_log_dirs)
        self.isr = IsrManager(
            settings.node_id,
            controller,
            incarnation,
            self.replicas.leaders,
            replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
            clock_ms=clock_ms,
            metrics=self.metrics,
        )
        self.replicas.on_follow = self.fetchers.add
        self.replicas.on_unfollow = self.fetchers.remove
        self.replicas.on_partition_opened = self.mover.resume
        self.replicas.on_partition_removed = self.mover.cancel
        self.replicas.on_io_error = self._io_error
        self.verifier = TxnVerifier(
            lambda: self.snapshot,
            num_shards=settings.transaction_state_log_num_partitions,
            timeout_ms=settings.request_timeout_ms,
        )
        self.handlers = Handlers(
            self.replicas,
            ProduceHandler(
                self.replicas,
                self.metrics,
                self.verifier,
                verification_enabled=settings.transaction_partition_verification_enable,
            ),
            FetchHandler(self.replicas, self.isr, self.metrics, lambda: self.stopping),
            LeaderOffsetsHandler(self.replicas),
            LogDirsHandler(self.replicas, log_manager, self.mover),
            TxnMarkersHandler(self.replicas, default_timeout_ms=settings.request_timeout_ms),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reporter: asyncio.Task[None] | None = None
        self._report_wakeup = asyncio.Event()
        self._reported: tuple[int, frozenset[tuple[str, int]]] = (0, frozenset())

    def _leader_address(self, node_id: int) -> str | None:
        return self.snapshot.grpc_address(node_id) if self.snapshot is not None else None

    def _leader_data_address(self, node_id: int) -> tuple[str, int] | None:
        return self.snapshot.data_address(node_id) if self.snapshot is not None else None

    def _leader_data_socket(self, node_id: int) -> common_pb2.DataSocket | None:
        return self.snapshot.data_socket(node_id) if self.snapshot is not None else None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.log_manager.on_dir_failure = self._dir_failed_threadsafe
        self.isr.start()
        self.mover.start()
        self._reporter = self._loop.create_task(self._report_offline(), name="offline-replicas")

    def apply(self, snapshot: Snapshot) -> None:
        """Move every partition to the state ``snapshot`` describes (older ones are ignored)."""
        if self.stopping or snapshot.version <= self.replicas.applied_version:
            return
        self.snapshot = snapshot
        try:
            self.replicas.apply(snapshot)
        except Exception:
            log.exception("applying metadata version %d failed", snapshot.version)
        self.fetchers.refresh_addresses()

    async def stop(self) -> None:
        """Stop serving and replicating; every waiting request is answered."""
        self.stopping = True
        self.replicas.stop_all()
        await self.isr.stop()
        await self.mover.stop()
        await cancel_and_wait([self._reporter])
        await self.fetchers.shutdown()
        await self.verifier.close()

    # -- failed log directories ------------------------------------------------------------
    def _io_error(self, part: Partition, exc: OSError) -> None:
        self.log_manager.io_failure((part.topic, part.index), exc)
        self._dir_failed(part.log.dir.parent)

    def _dir_failed_threadsafe(self, d: Path, _reason: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._dir_failed, d)

    def _dir_failed(self, d: Path) -> None:
        """Directory ``d`` is offline: its replicas stop serving and fetching."""
        for part in self.replicas:
            if part.log.dir.parent == d:
                self.fetchers.remove(part)
                part.go_offline()
        self.mover.forget_dir(d)
        self._report_wakeup.set()

    def offline_replicas(self) -> frozenset[tuple[str, int]]:
        return frozenset(
            {*self.replicas.offline, *((p.topic, p.index) for p in self.replicas if p.offline)}
        )

    async def _report_offline(self) -> None:
        """Tell the controller which replicas are offline, until it has heard it from
        this incarnation (it forgets them when the node registers again)."""
        while not self.stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._report_wakeup.wait(), 1.0)
            self._report_wakeup.clear()
            offline = self.offline_replicas()
            incarnation = self.incarnation()
            if not offline or not incarnation or self._reported == (incarnation, offline):
                continue
            request = controller_pb2.ReportOfflineReplicasRequest(
                node_id=self.settings.node_id,
                incarnation=incarnation,
                offline_log_dirs=sorted(str(d) for d in self.log_manager.offline_dirs),
                partitions=[common_pb2.TopicPartition(topic=t, partition=i) for t, i in offline],
            )
            try:
                response = await self.controller.call(
                    lambda s: s.ReportOfflineReplicas, request, timeout=10.0
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cannot report offline replicas to the controller: %s", exc)
                continue
            if response.error_code == 0:
                self._reported = (incarnation, offline)
                log.warning("reported %d offline replica(s) to the controller", len(offline))
