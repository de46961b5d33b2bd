"""The group coordinator service: owns the shards the controller gives it.

It registers as a COORDINATOR node and follows the metadata stream; the controller
spreads the ``offsets.topic.num.partitions`` shards over online coordinators
(``ClusterMetadata.coordinator_shards``). A shard newly owned (or owned under a new
epoch) gets a :class:`~odradek.coordinator.runtime.ShardRuntime` that loads its groups
from the offset store before serving; a shard no longer owned is closed, so its
waiting members hear NOT_COORDINATOR and look the coordinator up again. On SIGTERM it
asks the controller for a controlled shutdown first, so shards move before it stops.

Settings, Kafka's names: ``group.initial.rebalance.delay.ms``,
``group.min.session.timeout.ms``, ``group.max.session.timeout.ms``,
``group.max.size``, ``offset.metadata.max.bytes``, the KIP-848
``group.consumer.{session.timeout.ms,heartbeat.interval.ms,max.size,assignors}``, plus
Odradek's
``group.pending.member.timeout.ms``. Each is read from this service's configuration
when set there, else from the cluster configs the controller publishes, else
Kafka's default.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from odradek.cluster_member import ClusterMember
from odradek.config import Config
from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.coordinator import COORDINATOR_CONFIGS
from odradek.consumer_offsets.group_proto import group_from_proto, group_to_proto
from odradek.coordinator import metrics
from odradek.coordinator.migration import MigrationPolicy
from odradek.coordinator.runtime import ShardRuntime, ShardStatus
from odradek.coordinator.servicer import CoordinatorServicer
from odradek.coordinator.shard import GroupConfig, GroupShard, StoreWrite
from odradek.group_shard import coordinator_of, shard_of
from odradek.metadata_cache import Snapshot
from odradek.offset_store_client import OffsetStoreClient
from odradek.rpc.v1 import common_pb2, coordinator_pb2_grpc, offsets_pb2

log = logging.getLogger(__name__)

DEFAULTS: dict[str, str] = COORDINATOR_CONFIGS.defaults()

# Kafka name -> GroupConfig field; each value comes from this service's config, else the
# controller's cluster-wide broker configs, else the catalog's default.
GROUP_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
    "group.min.session.timeout.ms": "min_session_timeout_ms",
    "group.max.session.timeout.ms": "max_session_timeout_ms",
    "group.max.size": "max_size",
    "group.pending.member.timeout.ms": "pending_member_timeout_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
    "group.consumer.max.size": "consumer_max_size",
}


def _group_default(name: str) -> int:
    catalog = BROKER_CONFIGS if name in BROKER_CONFIGS else COORDINATOR_CONFIGS
    return catalog.int(name)


class CoordinatorService(ClusterMember):
    name = "coordinator"

    def __init__(self, config: Config) -> None:
        super().__init__(config, COORDINATOR_CONFIGS, common_pb2.COORDINATOR)
        self.offsets = OffsetStoreClient(self.metadata)
        self.runtimes: dict[int, ShardRuntime] = {}
        self._reconcile_lock = asyncio.Lock()
        self._topic_view: tuple[Snapshot | None, dict[str, tuple[uuid.UUID, int]]] = (None, {})
        coordinator_pb2_grpc.add_GroupCoordinatorServicer_to_server(
            CoordinatorServicer(self), self.rpc.server
        )
        metrics.register(self)

    # -- settings ---------------------------------------------------------------------------
    def group_config(self) -> GroupConfig:
        cluster = self.metadata.current.raw.cluster_configs
        values: dict[str, int] = {}
        for name, attr in GROUP_SETTINGS.items():
            default = _group_default(name)
            raw = self.config.get(name)
            if raw is None or raw == "":
                raw = cluster.get(name)
            try:
                values[attr] = int(raw) if raw not in (None, "") else default
            except ValueError:
                log.warning("ignoring invalid %s=%r", name, raw)
                values[attr] = default
        raw_assignors = self.config.get("group.consumer.assignors") or cluster.get(
            "group.consumer.assignors"
        )
        assignors = [a.strip() for a in str(raw_assignors or "uniform,range").split(",")]
        policy = str(
            self.config.get("group.consumer.migration.policy")
            or cluster.get("group.consumer.migration.policy")
            or BROKER_CONFIGS.str("group.consumer.migration.policy")
        )
        try:
            MigrationPolicy.parse(policy)
        except ValueError:
            log.warning("ignoring invalid group.consumer.migration.policy=%r", policy)
            policy = BROKER_CONFIGS.str("group.consumer.migration.policy")
        return GroupConfig(
            **values,
            consumer_assignors=[a for a in assignors if a],
            consumer_migration_policy=policy,
        )

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> dict[str, int]:
        ports = await self.join()
        await self.serve(ready=True)
        return ports

    async def stop(self) -> None:
        await self.serve(ready=False)
        # Controlled shutdown: the controller moves our shards to other coordinators.
        await self.controlled_shutdown()
        await self.leave()
        await asyncio.gather(*(r.close() for r in list(self.runtimes.values())))
        self.runtimes.clear()
        await self.rpc.stop(1.0)
        await self.offsets.close()
        await self.close_clients()

    # -- shard ownership --------------------------------------------------------------------
    def runtime_for(self, group_id: str) -> ShardRuntime | None:
        runtime = self.runtimes.get(shard_of(self.metadata.current.raw, group_id))
        if runtime is None or runtime.status is ShardStatus.CLOSED:
            return None
        return runtime

    def topic_view(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Topics consumer groups may subscribe to: name -> (topic id, partitions); one
        object per metadata snapshot, so groups notice a change by identity."""
        snapshot = self.metadata.current
        if self._topic_view[0] is not snapshot:
            view = {
                t.name: (uuid.UUID(bytes=bytes(t.topic_id)), len(t.partitions))
                for t in snapshot.raw.topics
                if not t.internal and not t.name.startswith("__")
            }
            self._topic_view = (snapshot, view)
        return self._topic_view[1]

    def _on_metadata(self, previous: Snapshot, current: Snapshot) -> None:
        if self._stop.is_set():
            return
        asyncio.get_running_loop().create_task(self._reconcile())
        if self._topics_signature(previous) != self._topics_signature(current):
            for runtime in list(self.runtimes.values()):
                runtime.submit(lambda s: s.consumer.topics_changed())

    @staticmethod
    def _topics_signature(snapshot: Snapshot) -> set[tuple[str, int]]:
        return {(t.name, len(t.partitions)) for t in snapshot.raw.topics}

    async def _reconcile(self) -> None:
        async with self._reconcile_lock:
            raw = self.metadata.current.raw
            owned: dict[int, int] = {}
            for entry in raw.coordinator_shards:
                owner, epoch = coordinator_of(raw, entry.shard)
                if owner == self.node_id:
                    owned[entry.shard] = epoch
            closing = [
                r
                for shard, r in self.runtimes.items()
                if shard not in owned or owned[shard] != r.epoch
            ]
            for runtime in closing:
                log.info("shard %d moved away (epoch %d)", runtime.shard_id, runtime.epoch)
                del self.runtimes[runtime.shard_id]
            if closing:
                await asyncio.gather(*(r.close() for r in closing))
            if self._stop.is_set():
                return
            for shard, epoch in sorted(owned.items()):
                if shard not in self.runtimes:
                    self._open(shard, epoch)

    def _open(self, shard: int, epoch: int) -> None:
        log.info("shard %d assigned to us (epoch %d): loading", shard, epoch)

        async def store(epoch: int, writes: list[StoreWrite]) -> int:
            request = offsets_pb2.StoreGroupsRequest(
                shard=shard, coordinator_id=self.node_id, coordinator_epoch=epoch
            )
            for w in writes:
                if w.records is not None:
                    request.records.extend(
                        offsets_pb2.CoordinatorRecord(key=k)
                        if v is None
                        else offsets_pb2.CoordinatorRecord(key=k, value=v)
                        for k, v in w.records
                    )
                elif w.value is None:
                    request.deleted_groups.append(w.group_id)
                else:
                    request.groups.append(group_to_proto(w.group_id, w.value))
            return await self.offsets.store_groups(shard, request)

        runtime = ShardRuntime(
            shard,
            epoch,
            self.group_config(),
            store,
            on_rebalance=metrics.REBALANCES.inc,
            topics=self.topic_view,
        )
        self.runtimes[shard] = runtime

        async def load() -> Any:
            response = await self.offsets.load_shard(
                shard,
                offsets_pb2.LoadShardRequest(
                    shard=shard, coordinator_id=self.node_id, coordinator_epoch=epoch
                ),
            )
            if response.error_code:
                raise RuntimeError(f"LoadShard answered error {response.error_code}")
            groups = [(g.group_id, group_from_proto(g)) for g in response.groups]
            offset_groups = list(response.offset_groups)
            records = [(bytes(r.key), bytes(r.value)) for r in response.records]

            def apply(target: GroupShard) -> None:
                target.consumer.load(records)
                for group_id, value in groups:
                    target.load_group(group_id, value)
                for group_id in offset_groups:
                    target.note_offsets(group_id)

            return apply

        runtime.start_loading(load)
