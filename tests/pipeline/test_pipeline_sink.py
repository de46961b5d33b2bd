"""The ``odradek`` Spark sink against a real cluster: batch and streaming writes,
Spark's column rules, Java-compatible key partitioning, errors as task failures."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
from confluent_kafka import Consumer, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.partitioner.default import murmur2
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.utils import CapturedException

from odradek.pipeline.session import local_session
from odradek.tools.launcher import Cluster


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


ERRORS = (PySparkException, CapturedException)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield local_session("test-pipeline-sink")


def create_topic(bs: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)


def read_all(bs: str, topic: str, partitions: int) -> list[Rec]:
    """Every record of the topic, read with a plain consumer up to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "check",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Rec] = []
    at_end: set[int] = set()
    while len(at_end) < partitions:
        msgs = consumer.consume(1000, 0.2)
        for m in msgs:
            if m.error() is None:
                out.append(Rec.of(m))
            else:
                at_end.add(m.partition() or 0)
    consumer.close()
    return out


def java_partition(key: bytes, partitions: int) -> int:
    """The Java client's default partitioner for keyed records."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def test_batch_write_columns(spark: SparkSession, cluster: Cluster, unique_topic: str) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 4)
    rows = [
        (
            f"key-{i}" if i % 5 else None,
            f"value-{i}".encode(),
            (i % 4) if i % 3 == 0 else None,
            [("trace", f"{i}".encode())] if i % 2 else None,
        )
        for i in range(400)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("odradek").option("kafka.bootstrap.servers", bs).option("topic", t).mode(
        "append"
    ).save()
    got = {m.value: m for m in read_all(bs, t, 4)}
    assert len(got) == 400
    for key, value, partition, headers in rows:
        m = got[value]
        assert m.key == (key.encode() if key else None)
        assert (m.headers or None) == headers
        if partition is not None:
            assert m.partition == partition
        elif key is not None:
            assert m.partition == java_partition(key.encode(), 4)


def test_batch_write_topic_column_and_option(
    spark: SparkSession, cluster: Cluster, unique_topic: str
) -> None:
    bs = cluster.bootstrap_servers
    a, b = f"{unique_topic}-a", f"{unique_topic}-b"
    create_topic(bs, a, 1)
    create_topic(bs, b, 1)
    df = spark.createDataFrame(
        [(a if i % 3 else b, f"{i}") for i in range(90)], "topic string, value string"
    )
    df.write.format("odradek").option("kafka.bootstrap.servers", bs).mode("append").save()
    assert sorted(int(m.value) for m in read_all(bs, a, 1)) == [i for i in range(90) if i % 3]
    assert sorted(int(m.value) for m in read_all(bs, b, 1)) == [i for i in range(90) if i % 3 == 0]
    # The topic option wins over the column, as in Spark's sink.
    df.write.format("odradek").option("kafka.bootstrap.servers", bs).option("topic", b).mode(
        "append"
    ).save()
    assert len(read_all(bs, b, 1)) == 30 + 90


def test_write_errors_fail_the_write(
    spark: SparkSession, cluster: Cluster, unique_topic: str
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 2)

    def save(df_sql: str, mode: str = "append", **options: str) -> None:
        w = (
            spark.sql(df_sql)
            .write.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .mode(mode)
        )
        for k, v in options.items():
            w = w.option(k, v)
        w.save()

    with pytest.raises(ERRORS, match="Required attribute 'value' not found"):
        save("select 'k' as key", topic=t)
    with pytest.raises(ERRORS, match="topic option required"):
        save("select 'v' as value")
    with pytest.raises(ERRORS, match="value attribute type must be a string or binary"):
        save("select 1 as value", topic=t)
    with pytest.raises(ERRORS, match="partition attribute type must be an int"):
        save("select 'v' as value, 'x' as partition", topic=t)
    with pytest.raises(ERRORS, match="Overwrite is not allowed"):
        save("select 'v' as value", mode="overwrite", topic=t)
    # A record the cluster cannot take fails its task (partition 7 does not exist).
    with pytest.raises(ERRORS, match=r"(?i)unknown partition"):
        save("select 'v' as value, 7 as partition", topic=t)
    # Too large for the broker (message.max.bytes): a delivery error, also a task failure.
    with pytest.raises(ERRORS, match=r"(?i)too large|MSG_SIZE_TOO_LARGE"):
        save(
            "select repeat('x', 3000000) as value",
            topic=t,
            **{"kafka.message.max.bytes": "4000000"},
        )


def test_stream_write_from_topic_to_topic(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    src, dst = f"{unique_topic}-in", f"{unique_topic}-out"
    create_topic(bs, src, 3)
    create_topic(bs, dst, 2)
    p = Producer({"bootstrap.servers": bs})
    for i in range(600):
        p.produce(
            src, value=f"{i}".encode(), key=f"k{i % 50}".encode(), headers=[("n", f"{i}".encode())]
        )
    assert p.flush(30) == 0

    def run() -> None:
        q = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .option("maxOffsetsPerTrigger", "250")
            .load()
            .selectExpr("key", "upper(cast(value as string)) as value", "headers")
            .writeStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("topic", dst)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120)
        assert q.exception() is None

    run()
    out = read_all(bs, dst, 2)
    assert sorted(int(m.value) for m in out) == list(range(600))
    for m in out:
        assert m.partition == java_partition(m.required_key(), 2)
        assert m.headers == [("n", m.value)]
    for i in range(600, 700):
        p.produce(src, value=f"{i}".encode(), key=b"k")
    assert p.flush(30) == 0
    run()
    assert sorted(int(m.value) for m in read_all(bs, dst, 2)) == list(range(700))
