"""Running ``odradek mirror`` as a real subprocess, and reading clusters with librdkafka.

:class:`MirrorProcess` starts the command a user types (its stderr, with the progress
lines, goes to a log file shown on failure), stops it with SIGTERM or kill -9.
:func:`read_all` reads every record of a topic with a real client (confluent-kafka),
by partition, in offset order, as (key, value, headers, timestamp) tuples.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from odradek.process import terminate
from tests.helpers.waiting import wait_until

# Record timestamps: recent (retention must not delete them), distinct per record.
BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000
Row = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int]


class MirrorProcess:
    def __init__(self, log_path: Path, *args: str) -> None:
        self.log_path = log_path
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MirrorProcess:
        cmd = [sys.executable, "-m", "odradek.cli", "mirror", *self.args]
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc is None:
            return 0
        terminate(self.proc, 30)
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> MirrorProcess:
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.stop()
        if exc_type is not None:
            print(f"--- {self.log_path.name} ---\n{self.log()}")  # shown with the failure


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def created() -> bool:
        future = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic]
        try:
            future.result(120)
        except KafkaException as exc:
            # A cluster just started may not have registered its storage nodes yet.
            if exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR:
                raise
            return False
        return True

    wait_until(created, f"{topic} created", timeout=60)
    wait_until(
        lambda: partition_count(bootstrap, topic) == partitions, f"{topic} in metadata", timeout=60
    )


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)


def partition_count(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10).topics.get(topic)  # not by name: no auto-creation
    if md is None or md.error is not None:
        return 0
    return len(md.partitions)


def topic_names(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def topic_config(bootstrap: str, topic: str, name: str) -> str | None:
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    entry = entries.get(name)
    return None if entry is None else entry.value


def produce(
    bootstrap: str, topic: str, count: int, *, start: int = 0, partitions: int | None = None
) -> None:
    """``count`` numbered records (key k<i%5>, value v<i>, a header, timestamp BASE_TIMESTAMP+i),
    partition i % partitions when given (else by key), idempotent, acks=all."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(start, start + count):
        kwargs = {} if partitions is None else {"partition": i % partitions}
        producer.produce(
            topic,
            key=b"k%d" % (i % 5),
            value=b"v%d" % i,
            headers=[("n", b"%d" % i)],
            timestamp=BASE_TIMESTAMP + i,
            **kwargs,
        )
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def mirror_position(
    bootstrap: str, topic: str, group: str = "odradek-mirror-target"
) -> dict[int, int]:
    """The source positions the mirror committed on the target (by target partition)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        n = partition_count(bootstrap, topic)
        found = consumer.committed([TopicPartition(topic, p) for p in range(n)], timeout=10)
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-test-ends"})
    try:
        n = partition_count(bootstrap, topic)
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(n)
        }
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, *, timeout: float = 30.0) -> dict[int, list[Row]]:
    """Every record of ``topic`` up to the current end offsets, by partition."""
    ends = end_offsets(bootstrap, topic)
    out: dict[int, list[Row]] = {p: [] for p in ends}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mirror-test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        wanted = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in wanted])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                out[msg.partition()].append(
                    (msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])
                )
                continue
            # Caught up: positions pass the end offsets (transaction markers included).
            positions = consumer.position([TopicPartition(topic, p) for p in wanted])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                break
        else:
            raise AssertionError(f"could not read {topic} to its end offsets {ends} in {timeout}s")
    finally:
        consumer.close()
    return out


def read_count(
    bootstrap: str, topic: str, partitions: int, count: int, *, timeout: float = 60.0
) -> dict[int, list[Row]]:
    """The first ``count`` records of ``topic`` by partition (for brokers whose end
    offsets cannot be trusted: Tansu's ListOffsets(latest) lags its last batch)."""
    out: dict[int, list[Row]] = {p: [] for p in range(partitions)}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mirror-test-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        deadline = time.monotonic() + timeout
        while got < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out[msg.partition()].append(
                (msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1])
            )
            got += 1
        assert got == count, f"read {got} of {count} records of {topic}"
    finally:
        consumer.close()
    return out
