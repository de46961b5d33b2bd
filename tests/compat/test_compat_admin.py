"""Topic administration through each client's admin API: create with configs, list,
describe, describe configs (values, defaults and their sources), alter, add
partitions, delete, and the errors each step answers when misused (docs/compatibility.md C19).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from compat_admin import (
    AiokafkaAdmin,
    ConfluentAdmin,
    JavaAdmin,
    KafkajsAdmin,
    KafkaPythonAdmin,
    TopicAdmin,
)
from compat_clients import Client, ConfluentClient, JavaClient, KafkajsClient, KcatClient
from compat_model import ClientError, Rec
from helpers.waiting import wait_until

ADMINS = ("confluent", "kafka-python", "aiokafka", "java", "kafkajs")


@pytest.fixture
def admin(request: pytest.FixtureRequest, bootstrap: str) -> Iterator[TopicAdmin]:
    name = request.param
    made: TopicAdmin
    if name == "confluent":
        made = ConfluentAdmin(bootstrap)
    elif name == "kafka-python":
        made = KafkaPythonAdmin(bootstrap)
    elif name == "aiokafka":
        made = AiokafkaAdmin(bootstrap)
    elif name == "java":
        made = JavaAdmin(request.getfixturevalue("java"))
    else:
        made = KafkajsAdmin(request.getfixturevalue("kafkajs"))
    yield made
    made.close()


def _error(fn: Callable[[], object]) -> str:
    with pytest.raises(ClientError) as err:
        fn()
    return err.value.code


@pytest.mark.parametrize("admin", ADMINS, indirect=True)
def test_topic_lifecycle(admin: TopicAdmin, unique_topic: str, confluent: ConfluentClient) -> None:
    topic = unique_topic
    admin.create(topic, 3, {"retention.ms": "123456789", "cleanup.policy": "compact"})
    wait_until(lambda: topic in admin.topics(), f"{topic} in the topic list")
    assert len(admin.leaders(topic)) == 3
    assert all(leader >= 0 for leader in admin.leaders(topic))

    configs = admin.configs(topic)
    assert configs["retention.ms"] == ("123456789", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG")
    assert configs["max.message.bytes"] == ("1048588", "DEFAULT_CONFIG")
    assert configs["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG")
    assert configs["min.insync.replicas"][0] == "1"

    assert _error(lambda: admin.create(topic, 1, {})) == "TOPIC_ALREADY_EXISTS"
    if admin.name != "kafkajs":  # kafkajs validates nothing but reports per-topic errors
        bad = _error(lambda: admin.create(topic + "-bad", 1, {"cleanup.policy": "sometimes"}))
        assert bad == "INVALID_CONFIG"
    assert _error(lambda: admin.add_partitions(topic, 2)) == "INVALID_PARTITIONS"

    admin.alter(topic, "retention.ms", "555000")
    configs = admin.configs(topic)
    assert configs["retention.ms"] == ("555000", "DYNAMIC_TOPIC_CONFIG")
    if admin.alter_replaces_all:
        assert configs["cleanup.policy"] == ("delete", "DEFAULT_CONFIG"), "AlterConfigs replaces"
    else:
        assert configs["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG"), "incremental"

    admin.add_partitions(topic, 5)
    wait_until(lambda: len(admin.leaders(topic)) == 5, "5 partitions")
    (acked,) = confluent.produce(topic, [Rec(b"k", b"in the new partition")], partition=4)
    assert (acked.partition, acked.offset) == (4, 0)

    admin.delete(topic)
    wait_until(lambda: topic not in admin.topics(), f"{topic} gone from the list")
    assert _error(lambda: admin.delete(topic)) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_describe_cluster_through_java_and_kafkajs(
    java: JavaClient, kafkajs: KafkajsClient
) -> None:
    (row,) = java.run("describe-cluster", {})
    assert row[0] == "CLUSTER"
    cluster_id = row[1]
    assert len(cluster_id) == 22, f"cluster id {cluster_id!r} is not 22 url-safe base64 chars"
    # The one storage node is the one broker clients see, and the controller id.
    assert (row[2], row[3]) == ("100", "100")
    answer = kafkajs.run("describe-cluster", {})["cluster"]
    assert answer["clusterId"] == cluster_id
    assert [b["nodeId"] for b in answer["brokers"]] == [100]
    assert answer["controller"] == 100


def test_kcat_lists_metadata(
    clients: Callable[[str], Client], unique_topic: str, bootstrap: str
) -> None:
    ConfluentAdmin(bootstrap).create(unique_topic, 4, {})
    kcat = clients("kcat")
    assert isinstance(kcat, KcatClient)
    doc = json.loads(kcat.run(["-L", "-J", "-t", unique_topic]))
    (topic,) = doc["topics"]
    assert topic["topic"] == unique_topic
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2, 3]
    assert [b["id"] for b in doc["brokers"]] == [100]
    assert all(p["leader"] == 100 for p in topic["partitions"])
    assert all(p["replicas"] == [{"id": 100}] for p in topic["partitions"])
