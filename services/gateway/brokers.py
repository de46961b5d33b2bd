"""The brokers Kafka clients see: the storage nodes, each advertised at a gateway.

Pure code: a metadata snapshot in, the broker list out, so every gateway computes the
same answer and every rule is unit-tested without a cluster (docs/brokers.md).

- The brokers are the registered storage nodes, by id, offline ones included.
  Partition leaders, replicas and ISRs name storage nodes already, so a client's
  broker ids are the ids every other API takes (replica assignments, ElectLeaders,
  DescribeLogDirs, DescribeConfigs on a broker). A Kafka broker that dies leaves
  Metadata; here a storage node that dies stays listed, because its broker endpoint
  is a gateway port that is still up (requests there for what it no longer leads get
  NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR, as from any broker), and a broker leaving
  Metadata costs clients more than it tells them: librdkafka (2.10+) decommissions
  it, and a handle still referenced (a group coordinator) stays "terminating" when
  the node comes back, so a transactional producer's TxnOffsetCommit to it was never
  sent (tests/integration/test_transactions_kill9.py hung in 4 of 10 runs); an empty
  list makes librdkafka drop every broker and re-bootstrap
  (tests/integration/test_failover_kill9.py restarts all three). Offline storage
  nodes still show in ``offline_replicas`` and never as leaders.
- Each broker is advertised at a gateway's *broker port* for it (port-per-broker, as
  Kafka proxies do it): a gateway opens, for each of its listeners, one socket per
  storage node besides that listener's bootstrap port and publishes the ports in its
  registration (``Node.listeners``; the first listener also in ``Node.broker_ports``).
  Clients get the endpoints of the listener they connected to (its name), as Kafka
  answers the brokers' endpoints for the request's listener name. The port a connection arrives on tells the gateway which
  broker the client meant (``ConnectionContext.broker_id``).
- Which gateway fronts a broker: among the online gateways with a port for it, one on
  the storage node's own host if there is one (co-location), else the brokers are
  spread over the gateways in id order. A storage node no gateway has a port for yet
  is advertised at a gateway's bootstrap listener, so the lists stay consistent.
- The controller id clients see is the lowest broker id (KRaft answers a broker
  there too), -1 when there is no broker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2

__all__ = ["Broker", "advertise", "broker_of_partition", "controller_id"]

# Storage node states in which a node leads and coordinates (an offline one is listed
# as a broker all the same, see above).
_LIVE = (common_pb2.ONLINE, common_pb2.SHUTTING_DOWN)
# Listener addresses that say nothing about the host a gateway runs on.
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker entry of Metadata/DescribeCluster."""

    node_id: int
    host: str
    port: int
    rack: str | None
    gateway_id: int  # the gateway whose endpoint this is


def _same_host(gateway: common_pb2.Node, storage: common_pb2.Node) -> bool:
    return gateway.host not in _WILDCARDS and gateway.host == storage.host


@dataclass(frozen=True, slots=True)
class _Endpoint:
    """A gateway's advertised endpoint on one listener."""

    gateway: common_pb2.Node
    host: str
    port: int
    broker_ports: Mapping[int, int]


def _endpoint(gateway: common_pb2.Node, listener: str | None) -> _Endpoint | None:
    """``gateway``'s endpoint on ``listener`` (None: its first listener); None when the
    gateway has no such listener. A registration without ``listeners`` (one listener,
    from before they were listed) answers for any name."""
    if listener is not None and gateway.listeners:
        for found in gateway.listeners:
            if found.name == listener:
                return _Endpoint(
                    gateway, found.host or gateway.host, found.port, found.broker_ports
                )
        return None
    return _Endpoint(
        gateway, gateway.advertised_host or gateway.host, gateway.kafka_port, gateway.broker_ports
    )


def advertise(
    metadata: common_pb2.ClusterMetadata,
    gateways: Sequence[common_pb2.Node],
    listener: str | None = None,
) -> dict[int, Broker]:
    """Every broker (registered storage node) with the endpoint it is advertised at on
    ``listener`` (the name of the listener the client connected to; None: each
    gateway's first listener), by id.

    ``gateways`` are the online gateways by id (a gateway passes its own entry as it
    is right now, which the metadata may not show yet). Only gateways with that listener
    front brokers on it, as a Kafka broker without the request's listener is left out
    of Metadata. Empty without such gateways.
    """
    out: dict[int, Broker] = {}
    endpoints = [e for e in (_endpoint(g, listener) for g in gateways) if e is not None]
    if not endpoints:
        return out
    storage_nodes = sorted(
        (n for n in metadata.nodes if n.kind == common_pb2.STORAGE), key=lambda n: n.node_id
    )
    for index, storage in enumerate(storage_nodes):
        with_port = [e for e in endpoints if storage.node_id in e.broker_ports]
        pool = with_port or endpoints
        near = [e for e in pool if _same_host(e.gateway, storage)]
        chosen = (near or pool)[index % len(near or pool)]
        out[storage.node_id] = Broker(
            node_id=storage.node_id,
            host=chosen.host,
            port=chosen.broker_ports.get(storage.node_id) or chosen.port,
            rack=storage.rack or chosen.gateway.rack or None,
            gateway_id=chosen.gateway.node_id,
        )
    return out


def controller_id(brokers: Mapping[int, Broker]) -> int:
    """The controller id Metadata and DescribeCluster answer: the lowest broker id."""
    return min(brokers, default=-1)


def broker_of_partition(
    snapshot: Snapshot, brokers: Mapping[int, Broker], topic: str, partition: int
) -> Broker | None:
    """The broker leading ``topic``-``partition``, or None (no such partition, no leader,
    or a leader whose storage node is offline and not yet replaced).

    FindCoordinator answers this for ``__consumer_offsets`` (groups) and
    ``__transaction_state`` (transactional ids), as Kafka does.
    """
    p = snapshot.partition(topic, partition)
    if p is None or p.leader < 0:
        return None
    leader = snapshot.nodes.get(p.leader)
    if leader is None or leader.state not in _LIVE:
        return None
    return brokers.get(p.leader)
