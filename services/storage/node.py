"""The replication core of one storage node, wired together and driven by metadata.

:class:`StorageNode` owns the hosted partitions (:class:`ReplicaManager`), the
follower side (:class:`ReplicaFetcherManager`), ISR maintenance (:class:`IsrManager`)
and the request handlers the gRPC servicer calls. It knows nothing about processes,
registration or where metadata comes from: the service feeds it the controller's
snapshots, and tests can feed it snapshots of their own to replay exact failure
orders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.controller_client import ControllerClient
from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.storage.fetch import FetchHandler
from odradek.storage.fetcher import ReplicaFetcherManager
from odradek.storage.isr import IsrManager
from odradek.storage.metrics import StorageMetrics
from odradek.storage.offsets import OffsetsHandler
from odradek.storage.produce import ProduceHandler
from odradek.storage.replica_manager import ReplicaManager, monotonic_ms
from odradek.storage.servicer import Handlers
from odradek.storage.settings import StorageSettings
from odradek.storage.txn_markers import TxnMarkersHandler
from odradek.storage.txn_verification import TxnVerifier

log = logging.getLogger("odradek.storage.node")


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
        self.fetchers = ReplicaFetcherManager(
            settings, self._leader_address, incarnation, self.metrics
        )
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
            OffsetsHandler(self.replicas),
            TxnMarkersHandler(self.replicas, default_timeout_ms=settings.request_timeout_ms),
        )

    def _leader_address(self, node_id: int) -> str | None:
        return self.snapshot.grpc_address(node_id) if self.snapshot is not None else None

    def start(self) -> None:
        self.isr.start()

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
        await self.fetchers.shutdown()
        await self.verifier.close()
