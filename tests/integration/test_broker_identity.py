"""Broker identity on the wire (docs/brokers.md): the brokers clients see are the storage
nodes, each advertised at a gateway's broker port, and Kafka's invariants hold in every
version of Metadata (0-12) and DescribeCluster (0-1), on the smallest shape (1 storage
node, 1 gateway) and on one where every port question arises at once (3 storage nodes
behind 2 gateways: each gateway serves several broker ids, each broker id is served by
several gateways):

- a partition's leader is one of its replicas and a listed broker;
- every replica and ISR member is a listed broker, or (only when its storage node is
  down) listed in ``offline_replicas``;
- the controller id is a listed broker;
- every gateway answers the same brokers, and each broker's endpoint is a port that
  knows it is that broker (DescribeConfigs on another id there is refused, as on a
  Kafka broker);
- FindCoordinator names the broker leading the group's ``__consumer_offsets``
  partition and ListGroups on each broker's port lists exactly that broker's groups;
- a Produce on a broker's port is that broker's to take: the leader appends, any
  other broker answers NOT_LEADER_OR_FOLLOWER (an idempotent producer's pipelined
  requests must not reach two nodes around a leader change).

Raw protocol here; tests/compat/test_compat_broker_identity.py drives real clients.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.batches import producer_batch
from helpers.waiting import wait_until
from helpers.wire import WireClient
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from odradek.group_shard import group_shard
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import (
    DescribeClusterRequest,
    DescribeConfigsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    ProduceRequest,
)
from odradek.tools.launcher import (
    Cluster,
    ClusterOptions,
)

SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
}
ZERO = uuid.UUID(int=0)
BROKER = 4  # ConfigResource type
SHAPES = [(1, 1), (3, 2)]  # (storage nodes, gateways)


def start(data_dir: Any, storage: int, gateways: int, **settings: str) -> Cluster:
    cluster = Cluster(
        ClusterOptions(
            data_dir=data_dir,
            port=0,
            storage_nodes=storage,
            gateways=gateways,
            replication_factor=storage,
            settings={**SETTINGS, **settings},
        )
    )
    cluster.start()
    return cluster


@pytest.fixture(scope="module", params=SHAPES, ids=lambda s: f"{s[0]}storage-{s[1]}gw")
def shaped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, str]]:
    """A cluster of one shape with a 6-partition topic replicated on every storage node."""
    storage, gateways = request.param
    cluster = start(tmp_path_factory.mktemp(f"identity-{storage}-{gateways}"), storage, gateways)
    topic = f"ident-{uuid.uuid4().hex[:8]}"
    try:
        # Every storage node registered and online before a topic replicated on all.
        wait_until(
            lambda: len(metadata(bootstraps(cluster)[0], 12, []).brokers) == storage,
            f"{storage} brokers in Metadata",
            timeout=30,
        )
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
        admin.create_topics([NewTopic(topic, 6, storage)])
        admin.close()
        wait_until(lambda: all_in_sync(cluster, topic), "every replica in sync", timeout=30)
        yield cluster, topic
    finally:
        cluster.stop()


def bootstraps(cluster: Cluster) -> list[str]:
    return cluster.bootstrap_servers.split(",")


def metadata(address: str, version: int, topics: list[str] | None) -> Any:
    """Metadata of ``topics`` (None: all topics; v0 says that with an empty list)."""
    T = MetadataRequest.MetadataRequestTopic
    if topics is None and version == 0:
        topics = []
    request = MetadataRequest(
        topics=None if topics is None else [T(name=t, topic_id=ZERO) for t in topics],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    with WireClient(address) as c:
        return c.call(request, version)


def all_in_sync(cluster: Cluster, topic: str) -> bool:
    md = metadata(bootstraps(cluster)[0], 12, [topic])
    (t,) = md.topics
    return t.error_code == 0 and all(
        p.leader_id >= 0 and sorted(p.isr_nodes) == sorted(p.replica_nodes) for p in t.partitions
    )


def storage_ids(cluster: Cluster) -> list[int]:
    return sorted(
        int(s.spec.settings["node.id"])
        for s in cluster.services
        if s.spec.kind == "storage" and s.process.poll() is None
    )


def endpoint(broker: Any) -> str:
    return f"{broker.host}:{broker.port}"


def check_invariants(md: Any, version: int, *, down: frozenset[int] = frozenset()) -> None:
    """Kafka's invariants of one Metadata response (``down``: storage nodes known down)."""
    brokers = {b.node_id for b in md.brokers}
    if version >= 1:
        assert md.controller_id in brokers, (md.controller_id, brokers)
    for t in md.topics:
        for p in t.partitions:
            offline = set(getattr(p, "offline_replicas", None) or [])
            if version >= 5:
                assert offline == set(p.replica_nodes) & down, (t.name, p)
            assert p.leader_id in brokers and p.leader_id in p.replica_nodes, (t.name, p)
            assert set(p.isr_nodes) <= set(p.replica_nodes), (t.name, p)
            assert set(p.replica_nodes) <= brokers | down, (t.name, p, brokers)
            assert set(p.isr_nodes) <= brokers | down, (t.name, p, brokers)


# -- every version -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(13))
def test_metadata_invariants_every_version(shaped: tuple[Cluster, str], version: int) -> None:
    cluster, topic = shaped
    expected = storage_ids(cluster)
    answers = []
    # Every gateway's bootstrap listener and every broker port answer the same brokers.
    addresses = bootstraps(cluster)
    addresses += [endpoint(b) for b in metadata(addresses[0], 12, []).brokers]
    for address in addresses:
        md = metadata(address, version, None if version == 0 else [topic, "__consumer_offsets"])
        assert sorted(b.node_id for b in md.brokers) == expected
        check_invariants(md, version)
        names = {t.name for t in md.topics}
        assert topic in names and "__consumer_offsets" in names
        answers.append(
            (
                sorted((b.node_id, b.host, b.port) for b in md.brokers),
                getattr(md, "controller_id", None),
            )
        )
    assert all(a == answers[0] for a in answers), answers
    if version >= 1:
        assert answers[0][1] == expected[0], "the controller id is the lowest broker id"
    # The replicas are truthful: the topic is replicated on every storage node.
    (t,) = [t for t in md.topics if t.name == topic]
    assert all(sorted(p.replica_nodes) == expected for p in t.partitions)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_matches_metadata(shaped: tuple[Cluster, str], version: int) -> None:
    cluster, _ = shaped
    md = metadata(bootstraps(cluster)[0], 12, [])
    for address in bootstraps(cluster):
        with WireClient(address) as c:
            dc = c.call(
                DescribeClusterRequest(include_cluster_authorized_operations=False), version
            )
        assert dc.error_code == 0
        assert sorted((b.broker_id, b.host, b.port, b.rack) for b in dc.brokers) == sorted(
            (b.node_id, b.host, b.port, b.rack) for b in md.brokers
        )
        assert dc.controller_id == md.controller_id
        assert dc.controller_id in {b.broker_id for b in dc.brokers}


# -- each broker's port is that broker ------------------------------------------------------------


def describe_broker(address: str, name: str) -> Any:
    R = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            R(resource_type=BROKER, resource_name=name, configuration_keys=["num.partitions"])
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    with WireClient(address) as c:
        (result,) = c.call(request, 4).results
    return result


def test_each_broker_endpoint_is_that_broker(shaped: tuple[Cluster, str]) -> None:
    cluster, _ = shaped
    md = metadata(bootstraps(cluster)[0], 12, [])
    ids = [b.node_id for b in md.brokers]
    gateways = [s for s in cluster.services if s.spec.kind == "gateway"]
    for index, b in enumerate(sorted(md.brokers, key=lambda b: b.node_id)):
        # Spread over the gateways in id order (all share this host), each at its own
        # broker port for that storage node, none at a bootstrap listener.
        fronting = gateways[index % len(gateways)]
        assert b.port == fronting.ports[f"broker-{b.node_id}"]
        assert b.port not in {g.ports["kafka"] for g in gateways}
        own = describe_broker(endpoint(b), str(b.node_id))
        assert (own.error_code, [c.name for c in own.configs]) == (0, ["num.partitions"])
        for other in (i for i in ids if i != b.node_id):
            refused = describe_broker(endpoint(b), str(other))
            assert (refused.error_code, refused.error_message) == (
                E.INVALID_REQUEST,
                f"Unexpected broker id, expected {b.node_id} or empty string, but received {other}",
            )
    # Every gateway also listens for the brokers another gateway fronts (stale metadata).
    for gateway in gateways:
        for node_id in ids:
            address = f"127.0.0.1:{gateway.ports[f'broker-{node_id}']}"
            assert describe_broker(address, str(node_id)).error_code == 0
    # The bootstrap listener answers for any broker, and names a gateway id no broker.
    for node_id in ids:
        assert describe_broker(bootstraps(cluster)[0], str(node_id)).error_code == 0
    gone = describe_broker(bootstraps(cluster)[0], "0")
    assert (gone.error_code, gone.error_message) == (
        E.BROKER_ID_NOT_REGISTERED,
        "No node with id 0 found.",
    )


def produce_one(address: str, topic: str, partition: int) -> int:
    """Error code of a one-record acks=1 Produce v9 sent to ``address``."""
    records = bytes(producer_batch([(int(time.time() * 1000), None, b"x")]))
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            data(
                name=topic,
                partition_data=[data.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )
    with WireClient(address) as c:
        response = c.call(request, 9)
    ((result,),) = [t.partition_responses for t in response.responses]
    return int(result.error_code)


def test_produce_is_taken_only_by_the_broker_addressed(shaped: tuple[Cluster, str]) -> None:
    cluster, topic = shaped
    md = metadata(bootstraps(cluster)[0], 12, [topic])
    brokers = {b.node_id: endpoint(b) for b in md.brokers}
    (t,) = md.topics
    for p in t.partitions:
        # The leader takes writes once it has heard of its leadership.
        wait_until(
            lambda i=p.partition_index, a=brokers[p.leader_id]: produce_one(a, topic, i) == E.NONE,
            "the leader taking writes",
            timeout=30,
        )
        for node_id, address in brokers.items():
            expected = E.NONE if node_id == p.leader_id else E.NOT_LEADER_OR_FOLLOWER
            assert produce_one(address, topic, p.partition_index) == expected, (p, node_id)
        # The bootstrap listener is no broker: it hands the write to the leader.
        assert produce_one(bootstraps(cluster)[-1], topic, p.partition_index) == E.NONE


def commit_simple(address: str, group: str, topic: str) -> None:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            T(
                name=topic,
                partitions=[
                    P(
                        partition_index=0,
                        committed_offset=0,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    deadline = time.monotonic() + 30
    while True:
        with WireClient(address) as c:
            code = c.call(request, 2).topics[0].partitions[0].error_code
        if code == 0:
            return
        assert code in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE), code
        assert time.monotonic() < deadline, f"commit for {group} kept failing with {code}"
        time.sleep(0.2)


def coordinator_of(address: str, group: str) -> Any:
    deadline = time.monotonic() + 30
    while True:
        with WireClient(address) as c:
            found = c.call(FindCoordinatorRequest(key=group, key_type=0), 3)
        if found.error_code == 0:
            return found
        assert found.error_code == E.COORDINATOR_NOT_AVAILABLE, found
        assert time.monotonic() < deadline, f"no coordinator for {group}"
        time.sleep(0.2)


def listed(address: str) -> set[str]:
    # A broker whose other coordinator shards are still loading answers
    # COORDINATOR_LOAD_IN_PROGRESS with a partial list, as Kafka's
    # GroupCoordinator.handleListGroups does: ask again until every shard is loaded.
    deadline = time.monotonic() + 30
    while True:
        with WireClient(address) as c:
            answer = c.call(ListGroupsRequest(states_filter=[], types_filter=[]), 4)
        if answer.error_code == 0:
            return {g.group_id for g in answer.groups}
        assert answer.error_code == E.COORDINATOR_LOAD_IN_PROGRESS, answer
        assert time.monotonic() < deadline, f"{address} kept loading its coordinator shards"
        time.sleep(0.2)


def test_find_coordinator_and_list_groups_per_broker(shaped: tuple[Cluster, str]) -> None:
    cluster, topic = shaped
    bootstrap = bootstraps(cluster)[0]
    md = metadata(bootstrap, 12, ["__consumer_offsets"])
    leaders = {p.partition_index: p.leader_id for p in md.topics[0].partitions}
    brokers = {b.node_id: b for b in md.brokers}
    groups = [f"ident-g{i}-{uuid.uuid4().hex[:6]}" for i in range(8)]
    named: dict[str, int] = {}
    for group in groups:
        found = coordinator_of(bootstrap, group)
        # The broker leading the group's __consumer_offsets partition, at its endpoint.
        assert found.node_id == leaders[group_shard(group, len(leaders))]
        assert (found.host, found.port) == (
            brokers[found.node_id].host,
            brokers[found.node_id].port,
        )
        commit_simple(f"{found.host}:{found.port}", group, topic)
        named[group] = found.node_id
    mine = set(groups)
    seen: list[str] = []
    for node_id, b in brokers.items():
        here = listed(endpoint(b)) & mine
        assert here == {g for g, n in named.items() if n == node_id}
        seen.extend(here)
    assert sorted(seen) == sorted(groups), "each group listed by exactly one broker"
    for address in bootstraps(cluster):
        assert mine <= listed(address), "the bootstrap listener lists every group"


def test_topics_describe_is_truthful(shaped: tuple[Cluster, str]) -> None:
    cluster, topic = shaped
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "topics",
            "describe",
            "--bootstrap-server",
            cluster.bootstrap_servers,
            "--topic",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    md = metadata(bootstraps(cluster)[0], 12, [topic])
    expected = [
        f"\tTopic: {topic}\tPartition: {p.partition_index}\tLeader: {p.leader_id}"
        f"\tReplicas: {','.join(map(str, p.replica_nodes))}"
        f"\tIsr: {','.join(map(str, p.isr_nodes))}"
        for p in sorted(md.topics[0].partitions, key=lambda p: p.partition_index)
    ]
    lines = out.stdout.splitlines()
    assert f"ReplicationFactor: {len(storage_ids(cluster))}" in lines[0]
    assert lines[1:] == expected


# -- storage nodes going and coming -------------------------------------------------------------


def brokers_of(cluster: Cluster) -> dict[int, str]:
    return {b.node_id: endpoint(b) for b in metadata(bootstraps(cluster)[0], 12, []).brokers}


def test_storage_nodes_down_restarted_and_added(tmp_path: Any) -> None:
    cluster = start(tmp_path / "c", 2, 2)
    try:
        topic = f"ident-{uuid.uuid4().hex[:8]}"
        admin = KafkaAdminClient(bootstrap_servers=bootstraps(cluster))
        admin.create_topics([NewTopic(topic, 4, 2)])
        admin.close()
        wait_until(lambda: all_in_sync(cluster, topic), "replicas in sync", timeout=30)
        before = brokers_of(cluster)
        assert sorted(before) == [100, 101]

        # A storage node down: its replicas offline, leaders moved; it stays a broker at
        # its endpoint (a gateway port, still up: services/gateway/brokers.py says why).
        victim = cluster.service("storage-101")
        victim.process.kill()
        victim.process.wait()
        wait_until(
            lambda: all(
                p.leader_id == 100 and p.offline_replicas == [101]
                for p in metadata(bootstraps(cluster)[1], 12, [topic]).topics[0].partitions
            ),
            "leaders moved off 101, its replicas offline",
            timeout=30,
        )
        for version in (1, 5, 9, 12):
            md = metadata(bootstraps(cluster)[1], version, [topic])
            check_invariants(md, version, down=frozenset({101}))
            assert sorted(b.node_id for b in md.brokers) == [100, 101]
            assert all(p.leader_id == 100 for p in md.topics[0].partitions)
        assert brokers_of(cluster) == before

        # Back again: the same endpoint (each gateway keeps its port for a storage node).
        cluster.restart("storage-101")
        wait_until(
            lambda: brokers_of(cluster) == before, "broker 101 back at its endpoint", timeout=30
        )
        wait_until(lambda: all_in_sync(cluster, topic), "replicas in sync again", timeout=30)

        # Scale-out: a new storage node gets a broker port on every gateway, and
        # cluster.json lists them once add_storage_node returns (the gateways open them
        # after the node registers, and write their ready files again).
        added = cluster.add_storage_node()
        assert added.spec.settings["node.id"] == "102"
        listed = json.loads((cluster.data_dir / "cluster.json").read_text())
        gateway_ports = [s["ports"] for s in listed["services"] if s["kind"] == "gateway"]
        assert len(gateway_ports) == 2 and all("broker-102" in p for p in gateway_ports)
        wait_until(lambda: 102 in brokers_of(cluster), "broker 102 listed", timeout=30)
        after = brokers_of(cluster)
        assert int(after[102].rsplit(":", 1)[1]) in {p["broker-102"] for p in gateway_ports}
        assert {k: v for k, v in after.items() if k != 102} == before
        for address in [after[102], *bootstraps(cluster)]:
            md = metadata(address, 12, [topic])
            assert sorted(b.node_id for b in md.brokers) == [100, 101, 102]
            check_invariants(md, 12)
        assert describe_broker(after[102], "102").error_code == 0
        assert describe_broker(after[102], "100").error_code == E.INVALID_REQUEST
    finally:
        cluster.stop()


# -- fixed broker ports -------------------------------------------------------------------------


def free_range(count: int) -> int:
    """A base port with ``count`` free ports after it, below the ephemeral range."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20_000, 32_000 - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise AssertionError(f"no {count} consecutive free ports")


def test_fixed_broker_ports(tmp_path: Any) -> None:
    base = free_range(8)
    cluster = start(
        tmp_path / "c", 2, 2, **{"broker.port.start": str(base), "broker.port.count": "4"}
    )
    try:
        info = json.loads(cluster.cluster_file.read_text())
        ports = {
            s["name"]: {k: v for k, v in s["ports"].items() if k.startswith("broker-")}
            for s in info["services"]
            if s["kind"] == "gateway"
        }
        # Gateway i serves storage node N on base + i * count + (N - 100), all opened at start.
        assert ports == {
            "gateway-0": {f"broker-{100 + i}": base + i for i in range(4)},
            "gateway-1": {f"broker-{100 + i}": base + 4 + i for i in range(4)},
        }
        assert brokers_of(cluster) == {100: f"127.0.0.1:{base}", 101: f"127.0.0.1:{base + 5}"}
        # A port for a storage node that does not exist yet already answers.
        md = metadata(f"127.0.0.1:{base + 2}", 12, [])
        assert sorted(b.node_id for b in md.brokers) == [100, 101]
    finally:
        cluster.stop()
