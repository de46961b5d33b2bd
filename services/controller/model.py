"""The cluster state and the rules that change it (pure: no I/O, no clock).

:class:`ClusterModel` holds nodes, topics, group and transaction coordinator shards, cluster configs,
producer-id high-water mark, cluster id and metadata version. Every operation
validates first and only then mutates, so a refused request leaves the model as it
was. Mutations mark logical keys dirty; :meth:`ClusterModel.take_changes` hands the
controller the records to persist (and bumps ``metadata_version`` when anything a
snapshot shows changed). The controller persists them in one fenced txn; if that
fails it throws the whole model away and reloads from the store.

Logical keys: ``cluster`` (id, metadata version, last incarnation),
``producer_ids``, ``cluster_configs`` (dynamic overrides), ``shards`` (group
coordinator shards), ``transaction_shards``, ``nodes/<id>``, ``topics/<name>``,
``broker_configs/<id>`` (per-broker dynamic configs of storage node ``id``),
``scram/<user>`` and ``acls`` (:mod:`odradek.controller.security_state`),
``client_quotas`` (:mod:`odradek.controller.quota_state`).
"""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.definition import ConfigType, InvalidConfigError
from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.controller import broker_defaults, reassignment
from odradek.controller.assignment import (
    assign_replicas,
    check_manual_assignment,
    check_replica_list,
    check_replication_factor,
)
from odradek.controller.cluster_state import (
    NO_LEADER,
    NodeInfo,
    NodeKind,
    NodeState,
    PartitionState,
    ShardState,
    TopicState,
)
from odradek.controller.election import Change, apply_change, choose_leader
from odradek.controller.errors import ControllerError
from odradek.controller.names import collision_key, validate_topic_name
from odradek.controller.quota_state import ClientQuotaState
from odradek.controller.security_state import SecurityState
from odradek.controller.shards import balance_shards
from odradek.protocol.errors import ErrorCode
from odradek.topic_config import describe, resolve, validate_topic_configs

KEY_CLUSTER = "cluster"
KEY_PRODUCER_IDS = "producer_ids"
KEY_CLUSTER_CONFIGS = "cluster_configs"
KEY_SHARDS = "shards"
KEY_TRANSACTION_SHARDS = "transaction_shards"
NODE_PREFIX = "nodes/"
TOPIC_PREFIX = "topics/"
BROKER_CONFIGS_PREFIX = "broker_configs/"

DEFAULT_PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PARTITIONS_PER_REQUEST = 100_000


class ConfigOp(IntEnum):
    """Kafka's AlterConfigOp ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclass
class TopicSpec:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class TopicResult:
    name: str
    error_code: int = 0
    error_message: str = ""
    topic_id: bytes = b""
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def failed(cls, name: str, error: ControllerError) -> TopicResult:
        return cls(name, int(error.code), error.message)

    @classmethod
    def duplicate(cls, name: str, message: str) -> TopicResult:
        """A topic named twice in one request (Kafka answers INVALID_REQUEST for each)."""
        return cls(name, int(ErrorCode.INVALID_REQUEST), message)

    @classmethod
    def outcome(cls, name: str, change: Callable[[], TopicResult]) -> TopicResult:
        """What ``change()`` returns, or the ControllerError it raises as ``name``'s."""
        try:
            return change()
        except ControllerError as exc:
            return cls.failed(name, exc)


@dataclass
class ConfigChange:
    name: str
    op: ConfigOp = ConfigOp.SET
    value: str | None = None


@dataclass
class ElectionResult:
    topic: str
    partition: int
    error_code: int = 0
    error_message: str = ""


@dataclass
class Stats:
    """Cumulative counters since this model was loaded."""

    leader_elections: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0


def new_cluster_id(rng: random.Random) -> str:
    """22 characters of url-safe base64 without padding, from a random UUID (as Kafka)."""
    raw = uuid.UUID(int=rng.getrandbits(128), version=4).bytes
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _as_bool(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


class ClusterModel:
    def __init__(
        self,
        static_configs: Mapping[str, str] | None = None,
        *,
        producer_id_block_size: int = DEFAULT_PRODUCER_ID_BLOCK_SIZE,
        rng: random.Random | None = None,
    ) -> None:
        self.static_configs = {**BROKER_CONFIGS.defaults(), **dict(static_configs or {})}
        self.dynamic_configs: dict[str, str] = {}
        # Per-broker dynamic configs by storage node id (Kafka's DYNAMIC_BROKER_CONFIG).
        self.broker_configs: dict[int, dict[str, str]] = {}
        self.producer_id_block_size = producer_id_block_size
        self.rng = rng or random.Random()
        self.cluster_id = ""
        self.metadata_version = 0
        self.last_incarnation = 0
        self.next_producer_id = 0
        self.nodes: dict[int, NodeInfo] = {}
        self.topics: dict[str, TopicState] = {}
        self.topics_by_id: dict[bytes, str] = {}
        self.shards: list[ShardState] = []
        self.transaction_shards: list[ShardState] = []
        self.stats = Stats()
        # SCRAM credentials and ACLs (``scram/<user>``, ``acls``; security_state.py).
        self.security = SecurityState()
        # Client quotas (``client_quotas``; quota_state.py).
        self.client_quotas = ClientQuotaState()
        self._dirty: set[str] = set()

    # ------------------------------------------------------------------ persistence

    def load(self, records: Mapping[str, Any]) -> None:
        """Fill an empty model from persisted records (logical key -> JSON value)."""
        cluster = records.get(KEY_CLUSTER) or {}
        self.cluster_id = cluster.get("cluster_id", "")
        self.metadata_version = int(cluster.get("metadata_version", 0))
        self.last_incarnation = int(cluster.get("last_incarnation", 0))
        self.next_producer_id = int((records.get(KEY_PRODUCER_IDS) or {}).get("next", 0))
        self.dynamic_configs = dict(records.get(KEY_CLUSTER_CONFIGS) or {})
        self.shards = [
            ShardState(int(s), int(o), int(e)) for s, o, e in records.get(KEY_SHARDS) or []
        ]
        self.transaction_shards = [
            ShardState(int(s), int(o), int(e))
            for s, o, e in records.get(KEY_TRANSACTION_SHARDS) or []
        ]
        for key, value in records.items():
            if key.startswith(NODE_PREFIX):
                node = NodeInfo.from_json(value)
                self.nodes[node.node_id] = node
            elif key.startswith(TOPIC_PREFIX):
                topic = TopicState.from_json(value)
                self.topics[topic.name] = topic
                self.topics_by_id[topic.topic_id] = topic.name
            elif key.startswith(BROKER_CONFIGS_PREFIX) and value:
                self.broker_configs[int(key[len(BROKER_CONFIGS_PREFIX) :])] = dict(value)
            elif not self.client_quotas.load(key, value):
                self.security.load(key, value)

    def bootstrap(self) -> bool:
        """First start of a cluster: a cluster id and the coordinator shards (group and
        transaction; a cluster made before transactions gets its transaction shards on
        the next controller start). True if new."""
        created = False
        if not self.cluster_id:
            self.cluster_id = new_cluster_id(self.rng)
            self._dirty.add(KEY_CLUSTER)
            created = True
        if not self.shards:
            count = max(1, self.config_int("offsets.topic.num.partitions"))
            self.shards = [ShardState(i) for i in range(count)]
            self._dirty.add(KEY_SHARDS)
        if not self.transaction_shards:
            count = max(1, self.config_int("transaction.state.log.num.partitions"))
            self.transaction_shards = [ShardState(i) for i in range(count)]
            self._dirty.add(KEY_TRANSACTION_SHARDS)
        self._rebalance_shards()
        return created

    def touch(self) -> None:
        """Force a new metadata version (a new controller epoch must be visible)."""
        self._dirty.add(KEY_CLUSTER)

    def take_changes(self) -> dict[str, Any | None]:
        """Records to persist (None = delete), bumping the metadata version if needed."""
        self._dirty |= self.security.dirty | self.client_quotas.dirty
        self.security.dirty.clear()
        self.client_quotas.dirty.clear()
        if not self._dirty:
            return {}
        if self._dirty - {KEY_PRODUCER_IDS}:
            self.metadata_version += 1
            self._dirty.add(KEY_CLUSTER)
        out = {key: self.record(key) for key in sorted(self._dirty)}
        self._dirty.clear()
        return out

    @property
    def has_changes(self) -> bool:
        return bool(self._dirty or self.security.dirty or self.client_quotas.dirty)

    def record(self, key: str) -> Any | None:
        if key == KEY_CLUSTER:
            return {
                "cluster_id": self.cluster_id,
                "metadata_version": self.metadata_version,
                "last_incarnation": self.last_incarnation,
            }
        if key == KEY_PRODUCER_IDS:
            return {"next": self.next_producer_id}
        if key == KEY_CLUSTER_CONFIGS:
            return dict(sorted(self.dynamic_configs.items()))
        if key == KEY_SHARDS:
            return [[s.shard, s.coordinator_id, s.epoch] for s in self.shards]
        if key == KEY_TRANSACTION_SHARDS:
            return [[s.shard, s.coordinator_id, s.epoch] for s in self.transaction_shards]
        if key.startswith(NODE_PREFIX):
            node = self.nodes.get(int(key[len(NODE_PREFIX) :]))
            return None if node is None else node.to_json()
        if key.startswith(TOPIC_PREFIX):
            topic = self.topics.get(key[len(TOPIC_PREFIX) :])
            return None if topic is None else topic.to_json()
        if key.startswith(BROKER_CONFIGS_PREFIX):
            configs = self.broker_configs.get(int(key[len(BROKER_CONFIGS_PREFIX) :]))
            return dict(sorted(configs.items())) if configs else None
        if self.client_quotas.owns(key):
            return self.client_quotas.record(key)
        return self.security.record(key)

    def _mark_topic(self, topic: TopicState | str) -> None:
        self._dirty.add(TOPIC_PREFIX + (topic if isinstance(topic, str) else topic.name))

    def _mark_node(self, node_id: int) -> None:
        self._dirty.add(f"{NODE_PREFIX}{node_id}")

    # ------------------------------------------------------------------ configs

    def effective_configs(self) -> dict[str, str]:
        """What ``cluster_configs`` publishes: static settings under dynamic overrides."""
        return {**self.static_configs, **self.dynamic_configs}

    def config(self, name: str) -> str | None:
        return self.dynamic_configs.get(name, self.static_configs.get(name))

    def config_int(self, name: str) -> int:
        value = self.config(name)
        return int(value) if value is not None else 0

    def unclean_enabled(self, topic: TopicState) -> bool:
        value = topic.configs.get("unclean.leader.election.enable")
        return _as_bool(
            value if value is not None else self.config("unclean.leader.election.enable")
        )

    def topic_effective_configs(self, overrides: Mapping[str, str]) -> dict[str, str]:
        return {
            d.name: d.value or ""
            for d in describe(overrides, self.effective_configs(), include_synonyms=False)
        }

    # ------------------------------------------------------------------ nodes

    def eligible(self, node_id: int) -> bool:
        """May lead or join an ISR: an ONLINE storage node."""
        node = self.nodes.get(node_id)
        return node is not None and node.kind is NodeKind.STORAGE and node.state is NodeState.ONLINE

    def eligible_in(self, p: PartitionState) -> Callable[[int], bool]:
        """Eligibility of ``p``'s replicas: an ONLINE node whose log directory for ``p`` works."""
        return lambda r: r not in p.offline and self.eligible(r)

    def usable_storage_nodes(self) -> list[int]:
        return sorted(n for n in self.nodes if self.eligible(n))

    def live(self, node_id: int) -> bool:
        node = self.nodes.get(node_id)
        return node is not None and node.state in (NodeState.ONLINE, NodeState.SHUTTING_DOWN)

    def check_session(self, node_id: int, incarnation: int) -> NodeInfo:
        """The node's registration, or STALE_BROKER_EPOCH: it must register (again)."""
        node = self.nodes.get(node_id)
        if node is None:
            raise ControllerError(ErrorCode.STALE_BROKER_EPOCH, f"Node {node_id} is not registered")
        if node.incarnation != incarnation or node.state is NodeState.OFFLINE:
            raise ControllerError(
                ErrorCode.STALE_BROKER_EPOCH,
                f"Node {node_id} incarnation {incarnation} is stale (current {node.incarnation}, "
                f"{node.state.name})",
            )
        return node

    def register_node(self, node: NodeInfo, *, session: int = 0) -> NodeInfo:
        """A node (re)starts: fence any previous session, then bring it online.

        With ``session`` equal to the node's live incarnation the node is not restarting
        but announcing new endpoints (a gateway's broker ports): they change in place.
        """
        if node.node_id < 0:
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"Invalid node id {node.node_id}")
        if node.kind not in (
            NodeKind.GATEWAY,
            NodeKind.STORAGE,
            NodeKind.COORDINATOR,
            NodeKind.OFFSET_STORE,
            NodeKind.TRANSACTION_COORDINATOR,
            NodeKind.CONTROLLER,
        ):
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"Node {node.node_id} has no kind")
        existing = self.nodes.get(node.node_id)
        if (
            session
            and existing is not None
            and existing.incarnation == session
            and existing.kind == node.kind
            and existing.state is not NodeState.OFFLINE
        ):
            updated = replace(
                node, kind=existing.kind, state=existing.state, incarnation=existing.incarnation
            )
            if updated != existing:
                self.nodes[node.node_id] = updated
                self._mark_node(node.node_id)
            return updated
        if (
            existing is not None
            and existing.kind != node.kind
            and existing.state is not NodeState.OFFLINE
        ):
            raise ControllerError(
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                f"Node {node.node_id} is already registered as {existing.kind.name}",
            )
        if existing is not None and existing.state is not NodeState.OFFLINE:
            # A restart: the old process's leaderships and ISR memberships end here.
            existing.state = NodeState.OFFLINE
            self._fence(existing.node_id)
        self.last_incarnation += 1
        registered = replace(
            node,
            state=NodeState.ONLINE,
            incarnation=self.last_incarnation,
            broker_ports=dict(node.broker_ports),
            listeners=list(node.listeners),
        )
        self.nodes[node.node_id] = registered
        self._mark_node(node.node_id)
        self._dirty.add(KEY_CLUSTER)
        if registered.kind is NodeKind.STORAGE:
            self._clear_offline(registered.node_id)
            self._elect_leaderless(registered.node_id)
        self._rebalance_shards()
        return registered

    def node_offline(self, node_id: int) -> bool:
        """Missed heartbeats past the session timeout: fence the node. True if it changed."""
        node = self.nodes.get(node_id)
        if node is None or node.state is NodeState.OFFLINE:
            return False
        node.state = NodeState.OFFLINE
        self._mark_node(node_id)
        self._fence(node_id)
        self._rebalance_shards()
        return True

    def begin_shutdown(self, node_id: int, incarnation: int) -> list[tuple[str, int]]:
        """Controlled shutdown: move leadership away; return the leaderships that remain."""
        node = self.check_session(node_id, incarnation)
        if node.state is not NodeState.SHUTTING_DOWN:
            node.state = NodeState.SHUTTING_DOWN
            self._mark_node(node_id)
        for topic, p in self._partitions_of(node_id):
            if p.leader == node_id:
                isr = [r for r in p.isr if r != node_id]
                leader, _ = choose_leader(p.replicas, isr, self.eligible_in(p))
                if leader != NO_LEADER:
                    self._change(topic, p, leader, isr)
            elif node_id in p.isr and len(p.isr) > 1:
                self._change(topic, p, p.leader, [r for r in p.isr if r != node_id])
        self._rebalance_shards()
        return self.leaderships(node_id)

    def leaderships(self, node_id: int) -> list[tuple[str, int]]:
        return [
            (t.name, p.partition)
            for t in self.topics.values()
            for p in t.partitions
            if p.leader == node_id
        ]

    def shutdown_ready(self, node_id: int) -> bool:
        """Nothing more can move: every partition it still leads has no other eligible ISR member."""
        node = self.nodes.get(node_id)
        if node is None or node.state is not NodeState.SHUTTING_DOWN:
            return False
        for topic in self.topics.values():
            for p in topic.partitions:
                eligible = self.eligible_in(p)
                if p.leader == node_id and any(r != node_id and eligible(r) for r in p.isr):
                    return False
        return True

    def _partitions_of(self, node_id: int) -> Iterator[tuple[TopicState, PartitionState]]:
        for topic in self.topics.values():
            for p in topic.partitions:
                if node_id in p.replicas:
                    yield topic, p

    def _fence(self, node_id: int) -> None:
        """The node is gone: drop it from ISRs (keeping a last member) and re-elect its leaderships."""
        for topic, p in self._partitions_of(node_id):
            isr = [r for r in p.isr if r != node_id] if len(p.isr) > 1 else list(p.isr)
            leader = p.leader
            if leader == node_id or leader == NO_LEADER:
                leader, isr = choose_leader(
                    p.replicas, isr, self.eligible_in(p), unclean=self.unclean_enabled(topic)
                )
            self._change(topic, p, leader, isr)

    def _elect_leaderless(self, node_id: int) -> None:
        """A node is back: partitions without a leader that it can lead get one."""
        for topic, p in self._partitions_of(node_id):
            if p.leader == NO_LEADER:
                leader, isr = choose_leader(
                    p.replicas, p.isr, self.eligible_in(p), unclean=self.unclean_enabled(topic)
                )
                self._change(topic, p, leader, isr)

    def _change(
        self, topic: TopicState, p: PartitionState, leader: int, isr: Sequence[int]
    ) -> Change:
        change = apply_change(p, leader, isr)
        if change.changed:
            self._mark_topic(topic)
            self.stats.leader_elections += int(change.elected)
            self.stats.isr_shrinks += int(change.isr_shrunk)
            self.stats.isr_expands += int(change.isr_expanded)
        return change

    # ------------------------------------------------------------------ coordinator shards (groups, transactions)

    def _online(self, kind: NodeKind) -> list[int]:
        return [
            n.node_id for n in self.nodes.values() if n.kind is kind and n.state is NodeState.ONLINE
        ]

    def _rebalance_shards(self) -> None:
        """Group coordinator shards over online coordinators, transaction coordinator
        shards over online transaction coordinators: the same sticky balancing."""
        balanced = balance_shards(self.shards, self._online(NodeKind.COORDINATOR))
        if balanced != self.shards:
            self.shards = balanced
            self._dirty.add(KEY_SHARDS)
        balanced = balance_shards(
            self.transaction_shards, self._online(NodeKind.TRANSACTION_COORDINATOR)
        )
        if balanced != self.transaction_shards:
            self.transaction_shards = balanced
            self._dirty.add(KEY_TRANSACTION_SHARDS)

    # ------------------------------------------------------------------ topics

    def _find_topic(self, name: str) -> TopicState:
        topic = self.topics.get(name)
        if topic is None:
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host this topic: {name}",
            )
        return topic

    def _validated_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        try:
            validate_topic_configs(configs)
            resolve(configs, self.effective_configs())
        except InvalidConfigError as exc:
            raise ControllerError(ErrorCode.INVALID_CONFIG, exc.message) from None
        return {k: str(v) for k, v in configs.items()}

    def _new_topic_id(self) -> bytes:
        while True:
            topic_id = uuid.UUID(int=self.rng.getrandbits(128), version=4).bytes
            if topic_id not in self.topics_by_id:
                return topic_id

    def _new_partitions(
        self, first: int, replica_lists: Sequence[Sequence[int]], *, manual: bool
    ) -> list[PartitionState]:
        out = []
        for i, replicas in enumerate(replica_lists, start=first):
            isr = [r for r in replicas if self.eligible(r)]
            if not isr:
                if manual:
                    raise ControllerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"All brokers specified in the manual partition assignment for partition {i} "
                        "are fenced or in controlled shutdown.",
                    )
                isr = list(replicas[:1])
            leader = next((r for r in replicas if r in isr and self.eligible(r)), NO_LEADER)
            out.append(PartitionState(i, list(replicas), isr, leader, 0, 0))
        return out

    def create_topic(
        self, spec: TopicSpec, *, internal: bool = False, validate_only: bool = False
    ) -> TopicResult:
        validate_topic_name(spec.name, internal=internal)
        if spec.name in self.topics:
            raise ControllerError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists."
            )
        colliding = sorted(t for t in self.topics if collision_key(t) == collision_key(spec.name))
        if colliding:
            raise ControllerError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{spec.name}' collides with existing topics: {', '.join(colliding)}",
            )
        configs = self._validated_configs(spec.configs)
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                raise ControllerError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            storage = {n for n, info in self.nodes.items() if info.kind is NodeKind.STORAGE}
            replica_lists = check_manual_assignment(spec.assignments, storage)
            partitions = self._new_partitions(0, replica_lists, manual=True)
        else:
            count = (
                spec.num_partitions
                if spec.num_partitions != -1
                else self.config_int("num.partitions")
            )
            rf = (
                spec.replication_factor
                if spec.replication_factor != -1
                else self.config_int("default.replication.factor")
            )
            if count <= 0:
                raise ControllerError(
                    ErrorCode.INVALID_PARTITIONS,
                    "Number of partitions was set to an invalid non-positive value.",
                )
            if count > MAX_PARTITIONS_PER_REQUEST:
                raise ControllerError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Number of partitions {count} exceeds the limit of {MAX_PARTITIONS_PER_REQUEST}.",
                )
            brokers = self.usable_storage_nodes()
            check_replication_factor(rf, len(brokers))
            partitions = self._new_partitions(
                0, assign_replicas(brokers, count, rf, rng=self.rng), manual=False
            )
        topic = TopicState(spec.name, self._new_topic_id(), partitions, configs, internal)
        result = TopicResult(
            spec.name,
            topic_id=topic.topic_id,
            num_partitions=len(partitions),
            replication_factor=topic.replication_factor,
            configs=self.topic_effective_configs(configs),
        )
        if not validate_only:
            self.topics[topic.name] = topic
            self.topics_by_id[topic.topic_id] = topic.name
            self._mark_topic(topic)
        return result

    def delete_topic(self, name: str | None = None, topic_id: bytes | None = None) -> TopicResult:
        if not _as_bool(self.config("delete.topic.enable")):
            raise ControllerError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        if topic_id is not None:
            found = self.topics_by_id.get(topic_id)
            if found is None:
                raise ControllerError(
                    ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."
                )
            name = found
        assert name is not None
        topic = self._find_topic(name)
        if topic.internal:
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"Cannot delete internal topic {name}")
        del self.topics[name]
        self.topics_by_id.pop(topic.topic_id, None)
        self._mark_topic(name)
        return TopicResult(
            name,
            topic_id=topic.topic_id,
            num_partitions=len(topic.partitions),
            replication_factor=topic.replication_factor,
        )

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] = (),
        *,
        validate_only: bool = False,
    ) -> TopicResult:
        topic = self._find_topic(name)
        current = len(topic.partitions)
        if count < current:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested {count}.",
            )
        if count == current:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
            )
        added = count - current
        if count > MAX_PARTITIONS_PER_REQUEST:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"Number of partitions {count} exceeds the limit of {MAX_PARTITIONS_PER_REQUEST}.",
            )
        rf = topic.replication_factor
        if assignments:
            if len(assignments) != added:
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                    "assignment(s) were specified.",
                )
            storage = {n for n, info in self.nodes.items() if info.kind is NodeKind.STORAGE}
            for replicas in assignments:
                check_replica_list(replicas, storage)
                if len(replicas) != rf:
                    raise ControllerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes a partition with {len(replicas)} "
                        f"replica(s), but this is not consistent with previous partitions, which have "
                        f"{rf} replica(s).",
                    )
            new = self._new_partitions(current, assignments, manual=True)
        else:
            brokers = self.usable_storage_nodes()
            check_replication_factor(rf, len(brokers))
            first = topic.partitions[0].replicas[0] if topic.partitions else None
            start = sorted(brokers).index(first) if first in brokers else None
            lists = assign_replicas(
                brokers, added, rf, first_partition=current, start_index=start, rng=self.rng
            )
            new = self._new_partitions(current, lists, manual=False)
        result = TopicResult(
            name, topic_id=topic.topic_id, num_partitions=count, replication_factor=rf
        )
        if not validate_only:
            topic.partitions.extend(new)
            self._mark_topic(topic)
        return result

    # ------------------------------------------------------------------ configs

    def alter_configs(
        self,
        resource_type: ResourceType,
        resource_name: str,
        changes: Sequence[ConfigChange],
        *,
        incremental: bool,
        validate_only: bool = False,
    ) -> None:
        names = [c.name for c in changes]
        if len(set(names)) != len(names):
            raise ControllerError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        if resource_type is ResourceType.TOPIC:
            topic = self._find_topic(resource_name)
            current = dict(topic.configs)
            updated = self._apply_changes(
                current,
                changes,
                incremental,
                lambda n: self._topic_list_base(topic, n),
                _topic_is_list,
            )
            validated = self._validated_configs(updated)
            if not validate_only and validated != topic.configs:
                topic.configs = validated
                self._mark_topic(topic)
            return
        if resource_type is ResourceType.BROKER and resource_name:
            self._alter_broker_configs(
                self._broker_id(resource_name),
                changes,
                incremental=incremental,
                validate_only=validate_only,
            )
            return
        if resource_type is ResourceType.BROKER:
            current = dict(self.dynamic_configs)
            updated = self._apply_changes(
                current,
                changes,
                incremental,
                lambda n: (self.config(n) or "").split(",") if self.config(n) else [],
                broker_defaults.is_list,
            )
            touched = set(names) | (set(current) if not incremental else set())
            for name in touched:
                broker_defaults.check_dynamic_update(name, updated.get(name))
            if not validate_only and updated != self.dynamic_configs:
                self.dynamic_configs = updated
                self._dirty.add(KEY_CLUSTER_CONFIGS)
            return
        raise ControllerError(
            ErrorCode.INVALID_REQUEST, f"Unsupported resource type {int(resource_type)}"
        )

    def _broker_id(self, name: str) -> int:
        """A BROKER resource name as a registered storage node id (QuorumController's checks)."""
        try:
            node_id = int(name)
        except ValueError:
            raise ControllerError(
                ErrorCode.INVALID_REQUEST, f"Invalid broker name {name}"
            ) from None
        node = self.nodes.get(node_id)
        if node is None or node.kind is not NodeKind.STORAGE:
            raise ControllerError(
                ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {node_id} found."
            )
        return node_id

    def broker_config(self, node_id: int, name: str) -> str | None:
        """One broker's effective value: its own dynamic config, else the cluster's."""
        own = self.broker_configs.get(node_id, {})
        return own[name] if name in own else self.config(name)

    def _alter_broker_configs(
        self,
        node_id: int,
        changes: Sequence[ConfigChange],
        *,
        incremental: bool,
        validate_only: bool,
    ) -> None:
        """AlterConfigs on ``BROKER <id>``: that broker's DYNAMIC_BROKER_CONFIG overrides."""
        current = dict(self.broker_configs.get(node_id, {}))

        def list_base(name: str) -> list[str]:
            value = self.broker_config(node_id, name)
            return value.split(",") if value else []

        updated = self._apply_changes(
            current, changes, incremental, list_base, broker_defaults.is_list
        )
        touched = {c.name for c in changes} | (set(current) if not incremental else set())
        for name in touched:
            broker_defaults.check_dynamic_update(name, updated.get(name), per_broker=True)
        if not validate_only and updated != current:
            if updated:
                self.broker_configs[node_id] = updated
            else:
                self.broker_configs.pop(node_id, None)
            self._dirty.add(f"{BROKER_CONFIGS_PREFIX}{node_id}")

    def _topic_list_base(self, topic: TopicState, name: str) -> list[str]:
        if name not in TOPIC_CONFIGS:
            raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        value = resolve(topic.configs, self.effective_configs())[name]
        return list(value) if isinstance(value, list) else [str(value)]

    @staticmethod
    def _apply_changes(
        current: dict[str, str],
        changes: Sequence[ConfigChange],
        incremental: bool,
        list_base: Callable[[str], list[str]],
        is_list: Callable[[str], bool],
    ) -> dict[str, str]:
        if not incremental:
            out: dict[str, str] = {}
            for change in changes:
                if change.value is None:
                    raise ControllerError(
                        ErrorCode.INVALID_REQUEST,
                        f"Null value not supported for config: {change.name}",
                    )
                out[change.name] = change.value
            return out
        out = dict(current)
        for change in changes:
            if change.op is ConfigOp.SET:
                if change.value is None:
                    raise ControllerError(
                        ErrorCode.INVALID_REQUEST,
                        f"Null value not supported for config: {change.name}",
                    )
                out[change.name] = change.value
            elif change.op is ConfigOp.DELETE:
                out.pop(change.name, None)
            else:
                if not is_list(change.name):
                    verb = "append" if change.op is ConfigOp.APPEND else "subtract"
                    raise ControllerError(
                        ErrorCode.INVALID_CONFIG,
                        f"Config value {verb} is not allowed for config key: {change.name}",
                    )
                base = out[change.name].split(",") if change.name in out else list_base(change.name)
                base = [b.strip() for b in base if b.strip()]
                values = [v.strip() for v in (change.value or "").split(",") if v.strip()]
                if change.op is ConfigOp.APPEND:
                    merged = base + [v for v in values if v not in base]
                else:
                    merged = [b for b in base if b not in values]
                out[change.name] = ",".join(merged)
        return out

    # ------------------------------------------------------------------ producer ids

    def allocate_producer_ids(self, node_id: int, incarnation: int) -> tuple[int, int]:
        self.check_session(node_id, incarnation)
        first = self.next_producer_id
        self.next_producer_id += self.producer_id_block_size
        self._dirty.add(KEY_PRODUCER_IDS)
        return first, self.producer_id_block_size

    # ------------------------------------------------------------------ partition changes

    def _partition(self, topic_name: str, partition: int) -> tuple[TopicState, PartitionState]:
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= partition < len(topic.partitions):
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host this topic-partition: {topic_name}-{partition}",
            )
        return topic, topic.partitions[partition]

    def alter_partition(
        self,
        node_id: int,
        incarnation: int,
        topic_name: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Sequence[int],
    ) -> PartitionState:
        """Kafka's AlterPartition: the leader shrinks or expands its ISR."""
        self.check_session(node_id, incarnation)
        topic, p = self._partition(topic_name, partition)
        if leader_epoch != p.leader_epoch:
            raise ControllerError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"Leader epoch {leader_epoch} does not match the current {p.leader_epoch}",
            )
        if node_id != p.leader:
            raise ControllerError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"Node {node_id} is not the leader (leader is {p.leader})",
            )
        if partition_epoch != p.partition_epoch:
            raise ControllerError(
                ErrorCode.INVALID_UPDATE_VERSION,
                f"Partition epoch {partition_epoch} does not match the current {p.partition_epoch}",
            )
        isr = list(new_isr)
        if node_id not in isr or len(set(isr)) != len(isr) or any(r not in p.replicas for r in isr):
            raise ControllerError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid ISR {isr}: it must hold the leader and only distinct replicas of {p.replicas}",
            )
        eligible = self.eligible_in(p)
        for r in isr:
            if r not in p.isr and not eligible(r):
                raise ControllerError(
                    ErrorCode.INELIGIBLE_REPLICA,
                    f"Replica {r} is offline or in controlled shutdown and cannot join the ISR",
                )
        leader = p.leader
        leader_node = self.nodes.get(leader)
        if leader_node is not None and leader_node.state is NodeState.SHUTTING_DOWN:
            moved, _ = choose_leader(p.replicas, isr, eligible, exclude=leader)
            if moved != NO_LEADER:
                leader, isr = moved, [r for r in isr if r != p.leader]
        self._change(topic, p, leader, isr)
        self._maybe_complete_reassignment(topic, p)
        return p

    def _targets(self, partitions: Iterable[tuple[str, int]] | None) -> Iterator[tuple[str, int]]:
        if partitions is None:
            for topic in self.topics.values():
                for p in topic.partitions:
                    yield topic.name, p.partition
        else:
            yield from partitions

    def elect_leaders(
        self, election: ElectionType, partitions: Sequence[tuple[str, int]] | None = None
    ) -> list[ElectionResult]:
        """Kafka's ElectLeaders; with ``partitions=None`` (all) partitions needing nothing are omitted."""
        results: list[ElectionResult] = []
        for name, index in self._targets(partitions):
            try:
                topic, p = self._partition(name, index)
                if election is ElectionType.PREFERRED:
                    preferred = p.replicas[0]
                    if p.leader == preferred:
                        raise ControllerError(
                            ErrorCode.ELECTION_NOT_NEEDED,
                            "Leader election not needed for topic partition.",
                        )
                    if preferred not in p.isr or not self.eligible_in(p)(preferred):
                        raise ControllerError(
                            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                            f"Failed to elect leader for partition {name}-{index} under strategy PreferredReplicaPartitionLeaderElectionStrategy",
                        )
                    self._change(topic, p, preferred, p.isr)
                else:
                    if p.leader != NO_LEADER and self.live(p.leader):
                        raise ControllerError(
                            ErrorCode.ELECTION_NOT_NEEDED,
                            "Leader election not needed for topic partition.",
                        )
                    leader, isr = choose_leader(
                        p.replicas, p.isr, self.eligible_in(p), unclean=True
                    )
                    if leader == NO_LEADER:
                        raise ControllerError(
                            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                            f"Failed to elect leader for partition {name}-{index} under strategy UncleanLeaderElectionStrategy",
                        )
                    self._change(topic, p, leader, isr)
                results.append(ElectionResult(name, index))
            except ControllerError as exc:
                if partitions is None and exc.code is ErrorCode.ELECTION_NOT_NEEDED:
                    continue
                results.append(ElectionResult(name, index, int(exc.code), exc.message))
        return results

    def rebalance_preferred_leaders(self, imbalance_percentage: int | None = None) -> int:
        """Kafka's auto leader rebalance: per node, if more than the allowed share of the
        partitions it prefers are led elsewhere, move them back where possible."""
        pct = (
            self.config_int("leader.imbalance.per.broker.percentage")
            if imbalance_percentage is None
            else imbalance_percentage
        )
        preferred_of: dict[int, list[tuple[TopicState, PartitionState]]] = {}
        for topic in self.topics.values():
            for p in topic.partitions:
                if p.replicas:
                    preferred_of.setdefault(p.replicas[0], []).append((topic, p))
        moved = 0
        for node_id, owned in sorted(preferred_of.items()):
            if not self.eligible(node_id):
                continue
            astray = [(t, p) for t, p in owned if p.leader != node_id]
            if not astray or len(astray) * 100 <= pct * len(owned):
                continue
            for topic, p in astray:
                if node_id in p.isr and node_id not in p.offline:
                    self._change(topic, p, node_id, p.isr)
                    moved += 1
        return moved

    # ------------------------------------------------------------------ reassignment (KIP-455)

    def _reassignable(self, name: str, index: int) -> tuple[TopicState, PartitionState]:
        topic = self.topics.get(name)
        if topic is None:
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}."
            )
        if not 0 <= index < len(topic.partitions):
            raise ControllerError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}."
            )
        return topic, topic.partitions[index]

    def alter_partition_reassignment(
        self,
        name: str,
        index: int,
        target: Sequence[int] | None,
        *,
        allow_replication_factor_change: bool = True,
    ) -> None:
        """Start (or replace) a reassignment of one partition to ``target``; None cancels."""
        topic, p = self._reassignable(name, index)
        if target is None:
            if not reassignment.in_progress(p):
                raise ControllerError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    "No partition reassignment is in progress for this topic or partition.",
                )
            sets, isr, unclean = reassignment.revert(p)
            if unclean and not self.unclean_enabled(topic):
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {name}:{index} because it "
                    "would require an unclean leader election.",
                )
            self._reassign(topic, p, sets, isr, unclean=self.unclean_enabled(topic))
            return
        storage = {n for n, info in self.nodes.items() if info.kind is NodeKind.STORAGE}
        reassignment.check_target(target, storage)
        if not allow_replication_factor_change:
            reassignment.check_replication_factor_kept(p, target)
        self._reassign(topic, p, reassignment.start(p.replicas, target), p.isr)

    def _reassign(
        self,
        topic: TopicState,
        p: PartitionState,
        sets: reassignment.ReplicaSets,
        isr: Sequence[int],
        *,
        unclean: bool = False,
    ) -> None:
        sets, new_isr = reassignment.complete(sets, isr)
        leader, new_isr = reassignment.elect(
            p, sets.replicas, new_isr, self.eligible_in(p), unclean=unclean
        )
        change, changed = reassignment.apply(p, sets, leader, new_isr)
        if changed:
            self._mark_topic(topic)
            self.stats.leader_elections += int(change.elected)
            self.stats.isr_shrinks += int(change.isr_shrunk)
            self.stats.isr_expands += int(change.isr_expanded)

    def _maybe_complete_reassignment(self, topic: TopicState, p: PartitionState) -> None:
        """The ISR changed: a reassignment whose target is all in sync completes."""
        if reassignment.in_progress(p):
            sets = reassignment.ReplicaSets(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            self._reassign(topic, p, sets, p.isr)

    def complete_reassignments(self) -> None:
        """Finish every reassignment the current ISRs already allow (after a controller
        failover, so none waits for the next ISR change)."""
        for topic in self.topics.values():
            for p in topic.partitions:
                self._maybe_complete_reassignment(topic, p)

    def partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> list[tuple[str, PartitionState]]:
        """Ongoing reassignments; unknown topics and partitions are skipped, as KRaft does."""
        out: list[tuple[str, PartitionState]] = []
        for name, index in self._targets(partitions):
            topic = self.topics.get(name)
            if topic is None or not 0 <= index < len(topic.partitions):
                continue
            p = topic.partitions[index]
            if reassignment.in_progress(p):
                out.append((name, p.copy()))
        return out

    # ------------------------------------------------------------------ failed log directories

    def report_offline_replicas(
        self, node_id: int, incarnation: int, partitions: Iterable[tuple[str, int]]
    ) -> int:
        """A storage node's log directory failed: its replicas there are offline until the
        node restarts. They leave the ISR (a last member stays, as Kafka keeps it) and
        leadership moves to another in-sync replica. Returns how many were newly offline."""
        self.check_session(node_id, incarnation)
        count = 0
        for name, index in partitions:
            topic = self.topics.get(name)
            if topic is None or not 0 <= index < len(topic.partitions):
                continue
            p = topic.partitions[index]
            if node_id not in p.replicas or node_id in p.offline:
                continue
            p.offline.append(node_id)
            self._mark_topic(topic)
            count += 1
            isr = [r for r in p.isr if r != node_id] if len(p.isr) > 1 else list(p.isr)
            leader = p.leader
            if leader in (node_id, NO_LEADER):
                leader, isr = choose_leader(
                    p.replicas, isr, self.eligible_in(p), unclean=self.unclean_enabled(topic)
                )
            self._change(topic, p, leader, isr)
        return count

    def _clear_offline(self, node_id: int) -> None:
        """A storage node (re)registered: it reports failed directories again if any."""
        for topic, p in self._partitions_of(node_id):
            if node_id in p.offline:
                p.offline.remove(node_id)
                self._mark_topic(topic)

    # ------------------------------------------------------------------ gauges

    def offline_partitions(self) -> int:
        return sum(1 for t in self.topics.values() for p in t.partitions if p.leader == NO_LEADER)

    def under_replicated_partitions(self) -> int:
        return sum(
            1
            for t in self.topics.values()
            for p in t.partitions
            if len(p.isr) < len(p.replicas) - len(p.adding_replicas)
        )

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())


def _topic_is_list(name: str) -> bool:
    cfg = TOPIC_CONFIGS.get(name)
    return cfg is not None and cfg.type is ConfigType.LIST
