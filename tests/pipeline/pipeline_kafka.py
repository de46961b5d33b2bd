"""What the pipeline tests do with the cluster directly, beside Spark: create topics,
run the access-log generator, and read a topic back with a plain consumer."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from typing import cast

from confluent_kafka import Consumer, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass(frozen=True)
class Rec:
    """A consumed record with the Optional-free types these checks want."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes | None]]

    @classmethod
    def of(cls, m: Message) -> Rec:
        return cls(
            partition=m.partition() or 0,
            offset=m.offset() or 0,
            key=m.key(),
            value=m.value() or b"",
            headers=cast(list[tuple[str, bytes | None]], m.headers() or []),
        )

    def required_key(self) -> bytes:
        assert self.key is not None
        return self.key

    def header(self, name: str) -> bytes:
        value = dict(self.headers)[name]
        assert value is not None
        return value


def create_topic(
    bs: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
        fut.result(30)


def plain_consumer(bs: str, group: str, **extra: str) -> Consumer:
    """A consumer for manual assignment that reports partition ends and never commits."""
    return Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            **extra,
        }
    )


def read_all(
    bs: str,
    topic: str,
    partitions: int | None = None,
    isolation: str = "read_uncommitted",
    timeout: float = 60.0,
) -> list[Rec]:
    """Every record of the topic up to its end (all partitions when ``partitions`` is
    None), sorted by partition and offset."""
    consumer = plain_consumer(bs, "check", **{"isolation.level": isolation})
    if partitions is None:
        parts = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
    else:
        parts = list(range(partitions))
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in parts])
    out: list[Rec] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(at_end) < len(parts) and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.2):
            if m.error() is None:
                out.append(Rec.of(m))
            else:
                at_end.add(m.partition() or 0)
    consumer.close()
    return sorted(out, key=lambda r: (r.partition, r.offset))


def run_generator(
    bs: str, topic: str, *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m odradek.pipeline.generate`` against ``topic``; ``args`` are its
    other options. Fails the test when it exits non-zero."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek.pipeline.generate",
            "--bootstrap-server",
            bs,
            "--topic",
            topic,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return proc
