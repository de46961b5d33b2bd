"""The transaction coordinator service: owns the ``__transaction_state`` shards the
controller gives it.

Start-up: register as a TRANSACTION_COORDINATOR node, follow the metadata stream,
create ``__transaction_state`` if nobody has (internal, compacted,
``transaction.state.log.*``), then serve. The controller spreads the shards over online
transaction coordinators (``ClusterMetadata.transaction_shards``); a shard newly owned
(or owned under a new epoch) gets a :class:`~odradek.shard_runtime.ShardRuntime` running
a :class:`~odradek.transactions.shard.TransactionShard`, which replays the partition
(requests get COORDINATOR_LOAD_IN_PROGRESS meanwhile) and then finishes every prepared
transaction (markers re-sent). A shard no longer owned is closed: its waiting callers
hear NOT_COORDINATOR and its marker jobs stop (the new owner resends them from the
log). On SIGTERM it asks the controller for a controlled shutdown first, so shards move
before it stops.

Settings, Kafka's names: ``transaction.max.timeout.ms``,
``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
``transactional.id.expiration.ms``,
``transaction.remove.expired.transaction.cleanup.interval.ms``,
``transaction.state.log.*``. Each is read from this service's configuration when set
there, else from the cluster configs the controller publishes, else Kafka's default.
Producer ids come from the controller's blocks (:mod:`odradek.producer_id_blocks`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from odradek.cluster_member import ClusterMember
from odradek.config import Config
from odradek.config_catalog.transactions import TRANSACTIONS_CONFIGS
from odradek.internal_topic.create import (
    broker_setting,
    transaction_state_topic,
)
from odradek.metadata_cache import Snapshot
from odradek.offset_store_client import OffsetStoreClient
from odradek.producer_id_blocks import ProducerIdBlocks, from_controller
from odradek.rpc.v1 import common_pb2, transactions_pb2_grpc
from odradek.shard_runtime import AsyncScheduler, ShardRuntime, ShardStatus
from odradek.storage_client import StoragePool
from odradek.transaction_shard import transaction_coordinator_of, transaction_shard_of
from odradek.transactions import metrics
from odradek.transactions.markers import MarkerSender
from odradek.transactions.servicer import TransactionCoordinatorServicer
from odradek.transactions.shard import LogWrite, MarkerJob, TransactionShard, TxnConfig
from odradek.transactions.state_log import StateLogWriter, load_transactions

log = logging.getLogger(__name__)

DEFAULTS: dict[str, str] = TRANSACTIONS_CONFIGS.defaults()

TxnRuntime = ShardRuntime[TransactionShard, LogWrite]

# Kafka name -> TxnConfig field.
TXN_SETTINGS: dict[str, str] = {
    "transaction.max.timeout.ms": "max_timeout_ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "abort_interval_ms",
    "transactional.id.expiration.ms": "id_expiration_ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "expiration_interval_ms",
}
_OWN_TOPIC_SETTINGS = (
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "transaction.state.log.segment.bytes",
    "transaction.state.log.load.buffer.size",
)


class TransactionCoordinatorService(ClusterMember):
    name = "transactions"

    def __init__(self, config: Config) -> None:
        super().__init__(config, TRANSACTIONS_CONFIGS, common_pb2.TRANSACTION_COORDINATOR)
        self.storage = StoragePool(self.metadata)
        self.offsets = OffsetStoreClient(self.metadata)
        self.producer_ids = ProducerIdBlocks(
            from_controller(
                self.controller,
                self.node_id,
                lambda: self.membership.incarnation if self.membership else 0,
            )
        )
        self.markers = MarkerSender(
            self.metadata,
            self.storage,
            self.offsets,
            TRANSACTIONS_CONFIGS.read_int(config, "transaction.marker.retry.backoff.ms"),
        )
        self.txn_config = TxnConfig()
        self.runtimes: dict[int, TxnRuntime] = {}
        self._writers: dict[int, StateLogWriter] = {}
        self._reconcile_lock = asyncio.Lock()
        self._reconcile_wanted = asyncio.Event()
        transactions_pb2_grpc.add_TransactionCoordinatorServicer_to_server(
            TransactionCoordinatorServicer(self), self.rpc.server
        )
        metrics.register(self)

    # -- settings ---------------------------------------------------------------------------
    def _own_settings(self) -> dict[str, str]:
        return {k: v for k in _OWN_TOPIC_SETTINGS if (v := self.config.get(k) or "")}

    def setting(self, name: str) -> int:
        """This service's config, else the controller's cluster-wide one, else Kafka's."""
        own = {name: self.config.get(name) or ""}
        return broker_setting(self.metadata, own, name)

    def _apply_settings(self) -> None:
        for name, attr in TXN_SETTINGS.items():
            setattr(self.txn_config, attr, self.setting(name))

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> dict[str, int]:
        ports = await self.join()
        self._apply_settings()
        await self.create_internal_topic(
            lambda: transaction_state_topic(self.metadata, self._own_settings()),
            TRANSACTIONS_CONFIGS.read_int(self.config, "transaction.state.log.create.timeout.ms"),
        )
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._reconcile_loop(), name="txn-reconcile"))
        self._reconcile_wanted.set()
        await self.serve(ready=True)
        return ports

    async def stop(self) -> None:
        await self.serve(ready=False)
        # Controlled shutdown: the controller moves our shards to other coordinators.
        await self.controlled_shutdown()
        await self.leave()
        for shard in list(self.runtimes):
            await self._close(shard)
        await self.markers.close()
        await self.rpc.stop(1.0)
        await self.producer_ids.close()
        await self.offsets.close()
        await self.storage.close()
        await self.close_clients()

    # -- shard ownership --------------------------------------------------------------------
    def shard_of(self, transactional_id: str) -> int:
        return transaction_shard_of(self.metadata.current.raw, transactional_id)

    def runtime_for(self, transactional_id: str) -> TxnRuntime | None:
        runtime = self.runtimes.get(self.shard_of(transactional_id))
        if runtime is None or runtime.status is ShardStatus.CLOSED:
            return None
        return runtime

    def owns(self, shard: int, epoch: int) -> bool:
        owner, current = transaction_coordinator_of(self.metadata.current.raw, shard)
        return owner == self.node_id and current == epoch

    def _on_metadata(self, previous: Snapshot, current: Snapshot) -> None:
        if not self._stop.is_set():
            self._reconcile_wanted.set()

    async def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            await self._reconcile_wanted.wait()
            self._reconcile_wanted.clear()
            try:
                self._apply_settings()
                await self._reconcile()
            except Exception:
                log.exception("reconciling transaction shards failed")
                await asyncio.sleep(0.5)
                self._reconcile_wanted.set()

    async def _reconcile(self) -> None:
        async with self._reconcile_lock:
            raw = self.metadata.current.raw
            owned: dict[int, int] = {}
            for entry in raw.transaction_shards:
                owner, epoch = transaction_coordinator_of(raw, entry.shard)
                if owner == self.node_id:
                    owned[entry.shard] = epoch
            for shard, runtime in list(self.runtimes.items()):
                if owned.get(shard) != runtime.epoch:
                    log.info("transaction shard %d moved away (epoch %d)", shard, runtime.epoch)
                    await self._close(shard)
            if self._stop.is_set():
                return
            for shard, epoch in sorted(owned.items()):
                if shard not in self.runtimes:
                    self._open(shard, epoch)

    async def _close(self, shard: int) -> None:
        runtime = self.runtimes.pop(shard, None)
        await self.markers.cancel_shard(shard)
        if runtime is not None:
            await runtime.close()
        writer = self._writers.pop(shard, None)
        if writer is not None:
            await writer.close()

    def _open(self, shard: int, epoch: int) -> None:
        log.info("transaction shard %d assigned to us (epoch %d): loading", shard, epoch)
        writer = StateLogWriter(self.storage, shard, lambda e: self.owns(shard, e))
        self._writers[shard] = writer
        holder: list[TxnRuntime] = []

        def send_markers(job: MarkerJob) -> None:
            runtime = holder[0]
            self.markers.start(
                shard,
                job,
                on_done=lambda: runtime.submit(lambda s: s.markers_written(job)),
                on_failed=lambda error: runtime.submit(lambda s: s.markers_failed(job, error)),
            )

        def make_state(
            scheduler: AsyncScheduler, on_write: Callable[[LogWrite], None]
        ) -> TransactionShard:
            return TransactionShard(
                shard, epoch, self.txn_config, scheduler, on_write, send_markers
            )

        runtime: TxnRuntime = ShardRuntime(shard, epoch, make_state, writer.store, name="txn-shard")
        holder.append(runtime)
        self.runtimes[shard] = runtime
        buffer_size = self.setting("transaction.state.log.load.buffer.size")

        async def load() -> Any:
            stored = await load_transactions(self.storage, shard, buffer_size)
            log.info(
                "transaction shard %d (epoch %d): %d transactional ids replayed",
                shard,
                epoch,
                len(stored),
            )
            return lambda state: state.load(stored)

        runtime.start_loading(load)
