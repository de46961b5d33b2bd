"""The gateway's admin APIs and InitProducerId driven by real clients against a real cluster.

One cluster (controller, one storage node, one gateway; real subprocesses) serves the
whole module. kafka-python's ``KafkaAdminClient`` and confluent-kafka's
``AdminClient`` (librdkafka) create, grow, describe, alter and delete topics,
describe the cluster and delete records, including the error cases a Kafka broker
answers (topic exists, invalid partition counts, invalid config values, unknown
topics, a replication factor above the number of storage nodes, reserved names).
OffsetForLeaderEpoch, which these clients only send after a leader change, is
driven over a raw socket with the Kafka codec.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from helpers.wire import call, connect
from kafka import KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kerrors
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    OffsetForLeaderEpochRequest,
)
from odradek.rpc.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from odradek.tools.launcher import Cluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: Callable[..., Cluster]) -> Cluster:
    return module_cluster_factory(with_groups=False)


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return cluster.bootstrap_servers


@pytest.fixture(scope="module")
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def ck_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_name() -> str:
    return f"adm-{uuid.uuid4().hex[:10]}"


def wait(futures: dict[Any, Any], timeout: float = 15.0) -> dict[Any, Any]:
    return {k: f.result(timeout=timeout) for k, f in futures.items()}


def kafka_error(future: Any, timeout: float = 15.0) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=timeout)
    error = info.value.args[0]
    assert isinstance(error, KafkaError)
    return error


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    delivered: list[Any] = []
    for i in range(count):
        producer.produce(
            topic,
            value=b"v%d" % i,
            partition=partition,
            on_delivery=lambda err, msg: delivered.append(err),
        )
    assert producer.flush(20) == 0
    assert delivered == [None] * count


# --------------------------------------------------------------------------- kafka-python


def test_kafka_python_topic_lifecycle(kp_admin: KafkaAdminClient) -> None:
    name = topic_name()
    created = kp_admin.create_topics(
        {name: {"num_partitions": 2, "configs": {"retention.ms": "3600000"}}}
    )
    (topic,) = created["topics"]
    assert (topic["name"], topic["error_code"], topic["num_partitions"]) == (name, 0, 2)
    assert topic["replication_factor"] == 1
    assert topic["configs"]["retention.ms"]["value"] == "3600000"
    assert topic["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    # Visible with leaders as soon as CreateTopics answered.
    (described,) = kp_admin.describe_topics([name])
    assert described["error_code"] == 0
    assert [p["leader_id"] >= 0 for p in described["partitions"]] == [True, True]

    with pytest.raises(kerrors.TopicAlreadyExistsError):
        kp_admin.create_topics({name: {"num_partitions": 1}})

    kp_admin.create_partitions({name: 4})
    (described,) = kp_admin.describe_topics([name])
    assert len(described["partitions"]) == 4
    with pytest.raises(kerrors.InvalidPartitionsError):
        kp_admin.create_partitions({name: 3})
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kp_admin.create_partitions({topic_name(): 3})

    kp_admin.delete_topics([name])
    assert name not in kp_admin.list_topics()
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kp_admin.delete_topics([name])


def test_kafka_python_create_errors(kp_admin: KafkaAdminClient) -> None:
    with pytest.raises(kerrors.InvalidReplicationFactorError):
        kp_admin.create_topics({topic_name(): {"num_partitions": 1, "replication_factor": 2}})
    with pytest.raises(kerrors.InvalidPartitionsError):
        kp_admin.create_topics({topic_name(): {"num_partitions": 0}})
    with pytest.raises(kerrors.InvalidTopicError):
        kp_admin.create_topics({"__reserved": {"num_partitions": 1}})
    result = kp_admin.create_topics(
        {topic_name(): {"configs": {"retention.ms": "soon"}}}, raise_errors=False
    )
    (topic,) = result["topics"]
    assert topic["error_code"] == kerrors.InvalidConfigurationError.errno
    assert topic["error_message"] == (
        "Invalid value soon for configuration retention.ms: Not a number of type LONG"
    )
    # -1 takes num.partitions and default.replication.factor.
    (defaulted,) = kp_admin.create_topics({topic_name(): {}})["topics"]
    assert (defaulted["error_code"], defaulted["num_partitions"]) == (0, 1)
    assert defaulted["replication_factor"] == 1
    # validate_only creates nothing.
    name = topic_name()
    kp_admin.create_topics({name: {"num_partitions": 3}}, validate_only=True)
    assert name not in kp_admin.list_topics()


def test_kafka_python_configs(kp_admin: KafkaAdminClient) -> None:
    name = topic_name()
    kp_admin.create_topics({name: {"num_partitions": 1}})
    resource = KpConfigResource(ConfigResourceType.TOPIC, name)
    configs = kp_admin.describe_configs([resource], config_filter="all")["topic"][name]
    assert configs["retention.ms"]["value"] == "604800000"
    assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert kp_admin.describe_configs([resource])["topic"][name] == {}  # nothing modified

    # IncrementalAlterConfigs (kafka-python's default against this broker).
    result = kp_admin.alter_configs(
        [KpConfigResource(ConfigResourceType.TOPIC, name, {"retention.ms": "60000"})]
    )
    assert result == {"topic": {name: "OK"}}
    modified = kp_admin.describe_configs([resource], include_synonyms=True)["topic"][name]
    assert set(modified) == {"retention.ms"}
    assert modified["retention.ms"]["value"] == "60000"
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert modified["retention.ms"]["synonyms"][0]["source"] == "DYNAMIC_TOPIC_CONFIG"

    # Legacy AlterConfigs replaces every override.
    result = kp_admin.alter_configs(
        [KpConfigResource(ConfigResourceType.TOPIC, name, {"segment.bytes": "1048576"})],
        incremental=False,
    )
    assert result == {"topic": {name: "OK"}}
    modified = kp_admin.describe_configs([resource])["topic"][name]
    assert {k: v["value"] for k, v in modified.items()} == {
        "retention.ms": "60000",  # kafka-python carries existing overrides along
        "segment.bytes": "1048576",
    }

    bad = kp_admin.alter_configs(
        [KpConfigResource(ConfigResourceType.TOPIC, name, {"retention.ms": "-5"})]
    )
    assert "InvalidConfigurationError" in bad["topic"][name]
    assert (
        "Invalid value -5 for configuration retention.ms: Value must be at least -1"
        in (bad["topic"][name])
    )

    # The broker is storage node 100 (kafka-python asks it at its own endpoint).
    broker = kp_admin.describe_configs(
        [KpConfigResource(ConfigResourceType.BROKER, "100")], config_filter="all"
    )["broker"]["100"]
    assert broker["num.partitions"]["value"] == "1"
    assert broker["num.partitions"]["read_only"] is True
    assert broker["log.retention.hours"]["value"] == "168"


def test_kafka_python_describe_cluster(kp_admin: KafkaAdminClient, cluster: Cluster) -> None:
    info = kp_admin.describe_cluster()
    assert len(info["cluster_id"]) == 22
    # The one storage node is the one broker, at the gateway's broker port for it.
    assert info["controller_id"] == 100
    port = cluster.service("gateway-0").ports["broker-100"]
    assert [(b["broker_id"], b["host"], b["port"]) for b in info["brokers"]] == [
        (100, "127.0.0.1", port)
    ]


def test_kafka_python_idempotent_produce_and_delete_records(
    kp_admin: KafkaAdminClient, bootstrap: str
) -> None:
    name = topic_name()
    kp_admin.create_topics({name: {"num_partitions": 1}})
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    for i in range(10):
        producer.send(name, b"m%d" % i)
    producer.flush(timeout=20)
    producer.close(timeout=5)
    tp = KpTopicPartition(name, 0)
    result = kp_admin.delete_records({tp: 4})
    assert result[tp]["low_watermark"] == 4
    result = kp_admin.delete_records({tp: -1})  # up to the high watermark
    assert result[tp]["low_watermark"] == 10
    with pytest.raises(kerrors.OffsetOutOfRangeError):
        kp_admin.delete_records({tp: 11})


# --------------------------------------------------------------------------- confluent-kafka


def test_confluent_topic_admin_and_errors(ck_admin: AdminClient) -> None:
    name = topic_name()
    wait(ck_admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)]))
    assert name in ck_admin.list_topics(timeout=10).topics

    cases = {
        "exists": (NewTopic(name, 1, 1), KafkaError.TOPIC_ALREADY_EXISTS),
        "rf": (NewTopic(topic_name(), 1, 3), KafkaError.INVALID_REPLICATION_FACTOR),
        "partitions": (NewTopic(topic_name(), 0, 1), KafkaError.INVALID_PARTITIONS),
        "reserved": (NewTopic("__internal_x", 1, 1), KafkaError.TOPIC_EXCEPTION),
        "config": (
            NewTopic(topic_name(), 1, 1, config={"cleanup.policy": "shred"}),
            KafkaError.INVALID_CONFIG,
        ),
    }
    for label, (new_topic, code) in cases.items():
        (future,) = ck_admin.create_topics([new_topic]).values()
        error = kafka_error(future)
        assert error.code() == code, (label, error)
    assert kafka_error(
        next(iter(ck_admin.create_topics([NewTopic(name, 1, 1)]).values()))
    ).str() == (f"Topic '{name}' already exists.")
    # A validate-only create checks and creates nothing.
    probe = topic_name()
    wait(ck_admin.create_topics([NewTopic(probe, 2, 1)], validate_only=True))
    assert probe not in ck_admin.list_topics(timeout=10).topics

    wait(ck_admin.create_partitions([NewPartitions(name, 3)]))
    assert len(ck_admin.list_topics(name, timeout=10).topics[name].partitions) == 3
    (future,) = ck_admin.create_partitions([NewPartitions(name, 2)]).values()
    assert kafka_error(future).code() == KafkaError.INVALID_PARTITIONS
    (future,) = ck_admin.create_partitions([NewPartitions(topic_name(), 2)]).values()
    assert kafka_error(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    wait(ck_admin.delete_topics([name]))
    assert name not in ck_admin.list_topics(timeout=10).topics
    (future,) = ck_admin.delete_topics([name]).values()
    assert kafka_error(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_describe_configs_lists_defaults_with_source(ck_admin: AdminClient) -> None:
    name = topic_name()
    wait(ck_admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "120000"})]))
    resource = ConfigResource(ResourceType.TOPIC, name)
    (entries,) = wait(ck_admin.describe_configs([resource])).values()
    retention, segment = entries["retention.ms"], entries["segment.bytes"]
    assert (retention.value, retention.source) == (
        "120000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert not retention.is_default
    assert [(s.name, s.source) for s in retention.synonyms.values()] == [
        ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG.value),
    ]
    assert (segment.value, segment.source) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value)
    assert segment.is_default and not segment.is_read_only and not segment.is_sensitive
    assert len(entries) == 28

    (future,) = ck_admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic_name())]
    ).values()
    assert kafka_error(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    (future,) = ck_admin.describe_configs([ConfigResource(ResourceType.BROKER, "100")]).values()
    broker = future.result(timeout=15)
    assert broker["message.max.bytes"].value == "1048588"
    assert broker["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_incremental_and_legacy_alter_configs(ck_admin: AdminClient) -> None:
    name = topic_name()
    wait(ck_admin.create_topics([NewTopic(name, 1, 1)]))
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "30000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    wait(ck_admin.incremental_alter_configs([resource]))
    (entries,) = wait(
        ck_admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    ).values()
    assert entries["retention.ms"].value == "30000"
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    delete = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    wait(ck_admin.incremental_alter_configs([delete]))
    (entries,) = wait(
        ck_admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    ).values()
    assert entries["retention.ms"].value == "604800000"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    bad = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("min.insync.replicas", "0", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = ck_admin.incremental_alter_configs([bad]).values()
    error = kafka_error(future)
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1" in (
        error.str()
    )
    wrong_op = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    (future,) = ck_admin.incremental_alter_configs([wrong_op]).values()
    assert kafka_error(future).code() == KafkaError.INVALID_CONFIG

    (future,) = ck_admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                topic_name(),
                incremental_configs=[
                    ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
                ],
            )
        ]
    ).values()
    assert kafka_error(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Legacy AlterConfigs: the given set replaces all overrides (cleanup.policy goes back).
    legacy = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.bytes": "2097152"})
    wait(ck_admin.alter_configs([legacy]))
    (entries,) = wait(
        ck_admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
    ).values()
    assert entries["segment.bytes"].value == "2097152"
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_cluster_default_broker_config(ck_admin: AdminClient, bootstrap: str) -> None:
    # Neither client can name the cluster default resource (""): send the request raw.
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    A = R.AlterableConfig

    def alter(name: str, op: int, value: str | None) -> tuple[int, str | None]:
        request = IncrementalAlterConfigsRequest(
            resources=[
                R(
                    resource_type=4,
                    resource_name="",
                    configs=[A(name=name, config_operation=op, value=value)],
                )
            ],
            validate_only=False,
        )
        (result,) = _request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses
        return result.error_code, result.error_message

    assert alter("log.retention.ms", 0, "86400000") == (0, None)
    try:
        (broker,) = wait(
            ck_admin.describe_configs([ConfigResource(ResourceType.BROKER, "100")])
        ).values()
        assert broker["log.retention.ms"].value == "86400000"
        assert broker["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        # The new cluster default reaches topics without an override.
        name = topic_name()
        wait(ck_admin.create_topics([NewTopic(name, 1, 1)]))
        (entries,) = wait(
            ck_admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)])
        ).values()
        assert entries["retention.ms"].value == "86400000"
        assert entries["retention.ms"].source != ConfigSource.DEFAULT_CONFIG.value
        # Static broker configs cannot change at run time; bad values are refused.
        code, message = alter("num.partitions", 0, "5")
        assert code == ErrorCode.INVALID_CONFIG
        assert message == "Cannot update these configs dynamically: Set(num.partitions)"
        code, message = alter("log.retention.ms", 0, "often")
        assert code == ErrorCode.INVALID_CONFIG
    finally:
        assert alter("log.retention.ms", 1, None) == (0, None)
    (broker,) = wait(
        ck_admin.describe_configs([ConfigResource(ResourceType.BROKER, "100")])
    ).values()
    assert broker["log.retention.ms"].value is None


def test_per_broker_config_applies_to_that_storage_node(
    ck_admin: AdminClient, bootstrap: str, cluster: Cluster
) -> None:
    """AlterConfigs on BROKER 100: DYNAMIC_BROKER_CONFIG, applied by storage node 100."""
    name = topic_name()
    wait(ck_admin.create_topics([NewTopic(name, 1, 1)]))
    resource = ConfigResource(
        ResourceType.BROKER,
        "100",
        incremental_configs=[
            ConfigEntry("message.max.bytes", "2000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    wait(ck_admin.incremental_alter_configs([resource]))
    try:
        (broker,) = wait(
            ck_admin.describe_configs([ConfigResource(ResourceType.BROKER, "100")])
        ).values()
        assert (broker["message.max.bytes"].value, broker["message.max.bytes"].source) == (
            "2000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        # The storage node now refuses batches above its own limit.
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
        errors: list[Any] = []
        deadline = time.monotonic() + 15
        while not errors or errors[-1] is None:
            assert time.monotonic() < deadline, "the storage node never applied its config"
            producer.produce(
                name, value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err)
            )
            producer.flush(10)
            time.sleep(0.1)
        assert errors[-1].code() == KafkaError.MSG_SIZE_TOO_LARGE
        # On a broker's port another broker id is refused, as on a Kafka broker; on the
        # bootstrap listener an id that is no storage node is BROKER_ID_NOT_REGISTERED.
        R = IncrementalAlterConfigsRequest.AlterConfigsResource
        A = R.AlterableConfig
        request = IncrementalAlterConfigsRequest(
            resources=[
                R(
                    resource_type=4,
                    resource_name="7",
                    configs=[A(name="message.max.bytes", config_operation=0, value="1")],
                )
            ],
            validate_only=False,
        )
        broker_port = f"127.0.0.1:{cluster.service('gateway-0').ports['broker-100']}"
        answers = [
            (r.error_code, r.error_message)
            for address in (bootstrap, broker_port)
            for r in _request(address, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses
        ]
        assert answers == [
            (ErrorCode.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
            (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 100, but received 7"),
        ]
    finally:
        delete = ConfigResource(
            ResourceType.BROKER,
            "100",
            incremental_configs=[
                ConfigEntry(
                    "message.max.bytes", None, incremental_operation=AlterConfigOpType.DELETE
                )
            ],
        )
        wait(ck_admin.incremental_alter_configs([delete]))


def test_confluent_describe_cluster(ck_admin: AdminClient, cluster: Cluster) -> None:
    result = ck_admin.describe_cluster(include_authorized_operations=True).result(timeout=15)
    assert len(result.cluster_id) == 22
    assert result.controller.id == 100
    port = cluster.service("gateway-0").ports["broker-100"]
    assert [(n.id, n.host, n.port) for n in result.nodes] == [(100, "127.0.0.1", port)]
    assert result.authorized_operations


def test_confluent_delete_records_and_list_offsets(ck_admin: AdminClient, bootstrap: str) -> None:
    name = topic_name()
    wait(ck_admin.create_topics([NewTopic(name, 1, 1)]))
    produce(bootstrap, name, 20)
    tp = TopicPartition(name, 0)

    def offsets(spec: OffsetSpec) -> int:
        (info,) = wait(ck_admin.list_offsets({tp: spec})).values()
        return int(info.offset)

    assert (offsets(OffsetSpec.earliest()), offsets(OffsetSpec.latest())) == (0, 20)
    (deleted,) = wait(ck_admin.delete_records([TopicPartition(name, 0, 7)])).values()
    assert deleted.low_watermark == 7
    assert offsets(OffsetSpec.earliest()) == 7
    (future,) = ck_admin.delete_records([TopicPartition(name, 0, 21)]).values()
    assert kafka_error(future).code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_idempotent_producers_get_distinct_producer_ids(
    ck_admin: AdminClient, bootstrap: str, cluster: Cluster
) -> None:
    name = topic_name()
    wait(ck_admin.create_topics([NewTopic(name, 1, 1)]))
    produce(bootstrap, name, 3)
    produce(bootstrap, name, 3)
    storage = next(s for s in cluster.services if s.spec.kind == "storage")
    with grpc.insecure_channel(f"127.0.0.1:{storage.ports['grpc']}") as channel:
        answer = storage_pb2_grpc.StorageStub(channel).DescribeProducers(
            storage_pb2.DescribeProducersRequest(
                partitions=[common_pb2.TopicPartition(topic=name, partition=0)]
            ),
            timeout=10,
        )
    (partition,) = answer.partitions
    assert partition.error_code == 0
    producers = {(p.producer_id, p.producer_epoch) for p in partition.producers}
    assert len(producers) == 2
    assert all(pid >= 0 and epoch == 0 for pid, epoch in producers)


# --------------------------------------------------------------------------- raw protocol


def _request(bootstrap: str, api_key: ApiKey, version: int, request: Any) -> Any:
    with connect(bootstrap) as s:
        return call(s, api_key, version, request, cid=7)


@pytest.mark.parametrize("version", [0, 2, 4])
def test_offset_for_leader_epoch(ck_admin: AdminClient, bootstrap: str, version: int) -> None:
    name = topic_name()
    wait(ck_admin.create_topics([NewTopic(name, 1, 1)]))
    produce(bootstrap, name, 5)
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    P = T.OffsetForLeaderPartition
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            T(
                topic=name,
                partitions=[
                    P(partition=0, current_leader_epoch=-1, leader_epoch=0),
                    P(partition=9, current_leader_epoch=-1, leader_epoch=0),
                ],
            )
        ],
    )
    response = _request(bootstrap, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, request)
    (topic,) = response.topics
    found, missing = topic.partitions
    assert (found.partition, found.error_code, found.end_offset) == (0, 0, 5)
    if version >= 1:
        assert found.leader_epoch == 0
    assert (missing.partition, missing.error_code, missing.end_offset) == (9, 3, -1)


@pytest.mark.parametrize("version", [0, 2, 4, 5])
def test_init_producer_id_raw(bootstrap: str, version: int) -> None:
    def init(transactional_id: str | None) -> Any:
        request = InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        return _request(bootstrap, ApiKey.INIT_PRODUCER_ID, version, request)

    first, second = init(None), init(None)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert (second.error_code, second.producer_epoch) == (0, 0)
    assert 0 <= first.producer_id < second.producer_id
    refused = init("")  # transactional producers: tests/integration/test_transactions_wire.py
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
