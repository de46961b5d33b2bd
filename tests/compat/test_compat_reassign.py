"""Reassignments, leader elections and log directories through real admin clients.

One cluster for the module, started as a user starts it: ``odradek up --storage-nodes 4
--log-dirs 2`` (brokers 100-103, two log directories each, automatic leader rebalance
off so elections are the tests' own). Each admin that has the API drives it:

* AlterPartitionReassignments / ListPartitionReassignments: Java AdminClient,
  kafka-python, kafkajs — replicas move and data survives; a throttled move stays
  listed with its adding/removing replicas until cancelled; unknown broker ids,
  duplicate replicas, unknown partitions and cancelling nothing answer Kafka's errors;
* ElectLeaders (preferred, unclean): Java, kafka-python, confluent-kafka;
* DescribeLogDirs / AlterReplicaLogDirs: Java, kafka-python — sizes per partition and
  directory, a replica moved to its broker's other directory, LOG_DIR_NOT_FOUND and
  REPLICA_NOT_AVAILABLE.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import kafka.errors
import pytest
from compat_model import ClientError
from compat_up import UpCluster, start_up, stop_up
from helpers.waiting import wait_until
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic

from odradek.protocol.errors import ErrorCode

# Slow suite (make test-slow, run by CI): four admin clients move data between storage nodes.
pytestmark = pytest.mark.slow

BROKERS = [100, 101, 102, 103]
RECORDS = 300


@pytest.fixture(scope="module")
def up4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("reassign") / "data",
        [
            "--storage-nodes",
            "4",
            "--log-dirs",
            "2",
            "--replication-factor",
            "2",
            "--set",
            "auto.leader.rebalance.enable=false",
            "--set",
            "broker.heartbeat.interval.ms=200",
            "--set",
            "broker.session.timeout.ms=2000",
        ],
    )
    yield cluster
    stop_up(cluster)


@pytest.fixture(scope="module")
def kp_admin(up4: UpCluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=up4.bootstrap)
    yield admin
    admin.close()


class JavaReassign:
    name = "java"

    def __init__(self, bootstrap: str, classpath: str) -> None:
        self.bootstrap = bootstrap
        self.classpath = classpath

    def run(self, command: str, **opts: object) -> list[list[str]]:
        proc = subprocess.run(
            [
                "java",
                "-Xshare:auto",
                "-cp",
                self.classpath,
                "ReassignClient",
                command,
                self.bootstrap,
                *(f"{k}={v}" for k, v in opts.items()),
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
        rows = [line.split("\t") for line in proc.stdout.decode().splitlines() if line]
        for row in rows:
            if row[0] == "ERROR":
                raise ClientError(self.name, row[1], row[2] if len(row) > 2 else "")
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
        return rows


class KafkajsReassign:
    name = "kafkajs"

    def __init__(self, bootstrap: str, driver: Path) -> None:
        self.bootstrap = bootstrap
        self.driver = driver

    def run(self, command: str, request: dict[str, Any]) -> dict[str, Any]:
        proc = subprocess.run(
            ["node", str(self.driver), command, self.bootstrap],
            input=json.dumps(request).encode(),
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
        answer: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        if not answer["ok"]:
            err = answer["error"]
            code = err.get("type") or (err.get("cause") or {}).get("type") or err["name"]
            raise ClientError(self.name, code, err["message"])
        return answer


# -- one small interface over the three clients that can reassign ---------------------------


class Reassigner:
    name = "?"

    def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        raise NotImplementedError

    def ongoing(self, topic: str) -> dict[int, tuple[list[int], list[int], list[int]]]:
        raise NotImplementedError


class JavaReassigner(Reassigner):
    name = "java"

    def __init__(self, java: JavaReassign) -> None:
        self.java = java

    def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        target = "cancel" if replicas is None else ",".join(map(str, replicas))
        self.java.run("reassign", topic=topic, partition=partition, replicas=target)

    def ongoing(self, topic: str) -> dict[int, tuple[list[int], list[int], list[int]]]:
        out = {}
        for row in self.java.run("list-reassignments"):
            if row[0] == "REASSIGNMENT" and row[1] == topic:
                out[int(row[2])] = tuple(  # type: ignore[assignment]
                    [int(x) for x in cell.split(",") if x] for cell in row[3:6]
                )
        return out


class KafkaPythonReassigner(Reassigner):
    name = "kafka-python"

    def __init__(self, admin: KafkaAdminClient) -> None:
        self.admin = admin

    def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        result = self.admin.alter_partition_reassignments(
            {TopicPartition(topic, partition): replicas}
        )
        error = result.get(TopicPartition(topic, partition))
        if error is not None:
            raise ClientError(self.name, ErrorCode(error.errno).name)

    def ongoing(self, topic: str) -> dict[int, tuple[list[int], list[int], list[int]]]:
        return {
            tp.partition: (r["replicas"], r["adding_replicas"], r["removing_replicas"])
            for tp, r in self.admin.list_partition_reassignments().items()
            if tp.topic == topic
        }


class KafkajsReassigner(Reassigner):
    name = "kafkajs"

    def __init__(self, js: KafkajsReassign) -> None:
        self.js = js

    def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> None:
        assert replicas is not None, "kafkajs cannot cancel (its API takes replica lists only)"
        self.js.run("alter", {"topic": topic, "partition": partition, "replicas": replicas})

    def ongoing(self, topic: str) -> dict[int, tuple[list[int], list[int], list[int]]]:
        answer = self.js.run("list", {"topics": None})
        out = {}
        for t in answer["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    out[p["partition"]] = (
                        p["replicas"],
                        p["addingReplicas"],
                        p["removingReplicas"],
                    )
        return out


@pytest.fixture
def java_reassign(up4: UpCluster, java_classpath: str) -> JavaReassign:
    return JavaReassign(up4.bootstrap, java_classpath)


@pytest.fixture
def reassigner(
    request: pytest.FixtureRequest, up4: UpCluster, kp_admin: KafkaAdminClient
) -> Reassigner:
    if request.param == "java":
        return JavaReassigner(
            JavaReassign(up4.bootstrap, request.getfixturevalue("java_classpath"))
        )
    if request.param == "kafkajs":
        driver: Path = request.getfixturevalue("kafkajs_driver")
        return KafkajsReassigner(KafkajsReassign(up4.bootstrap, driver.with_name("reassign.js")))
    return KafkaPythonReassigner(kp_admin)


# -- helpers ----------------------------------------------------------------------------------


def make_topic(admin: KafkaAdminClient, assignment: dict[int, list[int]]) -> str:
    topic = f"r-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, replica_assignments=assignment)])
    wait_until(
        lambda: len(partitions(admin, topic)) == len(assignment), f"{topic} created", timeout=30
    )
    return topic


def partitions(admin: KafkaAdminClient, topic: str) -> dict[int, dict[str, Any]]:
    try:
        (described,) = admin.describe_topics([topic])
    except kafka.errors.KafkaError:
        return {}
    if described.get("error_code"):
        return {}
    return {p["partition_index"]: p for p in described["partitions"]}


def produce(bootstrap: str, topic: str, partition: int, n: int = RECORDS) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    values = [f"{topic}-{partition}-{i}".encode() + b"." * 200 for i in range(n)]
    for v in values:
        producer.send(topic, v, partition=partition)
    producer.flush()
    producer.close()
    return values


def consume(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    consumer.assign([TopicPartition(topic, partition)])
    values = [bytes(r.value) for r in consumer]
    consumer.close()
    return values


def throttle_to_a_crawl(admin: KafkaAdminClient, topic: str, broker: int) -> None:
    """Broker ``broker`` may fetch ``topic``'s replicas at 1 byte/s while not in sync."""
    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topic,
                configs={"follower.replication.throttled.replicas": (AlterConfigOp.SET, "*")},
            ),
            ConfigResource(
                ConfigResourceType.BROKER,
                str(broker),
                configs={"follower.replication.throttled.rate": (AlterConfigOp.SET, "1")},
            ),
        ],
        raise_on_unknown=False,
        incremental=True,
    )


def unthrottle(admin: KafkaAdminClient, broker: int) -> None:
    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.BROKER,
                str(broker),
                configs={"follower.replication.throttled.rate": (AlterConfigOp.DELETE, None)},
            )
        ],
        raise_on_unknown=False,
        incremental=True,
    )


def error_of(fn: Callable[[], object]) -> str:
    with pytest.raises(ClientError) as info:
        fn()
    return info.value.code


# -- reassignment ---------------------------------------------------------------------------


@pytest.mark.parametrize("reassigner", ["java", "kafka-python", "kafkajs"], indirect=True)
def test_reassignment_moves_replicas_and_keeps_the_data(
    reassigner: Reassigner, up4: UpCluster, kp_admin: KafkaAdminClient
) -> None:
    topic = make_topic(kp_admin, {0: [100, 101], 1: [100, 101]})
    written = produce(up4.bootstrap, topic, 0)
    reassigner.reassign(topic, 0, [102, 103])

    def moved() -> bool:
        p = partitions(kp_admin, topic)[0]
        return p["replica_nodes"] == [102, 103] and sorted(p["isr_nodes"]) == [102, 103]

    wait_until(moved, f"{topic}-0 on 102,103", timeout=30)
    assert partitions(kp_admin, topic)[0]["leader_id"] in (102, 103)
    assert consume(up4.bootstrap, topic, 0) == written
    wait_until(lambda: not reassigner.ongoing(topic), "no reassignment listed", timeout=30)

    # A move that cannot finish (1 B/s) stays listed, with adding/removing replicas.
    produce(up4.bootstrap, topic, 1, 50)
    throttle_to_a_crawl(kp_admin, topic, 102)
    try:
        reassigner.reassign(topic, 1, [102, 101])
        wait_until(lambda: 1 in reassigner.ongoing(topic), f"{topic}-1 listed", timeout=30)
        assert reassigner.ongoing(topic)[1] == ([102, 101, 100], [102], [100])
        if reassigner.name != "kafkajs":
            reassigner.reassign(topic, 1, None)  # cancel
            wait_until(lambda: not reassigner.ongoing(topic), "cancelled", timeout=30)
            # KRaft's revert: the replica list without the adding replicas, in its order
            assert partitions(kp_admin, topic)[1]["replica_nodes"] == [101, 100]
            assert error_of(lambda: reassigner.reassign(topic, 1, None)) in (
                "NO_REASSIGNMENT_IN_PROGRESS",
            )
    finally:
        unthrottle(kp_admin, 102)
    wait_until(lambda: not reassigner.ongoing(topic), "no reassignment listed", timeout=30)


@pytest.mark.parametrize("reassigner", ["java", "kafka-python", "kafkajs"], indirect=True)
def test_bad_reassignments_answer_kafkas_errors(
    reassigner: Reassigner, kp_admin: KafkaAdminClient
) -> None:
    topic = make_topic(kp_admin, {0: [100, 101]})
    assert error_of(lambda: reassigner.reassign(topic, 0, [100, 999])) == (
        "INVALID_REPLICA_ASSIGNMENT"
    )
    assert error_of(lambda: reassigner.reassign(topic, 0, [101, 101])) == (
        "INVALID_REPLICA_ASSIGNMENT"
    )
    assert error_of(lambda: reassigner.reassign(topic, 7, [100, 101])) == (
        "UNKNOWN_TOPIC_OR_PARTITION"
    )
    kp_admin.delete_topics([topic])
    assert error_of(lambda: reassigner.reassign(topic, 0, [102, 103])) == (
        "UNKNOWN_TOPIC_OR_PARTITION"
    )
    assert partitions(kp_admin, topic) == {}


# -- leader elections -----------------------------------------------------------------------


def _elect(
    client: str,
    up4: UpCluster,
    java_classpath: Callable[[], str],
    kp: KafkaAdminClient,
    kind: str,
    topic: str,
    parts: list[int],
) -> dict[int, str]:
    """Election outcome per partition: NONE or the Kafka error name."""
    if client == "java":
        rows = JavaReassign(up4.bootstrap, java_classpath()).run(
            "elect", type=kind, topic=topic, partitions=",".join(map(str, parts))
        )
        return {int(r[2]): r[3] for r in rows if r[0] == "ELECTED"}
    if client == "kafka-python":
        response = kp.elect_leaders(
            0 if kind == "PREFERRED" else 1, {topic: parts}, raise_errors=False
        )
        return {
            p.partition_id: ErrorCode(p.error_code).name
            for t in response.replica_election_results
            for p in t.partition_result
        }
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": up4.bootstrap})
    election = confluent_kafka.ElectionType[kind]
    future = admin.elect_leaders(
        election, [confluent_kafka.TopicPartition(topic, p) for p in parts]
    )
    out: dict[int, str] = {}
    for tp in future.result(timeout=30):
        code = tp.error.code() if tp.error is not None else 0
        out[tp.partition] = "NONE" if not code else ErrorCode(code).name
    return out


@pytest.mark.parametrize("client", ["java", "kafka-python", "confluent"])
def test_preferred_and_unclean_elections(
    client: str, up4: UpCluster, kp_admin: KafkaAdminClient, request: pytest.FixtureRequest
) -> None:
    classpath = lambda: request.getfixturevalue("java_classpath")  # noqa: E731
    topic = make_topic(kp_admin, {0: [100, 101], 1: [101, 100]})
    produce(up4.bootstrap, topic, 0, 20)
    # Reordering the replicas completes at once; the leader stays where it is.
    KafkaPythonReassigner(kp_admin).reassign(topic, 0, [101, 100])
    wait_until(
        lambda: partitions(kp_admin, topic)[0]["replica_nodes"] == [101, 100],
        "reordered",
        timeout=30,
    )
    assert partitions(kp_admin, topic)[0]["leader_id"] == 100

    outcome = _elect(client, up4, classpath, kp_admin, "PREFERRED", topic, [0, 1])
    assert outcome == {0: "NONE", 1: "ELECTION_NOT_NEEDED"}
    wait_until(
        lambda: partitions(kp_admin, topic)[0]["leader_id"] == 101, "preferred leads", timeout=30
    )
    outcome = _elect(client, up4, classpath, kp_admin, "UNCLEAN", topic, [0])
    assert outcome == {0: "ELECTION_NOT_NEEDED"}  # it has a leader
    outcome = _elect(client, up4, classpath, kp_admin, "PREFERRED", topic, [5])
    assert outcome == {5: "UNKNOWN_TOPIC_OR_PARTITION"}
    assert consume(up4.bootstrap, topic, 0)[-1].startswith(f"{topic}-0-19".encode())


# -- log directories ------------------------------------------------------------------------


def _log_dirs(
    client: str, kp: KafkaAdminClient, java: Callable[[], JavaReassign]
) -> dict[int, dict[str, dict[tuple[str, int], tuple[int, bool]]]]:
    """broker -> dir -> (topic, partition) -> (size, is_future)."""
    out: dict[int, dict[str, dict[tuple[str, int], tuple[int, bool]]]] = {}
    if client == "java":
        for row in java().run("describe-log-dirs", brokers=",".join(map(str, BROKERS))):
            if row[0] == "LOGDIR":
                assert row[3] == "NONE" and int(row[4]) > 0 and 0 <= int(row[5]) <= int(row[4])
                out.setdefault(int(row[1]), {})[row[2]] = {}
            elif row[0] == "REPLICA":
                out[int(row[1])][row[2]][(row[3], int(row[4]))] = (int(row[5]), row[7] == "true")
        return out
    for answer in kp.describe_log_dirs(brokers=BROKERS):
        for d in answer["log_dirs"]:
            assert d["error_code"] == 0 and d["total_bytes"] > 0
            replicas = out.setdefault(answer["broker"], {}).setdefault(d["log_dir"], {})
            for t in d["topics"]:
                for p in t["partitions"]:
                    replicas[(t["name"], p["partition_index"])] = (
                        p["partition_size"],
                        p["is_future_key"],
                    )
    return out


def _alter_dir(
    client: str,
    kp: KafkaAdminClient,
    java: Callable[[], JavaReassign],
    topic: str,
    partition: int,
    broker: int,
    path: str,
) -> str:
    if client == "java":
        try:
            java().run("alter-log-dir", topic=topic, partition=partition, broker=broker, path=path)
        except ClientError as exc:
            return exc.code
        return "NONE"
    result = kp.alter_replica_log_dirs({(topic, partition, broker): path})
    (error,) = result.values()
    return ErrorCode(error.errno).name if error.errno else "NONE"


@pytest.mark.parametrize("client", ["java", "kafka-python"])
def test_describe_and_alter_log_dirs(
    client: str, up4: UpCluster, kp_admin: KafkaAdminClient, request: pytest.FixtureRequest
) -> None:
    java = lambda: JavaReassign(up4.bootstrap, request.getfixturevalue("java_classpath"))  # noqa: E731
    topic = make_topic(kp_admin, {0: [100, 101]})
    written = produce(up4.bootstrap, topic, 0)

    dirs = _log_dirs(client, kp_admin, java)
    assert sorted(dirs) == BROKERS and all(len(d) == 2 for d in dirs.values())
    (current,) = [d for d, replicas in dirs[100].items() if (topic, 0) in replicas]
    size, future = dirs[100][current][(topic, 0)]
    assert size > RECORDS * 200 and not future
    (other,) = [d for d in dirs[100] if d != current]

    assert _alter_dir(client, kp_admin, java, topic, 0, 100, other) == "NONE"

    def moved() -> bool:
        now = _log_dirs(client, kp_admin, java)[100]
        return (
            (topic, 0) in now[other]
            and not now[other][(topic, 0)][1]
            and (
                topic,
                0,
            )
            not in now[current]
        )

    wait_until(moved, "the replica in its new directory", timeout=30)
    assert consume(up4.bootstrap, topic, 0) == written
    assert _alter_dir(client, kp_admin, java, topic, 0, 100, "/no/such/dir") == "LOG_DIR_NOT_FOUND"
    (d102,) = list(dirs[102])[:1]
    assert _alter_dir(client, kp_admin, java, topic, 0, 102, d102) == "REPLICA_NOT_AVAILABLE"
