"""Several listeners on a gateway (odradek.gateway.listeners): Kafka's syntax, its
per-listener prefixes and its configuration errors, word for word."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.certs import ensure_ca, issue
from odradek.config import Config, ConfigError
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.gateway.brokers import advertise
from odradek.gateway.listeners import parse_listeners
from odradek.rpc.v1 import common_pb2


def config(**settings: str) -> Config:
    return Config(GATEWAY_CONFIGS.defaults(), overrides=settings)


def listeners_of(**settings: str) -> list[tuple[str, str, int, str]]:
    return [
        (lst.name, lst.host, lst.port, lst.security.protocol)
        for lst in parse_listeners(config(**settings))
    ]


def test_plaintext_and_sasl_ssl_side_by_side(tmp_path: Path) -> None:
    ensure_ca(tmp_path)
    pem = issue(tmp_path, "gateway", hosts=("127.0.0.1",)).pem
    parsed = parse_listeners(
        config(
            listeners="PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
            **{"ssl.keystore.location": str(pem)},
        )
    )
    assert [(x.name, x.port, x.security.protocol) for x in parsed] == [
        ("PLAINTEXT", 9092, "PLAINTEXT"),
        ("SASL_SSL", 9093, "SASL_SSL"),
    ]
    plain, secure = parsed
    assert plain.security.ssl_context is None and not plain.security.sasl
    assert secure.security.ssl_context is not None and secure.security.sasl
    assert secure.security.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


def test_custom_names_through_the_protocol_map_and_per_listener_settings(
    tmp_path: Path,
) -> None:
    ensure_ca(tmp_path)
    pem = issue(tmp_path, "gateway", hosts=("127.0.0.1",)).pem
    parsed = parse_listeners(
        config(
            listeners="INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            **{
                "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
                "listener.name.external.ssl.keystore.location": str(pem),
                "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.external.connections.max.reauth.ms": "60000",
                "advertised.listeners": "INTERNAL://10.0.0.1:9092,EXTERNAL://kafka.example:9093",
            },
        )
    )
    internal, external = parsed
    assert (internal.name, internal.security.protocol) == ("INTERNAL", "PLAINTEXT")
    assert (internal.advertised_host, internal.advertised_port) == ("10.0.0.1", 9092)
    assert (external.name, external.security.protocol) == ("EXTERNAL", "SASL_SSL")
    assert (external.advertised_host, external.advertised_port) == ("kafka.example", 9093)
    assert external.security.mechanisms == ("SCRAM-SHA-512",)
    assert external.security.reauth_ms == 60000 and internal.security.reauth_ms == 0
    assert external.security.ssl_context is not None and internal.security.ssl_context is None


def test_a_listener_left_out_of_advertised_listeners_advertises_its_own_address() -> None:
    assert [
        (x.name, x.advertised_host, x.advertised_port)
        for x in parse_listeners(
            config(
                listeners="PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.2:9093",
                **{"advertised.listeners": "PLAINTEXT://a.example:19092"},
            )
        )
    ] == [("PLAINTEXT", "a.example", 19092), ("SASL_PLAINTEXT", "127.0.0.2", 0)]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"},
            "Each listener must have a different port, listeners: "
            "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092",
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"},
            "Each listener must have a different name, listeners: "
            "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093",
        ),
        (
            {"listeners": "TRACE://127.0.0.1:9091,PLAINTEXT://127.0.0.1:9092"},
            "Error creating broker listeners from "
            "'TRACE://127.0.0.1:9091,PLAINTEXT://127.0.0.1:9092': "
            "No security protocol defined for listener TRACE",
        ),
        (
            # A map that is set replaces Kafka's default: PLAINTEXT is no longer known.
            {
                "listeners": "INTERNAL://127.0.0.1:9091,PLAINTEXT://127.0.0.1:9092",
                "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
            },
            "No security protocol defined for listener PLAINTEXT",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
                "advertised.listeners": "PLAINTEXT://a:9092,SSL://a:9093",
            },
            "advertised.listeners listener names must be equal to or a subset of the ones "
            "defined in listeners. Found PLAINTEXT,SSL. The valid options based on the "
            "current configuration are PLAINTEXT,SASL_PLAINTEXT",
        ),
        (
            {
                "listeners": "PLAINTEXT://0.0.0.0:9092",
                "advertised.listeners": "PLAINTEXT://0.0.0.0:9092",
            },
            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0",
        ),
    ],
)
def test_kafkas_configuration_errors(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_listeners(config(**settings))
    assert message in str(caught.value)


def test_ephemeral_ports_may_repeat() -> None:
    # Kafka's check leaves port 0 out (tests bind every listener to an ephemeral port).
    assert listeners_of(listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0") == [
        ("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT"),
        ("SASL_PLAINTEXT", "127.0.0.1", 0, "SASL_PLAINTEXT"),
    ]


def test_fixed_broker_ports_per_listener() -> None:
    settings = config(
        listeners="PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        **{"broker.port.start": "9200"},
    )
    assert [x.broker_port_start for x in parse_listeners(settings, 9200, 16)] == [9200, 9216]
    own = config(
        listeners="PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        **{"listener.name.sasl_plaintext.broker.port.start": "9300"},
    )
    assert [x.broker_port_start for x in parse_listeners(own, 9200, 16)] == [9200, 9300]
    clash = config(
        listeners="PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        **{"listener.name.sasl_plaintext.broker.port.start": "9210"},
    )
    with pytest.raises(ConfigError, match="broker ports of listeners PLAINTEXT and SASL_PLAINTEXT"):
        parse_listeners(clash, 9200, 16)


# -- which endpoints Metadata answers on each listener (odradek.gateway.brokers) -------------


def two_listener_gateway(
    node_id: int, plain: dict[int, int], secure: dict[int, int]
) -> common_pb2.Node:
    return common_pb2.Node(
        node_id=node_id,
        kind=common_pb2.GATEWAY,
        host="127.0.0.1",
        advertised_host="127.0.0.1",
        kafka_port=9092,
        broker_ports=plain,
        state=common_pb2.ONLINE,
        listeners=[
            common_pb2.ListenerEndpoint(
                name="PLAINTEXT", host="127.0.0.1", port=9092, broker_ports=plain
            ),
            common_pb2.ListenerEndpoint(
                name="SASL_SSL", host="kafka.example", port=9093, broker_ports=secure
            ),
        ],
    )


def storage(node_id: int, host: str = "127.0.0.1") -> common_pb2.Node:
    return common_pb2.Node(
        node_id=node_id, kind=common_pb2.STORAGE, host=host, state=common_pb2.ONLINE
    )


def test_each_listener_advertises_its_own_broker_ports() -> None:
    gw = two_listener_gateway(0, {100: 9200, 101: 9201}, {100: 9300, 101: 9301})
    meta = common_pb2.ClusterMetadata(version=1, nodes=[storage(100), storage(101), gw])
    plain = {i: (b.host, b.port) for i, b in advertise(meta, [gw], "PLAINTEXT").items()}
    secure = {i: (b.host, b.port) for i, b in advertise(meta, [gw], "SASL_SSL").items()}
    assert plain == {100: ("127.0.0.1", 9200), 101: ("127.0.0.1", 9201)}
    assert secure == {100: ("kafka.example", 9300), 101: ("kafka.example", 9301)}


def test_gateways_without_the_listener_front_no_broker_on_it() -> None:
    both = two_listener_gateway(0, {100: 9200, 101: 9201}, {100: 9300, 101: 9301})
    plain_only = common_pb2.Node(
        node_id=1,
        kind=common_pb2.GATEWAY,
        host="127.0.0.2",
        kafka_port=9092,
        broker_ports={100: 9400, 101: 9401},
        state=common_pb2.ONLINE,
        listeners=[
            common_pb2.ListenerEndpoint(
                name="PLAINTEXT", host="127.0.0.2", port=9092, broker_ports={100: 9400, 101: 9401}
            )
        ],
    )
    # Storage nodes on a third host: no co-location, the brokers are spread.
    meta = common_pb2.ClusterMetadata(
        version=1, nodes=[storage(100, "10.0.0.9"), storage(101, "10.0.0.9"), both, plain_only]
    )
    secure = advertise(meta, [both, plain_only], "SASL_SSL")
    assert {b.gateway_id for b in secure.values()} == {0}
    plain = advertise(meta, [both, plain_only], "PLAINTEXT")
    assert {b.gateway_id for b in plain.values()} == {0, 1}
    assert advertise(meta, [plain_only], "SASL_SSL") == {}
