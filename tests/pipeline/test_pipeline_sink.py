"""The ``odradek`` Spark sink against a real cluster: batch and streaming writes,
Spark's column rules, Java-compatible key partitioning and property names, errors
as task failures, and the exactly-once mode (Kafka transactions).

The exactly-once tests that need transactions skip until the cluster advertises
EndTxn in ApiVersions (Odradek does not serve transactions yet); the skip goes away
by itself when it does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from helpers.wire import call, connect
from kafka.partitioner.default import murmur2
from pipeline_kafka import Rec, create_topic, read_all
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import CapturedException

from odradek.pipeline.session import local_session
from odradek.pipeline.transactional_write import MARKER_TOPIC
from odradek.protocol.messages import ApiVersionsRequest
from odradek.tools.launcher import Cluster

# A real SparkSession per module and tens of seconds per streaming test: these run in
# make test-slow, which CI runs after the default suite (keeps make test under 20 min).
pytestmark = pytest.mark.slow


API_VERSIONS = 18
END_TXN = 26


ERRORS = (PySparkException, CapturedException)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield local_session("test-pipeline-sink")


def advertises_end_txn(bootstrap: str) -> bool:
    """ApiVersions v3 (as clients send it): does the cluster offer EndTxn?"""
    with connect(bootstrap) as sock:
        resp = call(
            sock,
            API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="odradek-test", client_software_version="1"),
        )
    return any(k.api_key == END_TXN for k in resp.api_keys)


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


def test_headers_built_the_natural_way_and_java_property_names(
    spark: SparkSession, cluster: Cluster, unique_topic: str
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 1, {"max.message.bytes": "4000000"})
    # F.lit makes every field non-nullable: Spark's connector accepts that.
    df = spark.range(3).select(
        F.col("id").cast("string").alias("value"),
        F.array(F.struct(F.lit("k").alias("key"), F.lit(b"v").alias("value"))).alias("headers"),
    )

    def save(frame: DataFrame, **options: str) -> None:
        w = frame.write.format("odradek").option("kafka.bootstrap.servers", bs).option("topic", t)
        for k, v in options.items():
            w = w.option(k, v)
        w.mode("append").save()

    save(df)
    assert sorted((m.value, tuple(m.headers)) for m in read_all(bs, t, 1)) == [
        (str(i).encode(), (("k", b"v"),)) for i in range(3)
    ]
    # Java names from Spark jobs: max.request.size lets a 3 MB record through,
    # buffer.memory sizes the queue, acks=1 turns the default idempotence off.
    big = spark.sql("select repeat('x', 3000000) as value")
    with pytest.raises(ERRORS, match=r"(?i)too large"):
        save(big)  # librdkafka's own limit (message.max.bytes) is 1 MB
    save(
        big,
        **{
            "kafka.max.request.size": "4000000",
            "kafka.buffer.memory": "67108864",
            "kafka.acks": "1",
            "kafka.max.block.ms": "1000",
        },
    )
    assert max(len(m.value) for m in read_all(bs, t, 1)) == 3000000
    with pytest.raises(ERRORS, match=r"Must set kafka\.acks to all"):
        save(df, **{"kafka.acks": "1", "kafka.enable.idempotence": "true"})


def test_unreachable_bootstrap_fails_the_write_fast(spark: SparkSession) -> None:
    df = spark.sql("select 'v' as value")
    began = time.monotonic()
    with pytest.raises(ERRORS) as info:
        df.write.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:1").option(
            "topic", "t"
        ).mode("append").save()
    assert time.monotonic() - began < 30
    text = str(info.value)
    assert "kafka.bootstrap.servers=127.0.0.1:1" in text and "Connection refused" in text, text


def test_exactly_once_needs_transactions_and_streaming(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    eos = {"deliveryGuarantee": "exactly-once", "transactionalIdPrefix": unique_topic}
    w = spark.sql("select 'v' as value").write.format("odradek")
    for k, v in {"kafka.bootstrap.servers": bs, "topic": unique_topic, **eos}.items():
        w = w.option(k, v)
    with pytest.raises(ERRORS, match="applies to streaming writes"):
        w.mode("append").save()
    if advertises_end_txn(bs):
        pytest.skip("the cluster serves transactions: the refusal below cannot happen")
    create_topic(bs, unique_topic, 1)
    sw = (
        spark.readStream.format("rate")
        .load()
        .selectExpr("cast(value as string) as value")
        .writeStream.format("odradek")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
    )
    for k, v in {"kafka.bootstrap.servers": bs, "topic": unique_topic, **eos}.items():
        sw = sw.option(k, v)
    began = time.monotonic()
    with pytest.raises(ERRORS, match="exactly-once needs Kafka transactions"):
        sw.start().awaitTermination(120)
    assert time.monotonic() - began < 60


def _copy_job(
    bs: str, src: str, dst: str, tmp: Path, log: Path, *extra: str
) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "odradek.pipeline.jobs.copy_topic",
                "--bootstrap-server",
                bs,
                "--source",
                src,
                "--destination",
                dst,
                "--checkpoint",
                str(tmp / "ckpt"),
                "--exactly-once",
                "--transactional-id-prefix",
                f"copy-{src}",
                "--max-offsets-per-trigger",
                "3000",
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM dies with it
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError("job processes survived SIGKILL")


def test_exactly_once_sink_survives_driver_sigkill(
    cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    """SIGKILL the driver (and its JVM) mid-stream three times, restart from the
    checkpoint each time: read_committed, the output holds every input record once."""
    bs = cluster.bootstrap_servers
    if not advertises_end_txn(bs):
        pytest.skip("the cluster does not advertise EndTxn: no transactions to test yet")
    src, dst = f"{unique_topic}-in", f"{unique_topic}-out"
    create_topic(bs, src, 3)
    create_topic(bs, dst, 2)
    total = 60_000
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20})
    for i in range(total):
        while True:
            try:
                p.produce(src, value=f"{i}".encode(), key=f"k{i % 97}".encode(), partition=i % 3)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    log = tmp_path / "job.log"

    def committed_batches() -> int:
        d = tmp_path / "ckpt" / "commits"
        return len(list(d.glob("[0-9]*"))) if d.exists() else 0

    for round_ in range(3):
        job = _copy_job(bs, src, dst, tmp_path, log)
        deadline = time.monotonic() + 240
        start_commits = committed_batches()
        # Kill at different points: right after a commit, and between commits.
        while time.monotonic() < deadline and job.poll() is None:
            if committed_batches() >= start_commits + 1 + round_:
                time.sleep(0.3 * round_)
                break
            time.sleep(0.05)
        assert job.poll() is None, log.read_text()[-3000:]
        _kill_group(job)
    final = _copy_job(bs, src, dst, tmp_path, log, "--trigger-available-now")
    assert final.wait(timeout=600) == 0, log.read_text()[-3000:]
    _kill_group(final)
    got = [int(m.value) for m in read_all(bs, dst, 2, "read_committed")]
    assert len(got) == total and sorted(got) == list(range(total))
    # The transactions of the killed attempts left their rows aborted, not lost.
    assert len(read_all(bs, dst, 2)) >= total
    assert read_all(bs, MARKER_TOPIC, 1) == []  # markers are group offsets, not records


def test_batch_write_without_headers_goes_out_as_record_batches(
    spark: SparkSession, cluster: Cluster, unique_topic: str
) -> None:
    """No headers and default settings: tasks build the record batches from the Arrow
    columns themselves; keys still land where the Java client puts them."""
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 3)
    rows = [
        (
            f"key-{i}" if i % 4 else None,
            None if i % 50 == 7 else f"value-{i}".encode(),
            (i % 3) if i % 5 == 0 else None,
        )
        for i in range(30_000)
    ]
    df = spark.createDataFrame(rows, "key string, value binary, partition int").repartition(4)
    df.write.format("odradek").option("kafka.bootstrap.servers", bs).option("topic", t).mode(
        "append"
    ).save()
    got = read_all(bs, t, 3)
    assert len(got) == len(rows)
    by_key: dict[bytes | None, list[Rec]] = {}
    for m in got:
        by_key.setdefault(m.key, []).append(m)
    for key, value, partition in rows:
        if key is None:
            continue
        (m,) = by_key[key.encode()]
        assert m.value == (value or b"")
        assert m.partition == (
            partition if partition is not None else java_partition(key.encode(), 3)
        )
    nulls = [m for m in got if m.key is None]
    assert len(nulls) == len([r for r in rows if r[0] is None])
    # Offsets are dense per partition: every record is a record of its own batch slot.
    for p in range(3):
        offsets = sorted(m.offset for m in got if m.partition == p)
        assert offsets == list(range(len(offsets)))
