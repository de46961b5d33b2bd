"""Which brokers clients see and where (odradek.gateway.brokers): pure rules, no cluster."""

from __future__ import annotations

from odradek.gateway.brokers import (
    Broker,
    advertise,
    broker_of_partition,
    controller_id,
)
from odradek.metadata_cache import Snapshot
from odradek.rpc.v1 import common_pb2

ONLINE, OFFLINE, SHUTTING_DOWN = common_pb2.ONLINE, common_pb2.OFFLINE, common_pb2.SHUTTING_DOWN


def storage(
    node_id: int, host: str = "127.0.0.1", state: common_pb2.NodeState = ONLINE, rack: str = ""
) -> common_pb2.Node:
    return common_pb2.Node(
        node_id=node_id, kind=common_pb2.STORAGE, host=host, state=state, rack=rack
    )


def gateway(node_id: int, host: str, ports: dict[int, int], **kw: str) -> common_pb2.Node:
    return common_pb2.Node(
        node_id=node_id,
        kind=common_pb2.GATEWAY,
        host=host,
        kafka_port=9092 + node_id,
        state=ONLINE,
        broker_ports=ports,
        **kw,
    )


def metadata(*nodes: common_pb2.Node) -> common_pb2.ClusterMetadata:
    return common_pb2.ClusterMetadata(version=1, nodes=list(nodes))


def endpoints(brokers: dict[int, Broker]) -> dict[int, tuple[str, int, int]]:
    return {i: (b.host, b.port, b.gateway_id) for i, b in brokers.items()}


def test_one_gateway_fronts_every_storage_node_at_its_own_port() -> None:
    gw = gateway(0, "127.0.0.1", {100: 9200, 101: 9201, 102: 9202})
    brokers = advertise(metadata(storage(100), storage(101), storage(102), gw), [gw])
    assert endpoints(brokers) == {
        100: ("127.0.0.1", 9200, 0),
        101: ("127.0.0.1", 9201, 0),
        102: ("127.0.0.1", 9202, 0),
    }
    assert controller_id(brokers) == 100


def test_several_gateways_spread_the_brokers_in_id_order() -> None:
    ports = {100: 1, 101: 2, 102: 3}
    gws = [
        gateway(0, "127.0.0.1", ports),
        gateway(1, "127.0.0.1", {k: v + 10 for k, v in ports.items()}),
    ]
    brokers = advertise(metadata(storage(100), storage(101), storage(102), *gws), gws)
    assert endpoints(brokers) == {
        100: ("127.0.0.1", 1, 0),
        101: ("127.0.0.1", 12, 1),
        102: ("127.0.0.1", 3, 0),
    }


def test_a_gateway_on_the_storage_nodes_host_fronts_it() -> None:
    ports = {100: 1, 101: 2, 102: 3}
    gws = [
        gateway(0, "10.0.0.1", ports, advertised_host="a.example"),
        gateway(1, "10.0.0.2", ports, advertised_host="b.example"),
    ]
    nodes = [storage(100, "10.0.0.2"), storage(101, "10.0.0.2"), storage(102, "10.0.0.9")]
    brokers = advertise(metadata(*nodes, *gws), gws)
    assert endpoints(brokers) == {
        100: ("b.example", 1, 1),
        101: ("b.example", 2, 1),
        102: ("a.example", 3, 0),  # no gateway on its host: spread (index 2 of 3)
    }


def test_a_wildcard_listener_says_nothing_about_the_host() -> None:
    gws = [gateway(0, "0.0.0.0", {100: 1, 101: 2}), gateway(1, "0.0.0.0", {100: 3, 101: 4})]
    nodes = [storage(100, "0.0.0.0"), storage(101, "0.0.0.0")]
    assert endpoints(advertise(metadata(*nodes, *gws), gws)) == {
        100: ("0.0.0.0", 1, 0),
        101: ("0.0.0.0", 4, 1),
    }


def test_only_gateways_with_a_port_for_the_broker_front_it() -> None:
    gws = [gateway(0, "127.0.0.1", {100: 1}), gateway(1, "127.0.0.1", {100: 2, 101: 3})]
    brokers = advertise(metadata(storage(100), storage(101), *gws), gws)
    assert endpoints(brokers) == {100: ("127.0.0.1", 1, 0), 101: ("127.0.0.1", 3, 1)}


def test_a_storage_node_no_gateway_has_a_port_for_yet_is_at_a_bootstrap_listener() -> None:
    gw = gateway(0, "127.0.0.1", {100: 1})
    brokers = advertise(metadata(storage(100), storage(101), gw), [gw])
    assert endpoints(brokers) == {100: ("127.0.0.1", 1, 0), 101: ("127.0.0.1", 9092, 0)}


def test_offline_and_shutting_down_storage_nodes_stay_brokers_at_their_ports() -> None:
    # A broker leaving Metadata makes librdkafka decommission its handle (see brokers.py).
    gw = gateway(0, "127.0.0.1", {100: 1, 101: 2, 102: 3})
    md = metadata(storage(100, state=OFFLINE), storage(101, state=SHUTTING_DOWN), storage(102), gw)
    brokers = advertise(md, [gw])
    assert endpoints(brokers) == {
        100: ("127.0.0.1", 1, 0),
        101: ("127.0.0.1", 2, 0),
        102: ("127.0.0.1", 3, 0),
    }
    assert controller_id(brokers) == 100


def test_with_every_storage_node_down_the_registered_ones_stay_listed() -> None:
    gw = gateway(0, "127.0.0.1", {100: 1, 101: 2})
    md = metadata(storage(100, state=OFFLINE), storage(101, state=OFFLINE), gw)
    assert endpoints(advertise(md, [gw])) == {
        100: ("127.0.0.1", 1, 0),
        101: ("127.0.0.1", 2, 0),
    }


def test_no_broker_without_storage_nodes_or_gateways() -> None:
    gw = gateway(0, "127.0.0.1", {})
    assert advertise(metadata(gw), [gw]) == {}
    assert advertise(metadata(storage(100)), []) == {}
    assert controller_id({}) == -1


def test_rack_is_the_storage_nodes_else_the_gateways() -> None:
    gw = gateway(0, "127.0.0.1", {100: 1, 101: 2}, rack="gw-rack")
    brokers = advertise(metadata(storage(100, rack="r1"), storage(101), gw), [gw])
    assert (brokers[100].rack, brokers[101].rack) == ("r1", "gw-rack")


def test_the_broker_of_an_internal_partition_is_its_leader() -> None:
    gw = gateway(0, "127.0.0.1", {100: 1, 101: 2})
    md = metadata(storage(100), storage(101, state=OFFLINE), gw)
    md.topics.append(
        common_pb2.Topic(
            name="__consumer_offsets",
            partitions=[
                common_pb2.Partition(partition=0, replicas=[100], isr=[100], leader=100),
                common_pb2.Partition(partition=1, replicas=[101], isr=[101], leader=-1),
                common_pb2.Partition(partition=2, replicas=[101], isr=[101], leader=101),
            ],
        )
    )
    snap = Snapshot.build(md)
    brokers = advertise(md, [gw])
    found = broker_of_partition(snap, brokers, "__consumer_offsets", 0)
    assert found is not None and found.node_id == 100 and found.port == 1
    assert broker_of_partition(snap, brokers, "__consumer_offsets", 1) is None  # no leader
    assert broker_of_partition(snap, brokers, "__consumer_offsets", 2) is None  # not live
    assert broker_of_partition(snap, brokers, "__consumer_offsets", 9) is None
    assert broker_of_partition(snap, brokers, "__transaction_state", 0) is None
