"""Which partitions this node hosts and in which role, driven by the controller's metadata.

Kafka's ReplicaManager "become leader / become follower", reduced to one rule: every
metadata snapshot (newer than the last applied one) is compared with the hosted
partitions, and each partition is moved to the state the snapshot describes:

* assigned here and ``leader == node.id``: open/create the log, become leader
  (stamps the new epoch into the epoch cache, resets the followers' lag clocks);
* assigned here with another leader: become follower and hand the partition to the
  replica fetcher of that leader (which truncates by leader epoch first);
* assigned here with no leader (-1): stay hosted, serve nothing;
* no longer assigned here, or the topic was deleted (or recreated under a new topic
  id): stop serving and delete the log.

Topic config overrides and the controller's cluster-wide broker defaults are folded
into each log's :class:`LogConfig`; a change applies to the open log. Everything
happens synchronously on the event loop, so a request handler sees either the old or
the new state of a partition, never a mix.

Replication throttles (:mod:`odradek.storage.replication_quota`) are re-bounded from
this node's broker configs on every snapshot, and each replica learns from its topic
configs whether it is a throttled leader or follower replica here.

Failed log directories: a replica whose directory failed stays hosted but offline
(it serves nothing and is never re-created elsewhere while the node runs). When the
node starts with a directory offline, a partition assigned here whose log is not in
any online directory is taken to have lived in the failed one and is offline too,
unless this node is one of its adding replicas (a new replica has no data to lose).
A replica whose log cannot be created (its directory failed, or none is online) is
offline too, as Kafka's ReplicaManager marks it (``markPartitionOffline``): otherwise
the controller, never told, would keep it in the ISR and as leader while this node
cannot serve it. :attr:`offline` lists them for the report to the controller.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from odradek.log.errors import KafkaStorageError
from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2
from odradek.storage.partition import Partition, Role
from odradek.storage.replication_quota import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    ReplicationQuotas,
    is_throttled,
)
from odradek.topic_config import LogConfig

if TYPE_CHECKING:
    from odradek.log.manager import LogManager

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        static_broker_defaults: Mapping[str, str],
        *,
        replica_lag_time_max_ms: int,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.static_broker_defaults = dict(static_broker_defaults)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.clock_ms = clock_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.snapshot: Snapshot | None = None
        self.applied_version = 0
        self.broker_defaults: dict[str, str] = dict(static_broker_defaults)
        self._configs: dict[tuple[str, tuple[tuple[str, str], ...]], LogConfig] = {}
        # Set by the service: called with (partition) when it must (re)start or stop fetching.
        self.on_follow: Callable[[Partition], None] = lambda _p: None
        self.on_unfollow: Callable[[Partition], None] = lambda _p: None
        self.on_partition_removed: Callable[[Partition], None] = lambda _p: None
        self.on_partition_opened: Callable[[Partition], None] = lambda _p: None
        self.on_io_error: Callable[[Partition, OSError], None] = lambda _p, _e: None
        self.quotas = ReplicationQuotas()
        # Replicas assigned here that live in a failed log directory, or whose log could
        # not be created (no Partition object).
        self.offline: set[tuple[str, int]] = set()

    # -- lookups ------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def __iter__(self) -> Iterator[Partition]:
        return iter(list(self.partitions.values()))

    def leaders(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def is_replica_eligible(self, node_id: int) -> bool:
        """An ONLINE storage node may be counted for the high watermark and join an ISR."""
        snapshot = self.snapshot
        if snapshot is None:
            return False
        node = snapshot.nodes.get(node_id)
        return node is not None and node.state == common_pb2.ONLINE

    def led_in_metadata(self) -> int:
        """How many partitions the latest metadata says this node leads."""
        snapshot = self.snapshot
        if snapshot is None:
            return 0
        return sum(1 for t in snapshot.raw.topics for p in t.partitions if p.leader == self.node_id)

    # -- metadata -------------------------------------------------------------------------
    def apply(self, snapshot: Snapshot) -> None:
        """Move every hosted partition to the state ``snapshot`` describes."""
        if snapshot.version <= self.applied_version:
            return
        first = self.snapshot is None
        self.applied_version = snapshot.version
        self.snapshot = snapshot
        defaults = dict(self.static_broker_defaults)
        defaults.update(snapshot.raw.cluster_configs)
        # This node's own dynamic configs (AlterConfigs on BROKER <node id>) win.
        if self.node_id in snapshot.raw.broker_configs:
            defaults.update(snapshot.raw.broker_configs[self.node_id].configs)
        if defaults != self.broker_defaults:
            self.broker_defaults = defaults
            self._configs.clear()
        self.quotas.configure(self.broker_defaults)

        desired: dict[tuple[str, int], tuple[common_pb2.Topic, common_pb2.Partition]] = {}
        for topic in snapshot.raw.topics:
            for state in topic.partitions:
                if self.node_id in state.replicas:
                    desired[(topic.name, state.partition)] = (topic, state)

        for key, part in list(self.partitions.items()):
            entry = desired.get(key)
            if entry is None or bytes(entry[0].topic_id) != part.topic_id:
                self._remove(
                    part, reason="no longer assigned" if entry is None else "topic recreated"
                )
        self.offline &= set(desired)

        if first and self.log_manager.offline_dirs:
            for key, (_topic, state) in desired.items():
                if (
                    self.log_manager.get_log(*key) is None
                    and self.node_id not in state.adding_replicas
                ):
                    log.warning(
                        "%s-%d: no log in an online directory; it was in a failed one: offline",
                        *key,
                    )
                    self.offline.add(key)

        for key, (topic, state) in desired.items():
            if key in self.offline:
                continue
            try:
                self._apply_partition(topic, state)
            except Exception as exc:
                if isinstance(exc, KafkaStorageError) and key not in self.partitions:
                    log.error("%s-%d: cannot create its log, offline: %s", key[0], key[1], exc)
                    self.offline.add(key)
                else:
                    log.exception("cannot apply metadata to %s-%d", key[0], key[1])

        if first:
            self._delete_stray_logs(desired)

    def _apply_partition(self, topic: common_pb2.Topic, state: common_pb2.Partition) -> None:
        key = (topic.name, state.partition)
        config = self._config_for(topic)
        part = self.partitions.get(key)
        if part is not None and part.offline:
            return
        if part is None:
            part = self._open(topic, state, config)
        elif config != part.config:
            part.update_config(config)
            log.info("%s: topic config changed", part.name)
        part.leader_throttled = is_throttled(
            topic.configs.get(LEADER_REPLICAS), self.node_id, state.partition
        )
        part.follower_throttled = is_throttled(
            topic.configs.get(FOLLOWER_REPLICAS), self.node_id, state.partition
        )
        if state.leader == self.node_id:
            if part.role is Role.FOLLOWER:
                self.on_unfollow(part)
            if part.make_leader(state):
                log.info(
                    "%s: leader in epoch %d, isr %s", part.name, part.leader_epoch, list(part.isr)
                )
        else:
            if part.make_follower(state):
                self.on_unfollow(part)
                if part.role is Role.FOLLOWER:
                    log.info(
                        "%s: following %d in epoch %d", part.name, part.leader_id, part.leader_epoch
                    )
                    self.on_follow(part)

    def _config_for(self, topic: common_pb2.Topic) -> LogConfig:
        overrides = tuple(sorted(topic.configs.items()))
        key = (topic.name, overrides)
        config = self._configs.get(key)
        if config is None:
            config = LogConfig.from_topic_configs(dict(topic.configs), self.broker_defaults)
            self._configs[key] = config
        return config

    def _open(
        self, topic: common_pb2.Topic, state: common_pb2.Partition, config: LogConfig
    ) -> Partition:
        topic_id = bytes(topic.topic_id)
        kafka_id = kafka_uuid(topic_id) if topic_id else None
        plog = self.log_manager.get_log(topic.name, state.partition)
        if plog is not None and kafka_id is not None and plog.topic_id not in (None, kafka_id):
            log.info(
                "%s-%d: the log on disk belongs to an older topic id %s; deleting it",
                topic.name,
                state.partition,
                plog.topic_id,
            )
            self.log_manager.delete_log(topic.name, state.partition)
            plog = None
        if plog is None:
            plog = self.log_manager.create_log(topic.name, state.partition, kafka_id, config)
        elif plog.config != config:
            plog.update_config(config)
        part = Partition(
            self.node_id,
            topic.name,
            state.partition,
            topic_id,
            plog,
            config,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            clock_ms=self.clock_ms,
            is_replica_eligible=self.is_replica_eligible,
        )
        part.on_io_error = self.on_io_error
        self.partitions[(topic.name, state.partition)] = part
        self.on_partition_opened(part)
        return part

    def _remove(self, part: Partition, *, reason: str) -> None:
        log.info("%s: stopping and deleting the replica (%s)", part.name, reason)
        self.on_unfollow(part)
        part.stop()
        del self.partitions[(part.topic, part.index)]
        self.on_partition_removed(part)
        if part.offline:
            return  # its directory failed: nothing to delete there
        try:
            self.log_manager.delete_log(part.topic, part.index)
        except OSError as exc:
            self.log_manager.io_failure((part.topic, part.index), exc)
        except Exception:
            log.exception("%s: cannot delete the log", part.name)

    def _delete_stray_logs(self, desired: Mapping[tuple[str, int], object]) -> None:
        """Logs on disk for partitions no longer assigned here (deleted while we were down)."""
        for (topic, index), _log in self.log_manager.futures():
            if (topic, index) not in desired:
                self.log_manager.abort_future_log(topic, index)
        for topic, index in [tp for tp, _log in self.log_manager.logs()]:
            if (topic, index) not in desired:
                log.info("%s-%d: stray log not assigned to this node; deleting it", topic, index)
                try:
                    self.log_manager.delete_log(topic, index)
                except Exception:
                    log.exception("%s-%d: cannot delete stray log", topic, index)

    def stop_all(self) -> None:
        for part in list(self.partitions.values()):
            self.on_unfollow(part)
            part.stop()


def kafka_uuid(raw: bytes) -> str:
    """Kafka's Uuid.toString() (as in ``partition.metadata``): URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
