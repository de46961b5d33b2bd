"""The records the controller keeps per node, topic, partition and coordinator shard.

Each record turns into a small JSON-able dict (``to_json``/``from_json``) so the
controller can persist it as one key of the metadata store; field names follow
common.proto (and through it Kafka's metadata records).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class NodeKind(IntEnum):
    """Values of common.proto ``NodeKind``."""

    UNSPECIFIED = 0
    GATEWAY = 1
    STORAGE = 2
    CONTROLLER = 3
    COORDINATOR = 4
    OFFSET_STORE = 5
    TRANSACTION_COORDINATOR = 6


class NodeState(IntEnum):
    """Values of common.proto ``NodeState``."""

    UNSPECIFIED = 0
    ONLINE = 1
    OFFLINE = 2
    SHUTTING_DOWN = 3


NO_LEADER = -1


@dataclass
class ListenerEndpoint:
    """A gateway's advertised listener (common.proto ``ListenerEndpoint``)."""

    name: str
    host: str = ""
    port: int = 0
    broker_ports: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "port": self.port,
            "broker_ports": {str(k): v for k, v in sorted(self.broker_ports.items())},
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ListenerEndpoint:
        return cls(
            name=str(obj["name"]),
            host=obj.get("host", ""),
            port=int(obj.get("port", 0)),
            broker_ports={int(k): int(v) for k, v in (obj.get("broker_ports") or {}).items()},
        )


@dataclass
class NodeInfo:
    node_id: int
    kind: NodeKind
    host: str = ""
    kafka_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    rack: str = ""
    state: NodeState = NodeState.ONLINE
    incarnation: int = 0
    advertised_host: str = ""
    # Gateways: storage node id -> broker port (common.proto ``Node.broker_ports``).
    broker_ports: dict[int, int] = field(default_factory=dict)
    # Storage nodes: the data link port (common.proto ``Node.data_port``).
    data_port: int = 0
    # Storage nodes: the data link's Unix socket (common.proto ``Node.data_socket``):
    # its path ("" for none), the node's host id and the per-start token of its hello.
    data_socket_path: str = ""
    data_socket_host: str = ""
    data_socket_token: bytes = b""
    # Gateways: every listener's advertised endpoints (common.proto ``Node.listeners``).
    listeners: list[ListenerEndpoint] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "kind": int(self.kind),
            "host": self.host,
            "kafka_port": self.kafka_port,
            "grpc_port": self.grpc_port,
            "metrics_port": self.metrics_port,
            "rack": self.rack,
            "state": int(self.state),
            "incarnation": self.incarnation,
            "advertised_host": self.advertised_host,
            "broker_ports": {str(k): v for k, v in sorted(self.broker_ports.items())},
            "data_port": self.data_port,
            "data_socket_path": self.data_socket_path,
            "data_socket_host": self.data_socket_host,
            "data_socket_token": self.data_socket_token.hex(),
            "listeners": [lst.to_json() for lst in self.listeners],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> NodeInfo:
        return cls(
            node_id=int(obj["node_id"]),
            kind=NodeKind(obj["kind"]),
            host=obj.get("host", ""),
            kafka_port=int(obj.get("kafka_port", 0)),
            grpc_port=int(obj.get("grpc_port", 0)),
            metrics_port=int(obj.get("metrics_port", 0)),
            rack=obj.get("rack", ""),
            state=NodeState(obj.get("state", NodeState.ONLINE)),
            incarnation=int(obj.get("incarnation", 0)),
            advertised_host=obj.get("advertised_host", ""),
            broker_ports={int(k): int(v) for k, v in (obj.get("broker_ports") or {}).items()},
            data_port=int(obj.get("data_port", 0)),
            data_socket_path=str(obj.get("data_socket_path", "")),
            data_socket_host=str(obj.get("data_socket_host", "")),
            data_socket_token=bytes.fromhex(obj.get("data_socket_token", "")),
            listeners=[ListenerEndpoint.from_json(x) for x in obj.get("listeners") or ()],
        )


@dataclass
class PartitionState:
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    # A reassignment in progress (KIP-455, odradek.controller.reassignment).
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    # Replicas whose storage node reported their log directory failed (until it restarts).
    offline: list[int] = field(default_factory=list)

    def to_json(self) -> list[Any]:
        row: list[Any] = [
            self.partition,
            self.replicas,
            self.isr,
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
        ]
        if self.adding_replicas or self.removing_replicas or self.offline:
            row += [self.adding_replicas, self.removing_replicas, self.offline]
        return row

    @classmethod
    def from_json(cls, row: list[Any]) -> PartitionState:
        extra = [list(x) for x in row[6:9]] if len(row) > 6 else [[], [], []]
        return cls(
            int(row[0]),
            list(row[1]),
            list(row[2]),
            int(row[3]),
            int(row[4]),
            int(row[5]),
            *extra,
        )

    def copy(self) -> PartitionState:
        return PartitionState(
            self.partition,
            list(self.replicas),
            list(self.isr),
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
            list(self.adding_replicas),
            list(self.removing_replicas),
            list(self.offline),
        )


@dataclass
class TopicState:
    name: str
    topic_id: bytes
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": str(uuid.UUID(bytes=self.topic_id)),
            "internal": self.internal,
            "configs": dict(sorted(self.configs.items())),
            "partitions": [p.to_json() for p in self.partitions],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TopicState:
        return cls(
            name=obj["name"],
            topic_id=uuid.UUID(obj["topic_id"]).bytes,
            partitions=[PartitionState.from_json(row) for row in obj["partitions"]],
            configs={str(k): str(v) for k, v in obj.get("configs", {}).items()},
            internal=bool(obj.get("internal", False)),
        )


@dataclass
class ShardState:
    """Ownership of one ``__consumer_offsets`` shard by a coordinator node."""

    shard: int
    coordinator_id: int = NO_LEADER
    epoch: int = 0
