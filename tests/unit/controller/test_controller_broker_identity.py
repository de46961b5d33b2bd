"""The controller's side of broker identity: per-broker dynamic configs and gateways'
broker ports (docs/brokers.md)."""

from __future__ import annotations

import random

import pytest

from odradek.controller.cluster_state import ListenerEndpoint, NodeInfo, NodeKind, NodeState
from odradek.controller.errors import ControllerError
from odradek.controller.model import ClusterModel, ConfigChange, ConfigOp, ResourceType, TopicSpec
from odradek.controller.snapshot import build_metadata
from odradek.protocol.errors import ErrorCode


def make_model(storage: int = 3) -> ClusterModel:
    model = ClusterModel(rng=random.Random(3))
    model.bootstrap()
    for i in range(storage):
        model.register_node(NodeInfo(100 + i, NodeKind.STORAGE, "127.0.0.1", grpc_port=5000 + i))
    model.register_node(NodeInfo(0, NodeKind.GATEWAY, "127.0.0.1", kafka_port=9092))
    model.take_changes()
    return model


def alter(model: ClusterModel, name: str, *changes: ConfigChange, **kwargs: bool) -> None:
    model.alter_configs(
        ResourceType.BROKER,
        name,
        list(changes),
        incremental=kwargs.pop("incremental", True),
        **kwargs,
    )


def refused(model: ClusterModel, name: str, *changes: ConfigChange) -> ControllerError:
    with pytest.raises(ControllerError) as info:
        alter(model, name, *changes)
    return info.value


def reloaded(model: ClusterModel) -> ClusterModel:
    """A fresh model loaded from every record the first one would persist."""
    keys = ["cluster", "producer_ids", "shards", "cluster_configs"]
    keys += [f"nodes/{n}" for n in model.nodes] + [f"topics/{t}" for t in model.topics]
    keys += [f"broker_configs/{n}" for n in model.broker_configs]
    out = ClusterModel()
    out.load({k: v for k in keys if (v := model.record(k)) is not None})
    return out


def test_per_broker_config_overrides_the_cluster_default_for_that_broker_only() -> None:
    model = make_model()
    alter(model, "", ConfigChange("log.retention.ms", ConfigOp.SET, "60000"))
    alter(model, "101", ConfigChange("log.retention.ms", ConfigOp.SET, "5000"))
    assert model.broker_config(101, "log.retention.ms") == "5000"
    assert model.broker_config(100, "log.retention.ms") == "60000"
    changes = model.take_changes()
    assert changes["broker_configs/101"] == {"log.retention.ms": "5000"}

    md = build_metadata(model, 3000, 1)
    assert dict(md.broker_configs[101].configs) == {"log.retention.ms": "5000"}
    assert 100 not in md.broker_configs
    assert dict(md.dynamic_cluster_configs) == {"log.retention.ms": "60000"}
    assert md.cluster_configs["log.retention.ms"] == "60000"

    again = reloaded(model)
    assert again.broker_configs == {101: {"log.retention.ms": "5000"}}

    alter(model, "101", ConfigChange("log.retention.ms", ConfigOp.DELETE))
    assert model.broker_configs == {}
    assert model.take_changes()["broker_configs/101"] is None
    assert 101 not in build_metadata(model, 3000, 1).broker_configs


def test_legacy_alter_configs_replaces_every_override_of_the_broker() -> None:
    model = make_model()
    alter(model, "100", ConfigChange("log.retention.ms", value="5000"))
    alter(
        model,
        "100",
        ConfigChange("leader.replication.throttled.rate", value="1048576"),
        incremental=False,
    )
    assert model.broker_configs[100] == {"leader.replication.throttled.rate": "1048576"}


def test_append_starts_from_the_brokers_effective_value() -> None:
    model = make_model()
    alter(model, "", ConfigChange("log.cleanup.policy", ConfigOp.SET, "delete"))
    alter(model, "102", ConfigChange("log.cleanup.policy", ConfigOp.APPEND, "compact"))
    assert model.broker_configs[102] == {"log.cleanup.policy": "delete,compact"}


def test_validate_only_changes_nothing() -> None:
    model = make_model()
    alter(model, "100", ConfigChange("log.retention.ms", value="5000"), validate_only=True)
    assert model.broker_configs == {} and not model.has_changes


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("7", ErrorCode.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
        # A gateway is no broker: its id is not one a client sees.
        ("0", ErrorCode.BROKER_ID_NOT_REGISTERED, "No node with id 0 found."),
        ("x", ErrorCode.INVALID_REQUEST, "Invalid broker name x"),
    ],
)
def test_broker_names_that_name_no_storage_node(name: str, code: ErrorCode, message: str) -> None:
    error = refused(make_model(), name, ConfigChange("log.retention.ms", value="1"))
    assert (error.code, error.message) == (code, message)


def test_per_broker_values_are_validated_like_cluster_defaults() -> None:
    model = make_model()
    error = refused(model, "100", ConfigChange("num.partitions", value="3"))
    assert error.code is ErrorCode.INVALID_CONFIG and "dynamically" in error.message
    error = refused(model, "100", ConfigChange("log.retention.ms", value="soon"))
    assert error.code is ErrorCode.INVALID_CONFIG
    error = refused(model, "100", ConfigChange("no.such.config", value="1"))
    assert error.code is ErrorCode.INVALID_CONFIG
    assert model.broker_configs == {}


def test_offline_storage_node_keeps_its_configs_settable() -> None:
    model = make_model()
    model.node_offline(102)
    alter(model, "102", ConfigChange("log.retention.ms", value="1000"))
    assert model.broker_configs[102] == {"log.retention.ms": "1000"}


def test_gateway_announces_broker_ports_in_place() -> None:
    model = make_model()
    gateway = model.nodes[0]
    session = gateway.incarnation
    update = NodeInfo(
        0, NodeKind.GATEWAY, "127.0.0.1", kafka_port=9092, broker_ports={100: 9193, 101: 9194}
    )
    same = model.register_node(update, session=session)
    assert same.incarnation == session and same.state is NodeState.ONLINE
    assert model.nodes[0].broker_ports == {100: 9193, 101: 9194}
    assert "nodes/0" in model.take_changes()
    md = build_metadata(model, 3000, 1)
    (node,) = [n for n in md.nodes if n.node_id == 0]
    assert dict(node.broker_ports) == {100: 9193, 101: 9194}
    assert reloaded(model).nodes[0].broker_ports == {100: 9193, 101: 9194}
    # Announcing the same endpoints again writes nothing.
    model.register_node(update, session=session)
    assert not model.has_changes


def test_gateway_announces_every_listeners_endpoints() -> None:
    # Several listeners (docs/security.md): each with its own advertised broker ports,
    # published in the metadata and kept across a controller restart.
    model = make_model()
    session = model.nodes[0].incarnation
    endpoints = [
        ListenerEndpoint("PLAINTEXT", "127.0.0.1", 9092, {100: 9193}),
        ListenerEndpoint("SASL_SSL", "kafka.example", 9093, {100: 9293}),
    ]
    update = NodeInfo(
        0,
        NodeKind.GATEWAY,
        "127.0.0.1",
        kafka_port=9092,
        broker_ports={100: 9193},
        listeners=endpoints,
    )
    model.register_node(update, session=session)
    assert "nodes/0" in model.take_changes()
    (node,) = [n for n in build_metadata(model, 3000, 1).nodes if n.node_id == 0]
    assert [(x.name, x.host, x.port, dict(x.broker_ports)) for x in node.listeners] == [
        ("PLAINTEXT", "127.0.0.1", 9092, {100: 9193}),
        ("SASL_SSL", "kafka.example", 9093, {100: 9293}),
    ]
    assert reloaded(model).nodes[0].listeners == endpoints
    model.register_node(update, session=session)
    assert not model.has_changes


def test_in_place_update_keeps_a_storage_nodes_leaderships() -> None:
    model = make_model()
    model.create_topic(TopicSpec("t", 1, 3))
    leader = model.topics["t"].partitions[0].leader
    epoch = model.topics["t"].partitions[0].leader_epoch
    info = model.nodes[leader]
    model.register_node(
        NodeInfo(leader, NodeKind.STORAGE, "127.0.0.1", grpc_port=6000), session=info.incarnation
    )
    p = model.topics["t"].partitions[0]
    assert (p.leader, p.leader_epoch) == (leader, epoch)
    assert model.nodes[leader].grpc_port == 6000


def test_a_stale_session_registers_afresh() -> None:
    model = make_model()
    old = model.nodes[0].incarnation
    again = model.register_node(
        NodeInfo(0, NodeKind.GATEWAY, "127.0.0.1", broker_ports={100: 1}), session=old + 100
    )
    assert again.incarnation > old and again.broker_ports == {100: 1}


def test_listener_tls_settings_are_per_broker_only() -> None:
    """KIP-226: ``listener.name.<l>.ssl.keystore.location`` and the other reconfigurable
    TLS settings are kept per broker (the gateways reload them), refused on the cluster
    default and without the listener prefix with Kafka's messages."""
    model = make_model()
    name = "listener.name.sasl_ssl.ssl.keystore.location"
    alter(model, "100", ConfigChange(name, ConfigOp.SET, "/certs/new.pem"))
    assert model.broker_configs[100] == {name: "/certs/new.pem"}
    md = build_metadata(model, 3000, 1)
    assert dict(md.broker_configs[100].configs) == {name: "/certs/new.pem"}
    error = refused(model, "", ConfigChange(name, ConfigOp.SET, "/certs/new.pem"))
    assert (error.code, error.message) == (
        ErrorCode.INVALID_CONFIG,
        "Cannot update these configs at default cluster level, broker id must be "
        f"specified: Set({name})",
    )
    error = refused(model, "100", ConfigChange("ssl.keystore.location", ConfigOp.SET, "/x"))
    assert (error.code, error.message) == (
        ErrorCode.INVALID_CONFIG,
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)",
    )
    error = refused(model, "100", ConfigChange("listener.name.x.ssl.client.auth", value="none"))
    assert error.code is ErrorCode.INVALID_CONFIG
    alter(model, "100", ConfigChange(name, ConfigOp.DELETE))
    assert model.broker_configs == {}
