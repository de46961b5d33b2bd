"""Real admin clients take the broker ids Metadata lists and use them everywhere
(docs/compatibility.md C24, docs/brokers.md), with 1 storage node behind 1 gateway and 3
storage nodes behind 2 gateways:

- librdkafka creates a topic with a manual replica assignment built from the listed
  ids and describes each broker's configs;
- the Java AdminClient does the same and describes every listed broker's log dirs;
- kafka-python describes the cluster and each broker, assigns replicas by hand,
  deletes records and lists groups from every broker (each group once);
- kafkajs finds every partition's leader among the listed brokers: fetchTopicOffsets
  and deleteRecords work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_clients import JavaClient, KafkajsClient
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from helpers.waiting import wait_until
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kafka.structs import OffsetAndMetadata

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.tools.launcher import Cluster, ClusterOptions

SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module", params=[(1, 1), (3, 2)], ids=["1storage-1gw", "3storage-2gw"])
def shaped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, list[int]]]:
    """(bootstrap, storage node ids) of a cluster of one shape."""
    storage, gateways = request.param
    cluster = Cluster(
        ClusterOptions(
            data_dir=tmp_path_factory.mktemp(f"ident-{storage}-{gateways}"),
            port=0,
            storage_nodes=storage,
            gateways=gateways,
            replication_factor=storage,
            settings=SETTINGS,
        )
    )
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        wait_until(
            lambda: len(admin.list_topics(timeout=10).brokers) == storage,
            f"{storage} brokers in Metadata",
            timeout=30,
        )
        yield cluster.bootstrap_servers, [100 + i for i in range(storage)]
    finally:
        cluster.stop()


def topic_name() -> str:
    return f"ident-{uuid.uuid4().hex[:8]}"


def assignment_of(ids: list[int]) -> list[list[int]]:
    """One partition per broker, each led by a different one, replicated on two if any."""
    rf = min(2, len(ids))
    return [[ids[(p + k) % len(ids)] for k in range(rf)] for p in range(len(ids))]


def test_librdkafka_assigns_replicas_to_the_listed_brokers(shaped: tuple[str, list[int]]) -> None:
    bootstrap, ids = shaped
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=15)
    assert sorted(md.brokers) == ids
    assert md.controller_id in md.brokers
    topic = topic_name()
    wanted = assignment_of(sorted(md.brokers))
    for future in admin.create_topics(
        [NewTopic(topic, len(wanted), replica_assignment=wanted)]
    ).values():
        future.result(30)

    def described() -> bool:
        t = admin.list_topics(topic, timeout=15).topics[topic]
        return len(t.partitions) == len(wanted) and all(
            p.leader in p.replicas and sorted(p.isrs) == sorted(p.replicas)
            for p in t.partitions.values()
        )

    wait_until(described, "every partition led by one of its replicas, in sync", timeout=30)
    partitions = admin.list_topics(topic, timeout=15).topics[topic].partitions
    assert [partitions[p].replicas for p in sorted(partitions)] == wanted
    assert {partitions[p].leader for p in partitions} == set(ids), "leaders spread"

    # Data flows to every broker's endpoint (each partition's leader).
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[object] = []
    for p in partitions:
        producer.produce(topic, b"v", partition=p, on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(30) == 0 and delivered == [None] * len(partitions)

    for node_id in ids:
        resource = ConfigResource(ResourceType.BROKER, str(node_id))
        (configs,) = [f.result(30) for f in admin.describe_configs([resource]).values()]
        assert configs["message.max.bytes"].value == "1048588"
    cluster = admin.describe_cluster().result(30)
    assert sorted(n.id for n in cluster.nodes) == ids
    assert cluster.controller.id in ids


def test_java_admin_uses_every_listed_id(
    shaped: tuple[str, list[int]], java_classpath: str
) -> None:
    bootstrap, ids = shaped
    topic = topic_name()
    rows = JavaClient(bootstrap, java_classpath).run("broker-identity", {"topic": topic})
    (cluster,) = [r for r in rows if r[0] == "CLUSTER"]
    assert cluster[2] == str(ids)  # Java prints a list as [100, 101]
    assert int(cluster[1]) in ids
    wanted = assignment_of(ids)
    partitions = [r for r in rows if r[0] == "PARTITION"]
    assert [r[3] for r in partitions] == [",".join(map(str, w)) for w in wanted]
    for _, _, leader, replicas, isr in partitions:
        assert leader in replicas.split(",") and set(isr.split(",")) <= set(replicas.split(","))
    configs = {int(r[1]): r for r in rows if r[0] == "BROKER_CONFIGS"}
    assert sorted(configs) == ids
    assert all(int(r[2]) == len(BROKER_CONFIGS) and r[3] == "1048588" for r in configs.values())
    dirs = {int(r[1]): (int(r[2]), int(r[3])) for r in rows if r[0] == "LOG_DIRS"}
    hosted = {i: sum(i in w for w in wanted) for i in ids}
    assert dirs == {i: (1, hosted[i]) for i in ids}


def test_kafka_python_admin(shaped: tuple[str, list[int]]) -> None:
    bootstrap, ids = shaped
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=30000)
    try:
        info = admin.describe_cluster()
        assert sorted(b["broker_id"] for b in info["brokers"]) == ids
        assert info["controller_id"] in ids
        for node_id in ids:
            found = admin.describe_configs(
                [KpConfigResource(ConfigResourceType.BROKER, str(node_id))]
            )
            assert found["broker"][str(node_id)] == {}  # nothing set above the defaults

        topic = topic_name()
        wanted = assignment_of(ids)
        admin.create_topics([KpNewTopic(topic, replica_assignments=dict(enumerate(wanted)))])
        # kafka-python asks any broker, here maybe the other gateway, which learns of the
        # topic a moment later (as Kafka's brokers do from the controller's log; its
        # own admin client retries UNKNOWN_TOPIC_OR_PARTITION, kafka-python does not).
        described: dict[str, Any] = {}

        def known() -> bool:
            nonlocal described
            (described,) = admin.describe_topics([topic])
            return len(described["partitions"]) == len(wanted)

        wait_until(known, f"{topic} described with its partitions", timeout=15)
        parts = sorted(described["partitions"], key=lambda p: p["partition_index"])
        assert [p["replica_nodes"] for p in parts] == wanted
        assert all(p["leader_id"] in p["replica_nodes"] for p in parts)

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for p in range(len(wanted)):
            for i in range(10):
                producer.produce(topic, b"v%d" % i, partition=p)
        assert producer.flush(30) == 0
        last = len(wanted) - 1  # led by the last listed broker
        low = admin.delete_records({KpTopicPartition(topic, last): 4})
        assert low[KpTopicPartition(topic, last)]["low_watermark"] == 4

        # Groups: ListGroups goes to every broker; each group comes from exactly one.
        groups = [f"ident-{uuid.uuid4().hex[:6]}" for _ in range(6)]
        for group in groups:
            consumer = KafkaConsumer(
                bootstrap_servers=bootstrap.split(","), group_id=group, enable_auto_commit=False
            )
            consumer.commit({KpTopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
            consumer.close()
        listed = [g[0] if isinstance(g, tuple) else g["group_id"] for g in admin.list_groups()]
        mine = [g for g in listed if g in groups]
        assert sorted(mine) == sorted(groups), listed
    finally:
        admin.close()


def test_kafkajs_finds_leaders_among_the_brokers(
    shaped: tuple[str, list[int]], kafkajs_driver: Path
) -> None:
    bootstrap, ids = shaped
    kafkajs = KafkajsClient(bootstrap, kafkajs_driver)
    cluster = kafkajs.run("describe-cluster", {})["cluster"]
    assert sorted(b["nodeId"] for b in cluster["brokers"]) == ids
    assert cluster["controller"] in ids

    topic = topic_name()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, len(ids), len(ids))]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(len(ids)):
        for i in range(10):
            producer.produce(topic, b"v%d" % i, partition=p)
    assert producer.flush(30) == 0

    (meta,) = kafkajs.run("describe-topic", {"topic": topic})["metadata"]["topics"]
    for p in meta["partitions"]:
        assert p["leader"] in ids and p["leader"] in p["replicas"]
        assert sorted(p["replicas"]) == ids
    offsets = kafkajs.run("topic-offsets", {"topic": topic})["offsets"]
    assert sorted((o["partition"], o["high"], o["low"]) for o in offsets) == [
        (p, "10", "0") for p in range(len(ids))
    ]
    for p in range(len(ids)):
        kafkajs.run("delete-records", {"topic": topic, "partition": p, "offset": 3 + p})
    offsets = kafkajs.run("topic-offsets", {"topic": topic})["offsets"]
    assert sorted((o["partition"], o["low"]) for o in offsets) == [
        (p, str(3 + p)) for p in range(len(ids))
    ]
