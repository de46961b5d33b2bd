"""The admin API handlers through the gateway's real dispatch, without a cluster.

A real (unstarted) :class:`Gateway` is fed a metadata snapshot; requests are encoded
with the Kafka codec at each version, dispatched, and the response frames decoded
again. Covered here: everything the gateway answers on its own (DescribeConfigs,
DescribeCluster, request validation and refusals that never reach the controller
or a storage node). What needs the controller or storage nodes is covered by
tests/integration/test_gateway_admin.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from gateway_testkit import call, offline_gateway

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.gateway.gateway import Gateway
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    OffsetForLeaderEpochRequest,
)
from odradek.rpc.v1 import common_pb2
from odradek.topic_config import ConfigSource

TOPIC_ID = uuid.UUID("0b6f3b7e-5a43-4a39-9c4c-8f3c1c5b2d11")


def _metadata() -> common_pb2.ClusterMetadata:
    online, offline = common_pb2.ONLINE, common_pb2.OFFLINE
    return common_pb2.ClusterMetadata(
        version=7,
        cluster_id="Zq3sS1o8RkGx7YH0c2bVYA",
        nodes=[
            common_pb2.Node(
                node_id=0, kind=common_pb2.GATEWAY, host="127.0.0.1", kafka_port=9092, state=online
            ),
            common_pb2.Node(
                node_id=1,
                kind=common_pb2.GATEWAY,
                host="10.0.0.1",
                advertised_host="gw1.example",
                kafka_port=9093,
                rack="r1",
                state=online,
                broker_ports={100: 9193, 101: 9194, 102: 9195},
            ),
            common_pb2.Node(
                node_id=2, kind=common_pb2.GATEWAY, host="10.0.0.2", kafka_port=9094, state=offline
            ),
            common_pb2.Node(node_id=100, kind=common_pb2.STORAGE, host="127.0.0.1", state=online),
            common_pb2.Node(
                node_id=101, kind=common_pb2.STORAGE, host="10.0.0.1", rack="r2", state=online
            ),
            common_pb2.Node(node_id=102, kind=common_pb2.STORAGE, host="10.0.0.3", state=offline),
        ],
        topics=[
            common_pb2.Topic(
                name="orders",
                topic_id=TOPIC_ID.bytes,
                configs={"retention.ms": "1000"},
                partitions=[
                    common_pb2.Partition(partition=0, replicas=[100], isr=[100], leader=100),
                    common_pb2.Partition(partition=1, replicas=[100], isr=[], leader=-1),
                ],
            )
        ],
        cluster_configs={
            **BROKER_CONFIGS.defaults(),
            "log.segment.bytes": "2048",
            "log.retention.ms": "60000",
        },
        dynamic_cluster_configs={"log.retention.ms": "60000"},
        broker_configs={101: common_pb2.BrokerConfigs(configs={"log.retention.ms": "5000"})},
    )


@pytest.fixture
async def gw() -> AsyncIterator[Gateway]:
    async with offline_gateway(_metadata()) as gateway:
        yield gateway


def _describe(resources: list[tuple[int, str, list[str] | None]], **flags: bool) -> Any:
    return DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=t, resource_name=n, configuration_keys=k
            )
            for t, n, k in resources
        ],
        **flags,
    )


@pytest.mark.parametrize("version", range(5))
async def test_describe_topic_configs_every_version(gw: Gateway, version: int) -> None:
    request = _describe([(2, "orders", None)], include_synonyms=True, include_documentation=True)
    response = await call(gw, ApiKey.DESCRIBE_CONFIGS, version, request)
    (result,) = response.results
    assert (result.error_code, result.resource_name) == (0, "orders")
    configs = {c.name: c for c in result.configs}
    assert len(configs) == 28
    retention, segment, policy = (
        configs["retention.ms"],
        configs["segment.bytes"],
        configs["cleanup.policy"],
    )
    assert (retention.value, segment.value, policy.value) == ("1000", "2048", "delete")
    if version == 0:
        assert (retention.is_default, segment.is_default, policy.is_default) == (
            False,
            False,
            True,
        )
        return
    assert retention.config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert segment.config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert policy.config_source == ConfigSource.DEFAULT_CONFIG
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", 1),
        ("log.retention.ms", "60000", 3),
        ("log.retention.hours", "168", 5),
    ]
    if version >= 3:
        assert retention.config_type == 5  # LONG
        assert retention.documentation


async def test_describe_configs_filters_and_omits_synonyms_unless_asked(gw: Gateway) -> None:
    request = _describe([(2, "orders", ["retention.ms", "segment.bytes"])])
    response = await call(gw, ApiKey.DESCRIBE_CONFIGS, 4, request)
    configs = response.results[0].configs
    assert [c.name for c in configs] == ["retention.ms", "segment.bytes"]
    assert all(c.synonyms == [] and c.documentation is None for c in configs)


async def test_describe_configs_errors_per_resource(gw: Gateway) -> None:
    request = _describe(
        [
            (2, "missing", None),
            (4, "7", None),
            (4, "0", None),
            (4, "abc", None),
            (8, "0", None),
            (2, "orders", ["min.insync.replicas"]),
        ]
    )
    # The bootstrap listener answers for any storage node; a gateway id is no broker.
    response = await call(gw, ApiKey.DESCRIBE_CONFIGS, 4, request)
    got = [(r.error_code, r.error_message, len(r.configs)) for r in response.results]
    assert got == [
        (3, "This server does not host this topic-partition.", 0),
        (102, "No node with id 7 found.", 0),
        (102, "No node with id 0 found.", 0),
        (42, "Broker id must be an integer, but it is: abc", 0),
        (42, "Unsupported resource type: BROKER_LOGGER", 0),
        (0, None, 1),
    ]
    # A broker's port answers for that broker only, as a Kafka broker does.
    request = _describe([(4, "101", None), (4, "100", ["num.partitions"]), (4, "", None)])
    response = await call(gw, ApiKey.DESCRIBE_CONFIGS, 4, request, broker=100)
    got = [(r.error_code, r.error_message, len(r.configs)) for r in response.results]
    assert got == [
        (42, "Unexpected broker id, expected 100 or empty string, but received 101", 0),
        (0, None, 1),
        (0, None, 1),
    ]


async def test_describe_broker_configs(gw: Gateway) -> None:
    request = _describe(
        [(4, "100", None), (4, "101", ["log.retention.ms", "num.partitions"]), (4, "", None)],
        include_synonyms=True,
    )
    response = await call(gw, ApiKey.DESCRIBE_CONFIGS, 1, request)
    first, second, cluster_default = response.results
    configs = {c.name: c for c in first.configs}
    assert configs["log.segment.bytes"].value == "2048"
    assert configs["log.segment.bytes"].config_source == ConfigSource.STATIC_BROKER_CONFIG
    assert configs["log.segment.bytes"].read_only is False
    assert configs["num.partitions"].config_source == ConfigSource.DEFAULT_CONFIG
    assert configs["num.partitions"].read_only is True
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.config_source) == (
        "60000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # Broker 101 has a dynamic config of its own, above the cluster default.
    own = {c.name: c for c in second.configs}
    assert sorted(own) == ["log.retention.ms", "num.partitions"]
    retention = own["log.retention.ms"]
    assert (retention.value, retention.config_source) == (
        "5000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
    # The cluster default resource lists only what was set dynamically there.
    assert [(c.name, c.value, c.config_source) for c in cluster_default.configs] == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]


@pytest.mark.parametrize("version", [0, 1])
async def test_describe_cluster(gw: Gateway, version: int) -> None:
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    response = await call(gw, ApiKey.DESCRIBE_CLUSTER, version, request)
    assert response.error_code == 0
    assert response.cluster_id == "Zq3sS1o8RkGx7YH0c2bVYA"
    # The brokers are the storage nodes at gateway 1's broker ports (this unstarted
    # gateway has none yet); the offline storage node 102 stays listed (brokers.py).
    assert response.controller_id == 100
    brokers = [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers]
    assert brokers == [
        (100, "gw1.example", 9193, "r1"),
        (101, "gw1.example", 9194, "r2"),
        (102, "gw1.example", 9195, "r1"),
    ]
    assert response.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    plain = await call(gw, ApiKey.DESCRIBE_CLUSTER, version, DescribeClusterRequest())
    assert plain.authorized_operations is None  # "not requested" (INT32_MIN on the wire)


async def test_describe_cluster_endpoint_types(gw: Gateway) -> None:
    controllers = await call(
        gw, ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=2)
    )
    assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    assert controllers.error_message == (
        "The request was sent to an endpoint of type BROKER, "
        "but we wanted an endpoint of type CONTROLLER"
    )
    unknown = await call(gw, ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=9))
    assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


@pytest.mark.parametrize("version", [0, 3, 5])
async def test_transactional_init_producer_id_without_a_coordinator(
    gw: Gateway, version: int
) -> None:
    """No transaction coordinator owns the id's shard: NOT_COORDINATOR, which clients
    retry after looking the coordinator up again; bad ids are INVALID_REQUEST."""
    request = InitProducerIdRequest(transactional_id="tx-1", transaction_timeout_ms=60000)
    response = await call(gw, ApiKey.INIT_PRODUCER_ID, version, request)
    assert response.error_code == ErrorCode.NOT_COORDINATOR
    assert (response.producer_id, response.producer_epoch) == (-1, -1)
    empty = InitProducerIdRequest(transactional_id="", transaction_timeout_ms=60000)
    response = await call(gw, ApiKey.INIT_PRODUCER_ID, version, empty)
    assert response.error_code == ErrorCode.INVALID_REQUEST
    if version >= 3:  # KIP-360: a producer id without its epoch
        half = InitProducerIdRequest(
            transactional_id="tx-1", transaction_timeout_ms=60000, producer_id=5, producer_epoch=-1
        )
        response = await call(gw, ApiKey.INIT_PRODUCER_ID, version, half)
        assert response.error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_offset_for_leader_epoch_errors_without_a_leader(gw: Gateway, version: int) -> None:
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    P = T.OffsetForLeaderPartition
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            T(topic="orders", partitions=[P(partition=1, current_leader_epoch=-1, leader_epoch=0)]),
            T(topic="nope", partitions=[P(partition=0, current_leader_epoch=-1, leader_epoch=0)]),
        ],
    )
    response = await call(gw, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, request)
    got = [
        (t.topic, p.partition, p.error_code, p.end_offset)
        for t in response.topics
        for p in t.partitions
    ]
    assert got == [("orders", 1, 5, -1), ("nope", 0, 3, -1)]
    if version >= 1:
        assert all(p.leader_epoch == -1 for t in response.topics for p in t.partitions)


async def test_delete_records_refusals(gw: Gateway) -> None:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    P = T.DeleteRecordsPartition
    request = DeleteRecordsRequest(
        topics=[
            T(
                name="orders",
                partitions=[P(partition_index=0, offset=-2), P(partition_index=1, offset=5)],
            ),
            T(name="nope", partitions=[P(partition_index=0, offset=5)]),
        ],
        timeout_ms=1000,
    )
    response = await call(gw, ApiKey.DELETE_RECORDS, 2, request)
    got = [
        (t.name, p.partition_index, p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    ]
    assert got == [("orders", 0, 1, -1), ("orders", 1, 5, -1), ("nope", 0, 3, -1)]


@pytest.mark.parametrize("version", [0, 1, 5, 7])
async def test_create_topics_refusals_before_the_controller(gw: Gateway, version: int) -> None:
    C = CreateTopicsRequest.CreatableTopic
    Cfg = C.CreatableTopicConfig
    request = CreateTopicsRequest(
        topics=[
            C(name="twice", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
            C(name="twice", num_partitions=2, replication_factor=1, assignments=[], configs=[]),
            C(
                name="nullcfg",
                num_partitions=1,
                replication_factor=1,
                assignments=[],
                configs=[Cfg(name="retention.ms", value=None)],
            ),
        ],
        timeout_ms=1000,
        validate_only=False,
    )
    response = await call(gw, ApiKey.CREATE_TOPICS, version, request)
    got = [(t.name, t.error_code) for t in response.topics]
    assert got == [("twice", ErrorCode.INVALID_REQUEST), ("nullcfg", ErrorCode.INVALID_CONFIG)]
    if version >= 1:
        assert [t.error_message for t in response.topics] == [
            "Duplicate topic name.",
            "Null value not supported for topic configs: retention.ms",
        ]
    if version >= 5:
        assert all(t.num_partitions == -1 and t.replication_factor == -1 for t in response.topics)


async def test_delete_topics_v6_row_validation(gw: Gateway) -> None:
    S = DeleteTopicsRequest.DeleteTopicState
    other = uuid.uuid4()
    request = DeleteTopicsRequest(
        topics=[
            S(name=None, topic_id=uuid.UUID(int=0)),
            S(name="orders", topic_id=TOPIC_ID),
            S(name="dup", topic_id=uuid.UUID(int=0)),
            S(name="dup", topic_id=uuid.UUID(int=0)),
            S(name=None, topic_id=other),
            S(name=None, topic_id=other),
        ],
        timeout_ms=1000,
    )
    response = await call(gw, ApiKey.DELETE_TOPICS, 6, request)
    # The codec decodes the all-zero UUID as None.
    got = [(r.name, r.topic_id, r.error_code, r.error_message) for r in response.responses]
    assert got == [
        (None, None, 42, "Neither topic name nor id were specified."),
        ("orders", TOPIC_ID, 42, "You may not specify both topic name and topic id."),
        ("dup", None, 42, "Duplicate topic name."),
        (None, other, 42, "Duplicate topic id."),
    ]


async def test_incremental_alter_configs_refusals_before_the_controller(gw: Gateway) -> None:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    A = R.AlterableConfig
    request = IncrementalAlterConfigsRequest(
        resources=[
            R(
                resource_type=2,
                resource_name="orders",
                configs=[A(name="retention.ms", config_operation=7, value="1")],
            ),
            R(resource_type=16, resource_name="sub", configs=[]),
            R(resource_type=99, resource_name="x", configs=[]),
            R(resource_type=4, resource_name="101", configs=[]),
            R(resource_type=4, resource_name="x", configs=[]),
            R(resource_type=2, resource_name="same", configs=[]),
            R(resource_type=2, resource_name="same", configs=[]),
        ],
        validate_only=False,
    )
    response = await call(gw, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request, broker=100)
    got = [
        (r.resource_type, r.resource_name, r.error_code, r.error_message)
        for r in response.responses
    ]
    assert got == [
        (2, "orders", 42, "Unknown operation type 7"),
        (
            16,
            "sub",
            42,
            "IncrementalAlterConfigs does not support the resource type CLIENT_METRICS",
        ),
        (99, "x", 35, "Unknown resource type 99."),
        (4, "101", 42, "Unexpected broker id, expected 100, but received 101"),
        (4, "x", 42, "Node id must be an integer, but it is: x"),
        (2, "same", 42, "Duplicate resource."),
        (2, "same", 42, "Duplicate resource."),
    ]
