"""The offset store service: committed offsets and group metadata, durable in
``__consumer_offsets`` and cached per shard.

Start-up: register as an OFFSET_STORE node, follow the metadata stream, create
``__consumer_offsets`` if nobody has (internal, compacted, acks=all writes), then load
the shards this store owns. Ownership among several stores is ``shard % n`` over the
online stores by node id, recomputed on every metadata change; a shard that moves is
dropped here and loaded by its new owner from the log.

Background work: every ``offsets.retention.check.interval.ms`` offset expiry runs
(``offsets.retention.minutes``); every ``offsets.lag.refresh.interval.ms`` (ours) the
high watermarks behind ``kafka_consumergroup_lag`` are refreshed. Defaults: the
catalog :mod:`odradek.config_catalog.offsets`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from odradek.cluster_member import ClusterMember
from odradek.config import Config
from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.offsets import OFFSETS_CONFIGS
from odradek.internal_topic.create import offsets_topic
from odradek.metadata_cache import Snapshot
from odradek.offsets import metrics
from odradek.offsets.servicer import OffsetStoreServicer
from odradek.offsets.store import OffsetStore, StoreSettings
from odradek.rpc.v1 import common_pb2, offsets_pb2_grpc, storage_pb2
from odradek.storage_client import StoragePool

log = logging.getLogger(__name__)

DEFAULTS: dict[str, str] = OFFSETS_CONFIGS.defaults()

_CLUSTER_SETTINGS = (
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offsets.commit.timeout.ms",
)


def _observe_append(records: int, seconds: float) -> None:
    metrics.APPENDS.inc()
    metrics.APPEND_SECONDS.observe(seconds)


class OffsetStoreService(ClusterMember):
    name = "offsets"

    def __init__(self, config: Config) -> None:
        super().__init__(config, OFFSETS_CONFIGS, common_pb2.OFFSET_STORE)
        self.storage = StoragePool(self.metadata)
        self.store = OffsetStore(self.node_id, self.metadata, self.storage, StoreSettings())
        self.store.on_append = _observe_append
        self.store.on_commit = metrics.COMMITS.inc
        self.high_watermarks: dict[tuple[str, int], int] = {}
        self._reconcile_lock = asyncio.Lock()
        self._reconcile_wanted = asyncio.Event()
        offsets_pb2_grpc.add_OffsetStoreServicer_to_server(
            OffsetStoreServicer(self.store), self.rpc.server
        )
        metrics.register(self)

    def _own_settings(self) -> dict[str, str]:
        return {k: v for k in _CLUSTER_SETTINGS if (v := self.config.get(k) or "")}

    def setting(self, name: str) -> int:
        """This service's config, else the controller's cluster-wide one, else the default."""
        default = (BROKER_CONFIGS if name in BROKER_CONFIGS else OFFSETS_CONFIGS).int(name)
        raw = self.config.get(name) or self.metadata.current.raw.cluster_configs.get(name) or ""
        try:
            return int(raw) if raw else default
        except ValueError:
            return default

    def _apply_settings(self) -> None:
        s = self.store.settings
        s.commit_timeout_ms = self.setting("offsets.commit.timeout.ms")
        s.retention_ms = self.setting("offsets.retention.minutes") * 60_000

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> dict[str, int]:
        ports = await self.join()
        self._apply_settings()
        await self.create_internal_topic(
            lambda: offsets_topic(self.metadata, self._own_settings()),
            OFFSETS_CONFIGS.read_int(self.config, "offsets.topic.create.timeout.ms"),
        )
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._reconcile_loop(), name="offsets-reconcile"))
        self._tasks.append(loop.create_task(self._retention_loop(), name="offsets-retention"))
        self._tasks.append(loop.create_task(self._lag_loop(), name="offsets-lag"))
        self._reconcile_wanted.set()
        await self.serve(ready=True)
        return ports

    async def stop(self) -> None:
        await self.serve(ready=False)
        self._stop.set()
        # Let in-flight writes finish before the appenders close.
        await self.rpc.stop(2.0)
        await self.leave()
        await self.store.close()
        await self.storage.close()
        await self.close_clients()

    # -- background -------------------------------------------------------------------------
    def _on_metadata(self, previous: Snapshot, current: Snapshot) -> None:
        self._reconcile_wanted.set()

    async def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            await self._reconcile_wanted.wait()
            self._reconcile_wanted.clear()
            self._apply_settings()
            try:
                await self.store.reconcile()
            except Exception:
                log.exception("reconciling offsets shards failed")
                await asyncio.sleep(0.5)
                self._reconcile_wanted.set()

    async def _retention_loop(self) -> None:
        while not self._stop.is_set():
            interval = self.setting("offsets.retention.check.interval.ms") / 1000.0
            await asyncio.sleep(max(0.05, interval))
            try:
                await self.store.expire()
            except Exception:
                log.exception("offset expiry failed")

    async def _lag_loop(self) -> None:
        while not self._stop.is_set():
            interval = (
                OFFSETS_CONFIGS.read_int(self.config, "offsets.lag.refresh.interval.ms") / 1000.0
            )
            try:
                await self.refresh_high_watermarks()
            except Exception as exc:
                log.debug("refreshing high watermarks failed: %s", exc)
            await asyncio.sleep(max(0.1, interval))

    async def refresh_high_watermarks(self) -> None:
        """ListOffsets(latest) for every partition some group committed, per leader."""
        wanted: set[tuple[str, int]] = set()
        for shard in list(self.store.shards.values()):
            for _, topic, partition, _ in shard.cache.all_offsets():
                wanted.add((topic, partition))
        snapshot = self.metadata.current
        by_leader: dict[int, list[storage_pb2.ListOffsetsPartition]] = defaultdict(list)
        for topic, partition in wanted:
            part = snapshot.partition(topic, partition)
            if part is not None and part.leader >= 0:
                by_leader[part.leader].append(
                    storage_pb2.ListOffsetsPartition(
                        topic=topic, partition=partition, timestamp=-1, current_leader_epoch=-1
                    )
                )
        fresh: dict[tuple[str, int], int] = {}

        async def ask(node: int, parts: list[storage_pb2.ListOffsetsPartition]) -> None:
            try:
                response = await self.storage.stub(node).ListOffsets(
                    storage_pb2.ListOffsetsRequest(isolation_level=0, partitions=parts),
                    timeout=10.0,
                )
            except Exception:
                return
            for r in response.partitions:
                if not r.error_code:
                    fresh[(r.topic, r.partition)] = r.offset

        await asyncio.gather(*(ask(n, p) for n, p in by_leader.items()))
        self.high_watermarks = fresh
