"""The ``odradek`` Spark source against a real cluster started like ``odradek up``:
batch reads of exact offset ranges, streaming with availableNow and processing-time
triggers, new partitions, data loss and compacted gaps. One local SparkSession per
test process (``local_session``), shared by the module."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from helpers.waiting import wait_until
from pipeline_kafka import create_topic, read_all
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.utils import CapturedException

from odradek.pipeline.session import local_session
from odradek.pipeline.source_metrics import with_offsets_behind
from odradek.pipeline.topics import metadata_client, partition_count
from odradek.tools.launcher import Cluster

# A real SparkSession per module and tens of seconds per streaming test: these run in
# make test-slow, which CI runs after the default suite (keeps make test under 20 min).
pytestmark = pytest.mark.slow


ERRORS = (PySparkException, CapturedException)

# Recent enough that time-based retention (7 days) keeps the records.
BASE_MS = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield local_session("test-pipeline-source")


def produce(bs: str, topic: str, records: list[dict[str, Any]]) -> None:
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0


def numbered(topic_partitions: int, lo: int, hi: int, **extra: Any) -> list[dict[str, Any]]:
    """Records i in [lo, hi): value b"v<i>", partition i % n, timestamp BASE + i."""
    return [
        {
            "value": f"v{i}".encode(),
            "key": f"k{i}".encode(),
            "partition": i % topic_partitions,
            "timestamp": BASE_MS + i,
            **extra,
        }
        for i in range(lo, hi)
    ]


def source(spark: SparkSession, bs: str, streaming: bool = False, /, **options: str) -> DataFrame:
    reader = spark.readStream if streaming else spark.read
    r = reader.format("odradek").option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def values(df: DataFrame) -> list[int]:
    return sorted(int(r.value[1:]) for r in df.select("value").collect())


# -- batch ---------------------------------------------------------------------------------


def test_batch_read_rows_and_schema(
    spark: SparkSession, cluster: Cluster, unique_topic: str
) -> None:
    bs = cluster.bootstrap_servers
    create_topic(bs, unique_topic, 3)
    recs = numbered(3, 0, 300)
    for i, rec in enumerate(recs):
        if i % 2:
            rec["headers"] = [("h", f"x{i}".encode()), ("n", None)]
    recs[0]["key"] = None
    produce(bs, unique_topic, recs)

    df = source(spark, bs, subscribe=unique_topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows = {int(r.value[1:]): r for r in df.collect()}
    assert sorted(rows) == list(range(300))
    for i, r in rows.items():
        assert r.topic == unique_topic and r.partition == i % 3 and r.offset == i // 3
        assert r.key == (None if i == 0 else f"k{i}".encode())
        assert r.timestampType == 0  # CreateTime, Java's id
        assert int(r.timestamp.timestamp() * 1000) == BASE_MS + i
        if i % 2:
            assert [(h.key, h.value) for h in r.headers] == [("h", f"x{i}".encode()), ("n", None)]
        else:
            assert r.headers is None
    plain = source(spark, bs, subscribe=unique_topic)
    assert "headers" not in plain.columns and plain.count() == 300

    # A LogAppendTime topic: the broker's time, timestampType 1 (Java's LogAppendTime).
    appended = f"{unique_topic}-append"
    create_topic(bs, appended, 1, {"message.timestamp.type": "LogAppendTime"})
    before = time.time()
    produce(bs, appended, [{"value": b"x", "timestamp": BASE_MS}])
    (row,) = source(spark, bs, subscribe=appended).collect()
    assert row.timestampType == 1 and row.timestamp.timestamp() >= before - 1


def test_batch_read_exact_offset_ranges(
    spark: SparkSession, cluster: Cluster, unique_topic: str
) -> None:
    bs = cluster.bootstrap_servers
    create_topic(bs, unique_topic, 3)
    produce(bs, unique_topic, numbered(3, 0, 600))  # 200 per partition
    t = unique_topic
    df = source(
        spark,
        bs,
        subscribe=t,
        startingOffsets=json.dumps({t: {"0": 10, "1": -2, "2": 150}}),
        endingOffsets=json.dumps({t: {"0": 20, "1": 5, "2": -1}}),
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = (
        [(0, o) for o in range(10, 20)]
        + [(1, o) for o in range(5)]
        + [(2, o) for o in range(150, 200)]
    )
    assert got == want
    # Split into at least minPartitions tasks without changing the rows.
    split = source(spark, bs, subscribe=t, minPartitions="7", maxRecordsPerPartition="50")
    assert split.rdd.getNumPartitions() >= 12
    assert values(split) == list(range(600))
    # startingTimestamp: the first offset at or after it, in every partition.
    since = source(spark, bs, subscribe=t, startingTimestamp=str(BASE_MS + 450))
    assert values(since) == list(range(450, 600))
    # assign picks partitions; nothing past the end offsets.
    assigned = source(
        spark, bs, assign=json.dumps({t: [1]}), endingOffsets=json.dumps({t: {"1": 3}})
    )
    assert values(assigned) == [1, 4, 7]


def test_batch_read_rejects_bad_requests(
    spark: SparkSession, cluster: Cluster, unique_topic: str
) -> None:
    bs = cluster.bootstrap_servers
    create_topic(bs, unique_topic, 2)
    t = unique_topic
    with pytest.raises(
        (PySparkException, CapturedException), match="must specify all TopicPartitions"
    ):
        source(spark, bs, subscribe=t, startingOffsets=json.dumps({t: {"0": 0}})).collect()
    with pytest.raises((PySparkException, CapturedException), match="after the ending offset"):
        source(
            spark,
            bs,
            subscribe=t,
            startingOffsets=json.dumps({t: {"0": 5, "1": 0}}),
            endingOffsets=json.dumps({t: {"0": 2, "1": 0}}),
        ).collect()
    with pytest.raises((PySparkException, CapturedException), match="fixed schema"):
        spark.read.format("odradek").schema("value string").option(
            "kafka.bootstrap.servers", bs
        ).option("subscribe", t).load().collect()
    # A topic that does not exist fails with its name (Spark's AdminClient-based offset
    # reader does too), and is not created by asking.
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ERRORS, match=f"Topic {missing} .option 'subscribe'. does not exist"):
        source(spark, bs, subscribe=missing).count()
    with pytest.raises(ERRORS, match=f"Topic {missing} .option 'assign'. does not exist"):
        source(spark, bs, assign=json.dumps({missing: [0]})).count()
    with pytest.raises(
        ERRORS, match=f"Partition.s. {t}-5 .option 'assign'. do not exist: {t} has 2"
    ):
        source(spark, bs, assign=json.dumps({t: [0, 5]})).count()
    client = metadata_client({"bootstrap.servers": bs})
    assert partition_count(client, missing) == 0
    client.close()
    # An ending offset past the log end is the option's mistake, not data loss.
    produce(bs, t, numbered(2, 0, 10))
    with pytest.raises(
        ERRORS, match=f"endingOffsets beyond the end of the log: {t}-0 asks for 9 but ends at 5"
    ):
        source(spark, bs, subscribe=t, endingOffsets=json.dumps({t: {"0": 9, "1": -1}})).count()
    # Option mistakes surface at load(), before any query runs, batch and streaming.
    for streaming in (False, True):
        with pytest.raises(ERRORS, match="not a valid regular expression"):
            source(spark, bs, streaming, subscribePattern="t-([")
        with pytest.raises(ERRORS, match="must be earliest, latest or JSON"):
            source(spark, bs, streaming, subscribe=t, startingOffsets="{bogus")
    with pytest.raises(ERRORS, match="must not exceed"):
        source(spark, bs, True, subscribe=t, maxOffsetsPerTrigger="5", minOffsetsPerTrigger="9")


@pytest.mark.parametrize(
    ("address", "reason"),
    [("127.0.0.1:1", "Connection refused"), ("no-such-host.invalid:9092", "cannot resolve host")],
)
def test_unreachable_bootstrap_fails_fast_with_address_and_reason(
    spark: SparkSession, address: str, reason: str
) -> None:
    for streaming in (False, True):
        began = time.monotonic()
        with pytest.raises(ERRORS) as info:
            df = source(spark, address, streaming, subscribe="t")
            if streaming:
                q = df.writeStream.format("noop").trigger(availableNow=True).start()
                q.awaitTermination(120)
            else:
                df.count()
        assert time.monotonic() - began < 30
        text = str(info.value)
        assert f"kafka.bootstrap.servers={address}" in text and reason in text, text[-2000:]
    # fetchOffset.numRetries x fetchOffset.retryIntervalMs is the budget for a first answer.
    began = time.monotonic()
    with pytest.raises(ERRORS, match=reason):
        source(
            spark,
            address,
            subscribe="t",
            **{"fetchOffset.numRetries": "3", "fetchOffset.retryIntervalMs": "2000"},
        ).count()
    if "refused" in reason:
        assert time.monotonic() - began >= 8


def test_librdkafka_log_is_quiet_on_refused_connections(tmp_path: Path) -> None:
    """librdkafka prints every failed connection to stderr unless told otherwise."""
    code = (
        "from odradek.pipeline.options import parse_source_options\n"
        "from odradek.pipeline.offset_lookup import OffsetLookup\n"
        "opts = parse_source_options({'kafka.bootstrap.servers': '127.0.0.1:1', "
        "'subscribe': 't'}, streaming=False)\n"
        "try:\n    OffsetLookup(opts)\nexcept Exception as e:\n    print(type(e).__name__)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert res.stdout.strip() == "ClusterUnreachableError", res.stderr[-2000:]
    assert "Connection refused" not in res.stderr, res.stderr[-2000:]


def test_batch_read_across_compacted_gaps(
    spark: SparkSession, cluster_factory: Callable[..., Cluster]
) -> None:
    c = cluster_factory(settings={"log.cleaner.backoff.ms": "200"})
    bs = c.bootstrap_servers
    t = "compacted"
    create_topic(
        bs,
        t,
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "2048",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    # Even offsets have unique keys (kept); odd ones share a key (only the last is kept).
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(400):
        p.produce(t, key=f"u{i}".encode() if i % 2 == 0 else b"dup", value=str(i).encode())
        p.flush()

    def log_offsets() -> list[int]:
        """What a plain consumer sees right now: the reference."""
        return [r.offset for r in read_all(bs, t, 1, timeout=10)]

    previous = [log_offsets()]

    def compacted() -> list[int] | None:
        """The offsets once the cleaner has compacted and they held still for a second."""
        again = log_offsets()
        settled = again == previous[0] and len(again) < 300
        previous[0] = again
        return again if settled else None

    kept = wait_until(compacted, "the cleaner to compact the topic", timeout=60, interval=1)
    assert (
        sorted(r.offset for r in source(spark, bs, subscribe=t).select("offset").collect()) == kept
    )
    # A range that starts and ends inside gaps finishes promptly with exactly the
    # surviving offsets in [start, end).
    gaps = sorted(set(range(kept[0], kept[-1])) - set(kept))
    assert gaps, kept
    lo, hi = gaps[0], gaps[len(gaps) // 2]
    began = time.monotonic()
    part = source(
        spark,
        bs,
        subscribe=t,
        startingOffsets=json.dumps({t: {"0": lo}}),
        endingOffsets=json.dumps({t: {"0": hi + 1}}),
        **{"kafkaConsumer.pollTimeoutMs": "20000"},
    )
    assert sorted(r.offset for r in part.select("offset").collect()) == [
        o for o in kept if lo <= o <= hi
    ]
    assert time.monotonic() - began < 15


def test_batch_read_data_loss(spark: SparkSession, cluster: Cluster, unique_topic: str) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 1)
    produce(bs, t, numbered(1, 0, 100))
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.delete_records([KafkaTopicPartition(t, 0, 60)]).values():
        fut.result(30)
    from_zero = {"startingOffsets": json.dumps({t: {"0": 0}})}
    with pytest.raises((PySparkException, CapturedException), match="failOnDataLoss"):
        source(spark, bs, subscribe=t, **from_zero).collect()
    lenient = source(spark, bs, subscribe=t, failOnDataLoss="false", **from_zero)
    assert values(lenient) == list(range(60, 100))
    assert values(source(spark, bs, subscribe=t)) == list(range(60, 100))  # earliest moved


# -- streaming -------------------------------------------------------------------------------


class Batches:
    """foreachBatch target: the (partition, offset) pairs of every micro-batch."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: list[tuple[int, list[tuple[int, int]]]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        rows = [(r.partition, r.offset) for r in df.select("partition", "offset").collect()]
        with self.lock:
            self.batches.append((batch_id, rows))

    def rows(self) -> list[tuple[int, int]]:
        with self.lock:
            return [row for _, rows in self.batches for row in rows]


def run_available_now(df: DataFrame, checkpoint: Path, sink: Batches) -> None:
    q = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120)


def test_stream_available_now_twice_reads_only_new_data(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 2)
    produce(bs, t, numbered(2, 0, 500))
    stream = source(
        spark, bs, True, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger="150"
    )
    first = Batches()
    run_available_now(stream, tmp_path / "ckpt", first)
    assert sorted(first.rows()) == sorted((i % 2, i // 2) for i in range(500))
    assert all(len(rows) <= 150 for _, rows in first.batches) and len(first.batches) >= 4

    produce(bs, t, numbered(2, 500, 700))
    second = Batches()
    run_available_now(stream, tmp_path / "ckpt", second)
    assert sorted(second.rows()) == sorted((i % 2, i // 2) for i in range(500, 700))
    assert min(b for b, _ in second.batches) > max(b for b, _ in first.batches)

    # Nothing new: a third run reads nothing.
    third = Batches()
    run_available_now(stream, tmp_path / "ckpt", third)
    assert third.rows() == []
    offsets = json.loads(
        (sorted((tmp_path / "ckpt" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1])
        .read_text()
        .splitlines()[-1]
    )
    assert offsets == {t: {"0": 350, "1": 350}}  # Spark's Kafka offset JSON


def test_stream_processing_time_while_producing(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 3)
    sink = Batches()
    q = (
        source(spark, bs, True, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger="400")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    total = 3000

    def writer() -> None:
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
        for i in range(total):
            p.produce(t, value=f"v{i}".encode(), partition=i % 3)
            if i % 100 == 99:
                p.flush()
                time.sleep(0.05)  # pacing: the stream sees several triggers' worth
        p.flush()

    producer = threading.Thread(target=writer)
    producer.start()
    try:
        wait_until(
            lambda: len(sink.rows()) >= total or not q.isActive,
            f"the stream to deliver {total} rows",
            timeout=90,
            interval=0.2,
        )
    finally:
        producer.join()
        q.stop()
    rows = sink.rows()
    assert len(rows) == len(set(rows)) == total, q.exception()
    assert sorted(rows) == sorted((i % 3, i // 3) for i in range(total))
    assert len(sink.batches) >= 5 and all(len(r) <= 400 for _, r in sink.batches)


def test_stream_picks_up_new_partitions(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 1)
    produce(bs, t, numbered(1, 0, 50))
    stream = source(spark, bs, True, subscribe=t, startingOffsets="earliest")
    sink = Batches()
    run_available_now(stream, tmp_path / "ckpt", sink)
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.create_partitions([NewPartitions(t, 3)]).values():
        fut.result(30)
    wait_until(
        lambda: len(admin.list_topics(t, timeout=10).topics[t].partitions) == 3,
        "the new partitions in metadata",
    )
    produce(bs, t, [{"value": f"v{i}".encode(), "partition": i % 3} for i in range(50, 110)])
    run_available_now(stream, tmp_path / "ckpt", sink)
    rows = sink.rows()
    assert len(rows) == len(set(rows)) == 110
    assert {p for p, _ in rows} == {0, 1, 2}
    assert sorted(o for p, o in rows if p == 2) == list(range(20))  # from the earliest offset


def test_stream_pattern_picks_up_new_topics(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    first, later, other = f"{unique_topic}-a", f"{unique_topic}-b", f"x{unique_topic}"
    for t in (first, other):
        create_topic(bs, t, 1)
        produce(bs, t, [{"value": f"{t}:{i}".encode()} for i in range(10)])
    stream = source(
        spark, bs, True, subscribePattern=f"{unique_topic}-.*", startingOffsets="earliest"
    )
    sink = Batches()
    run_available_now(stream, tmp_path / "ckpt", sink)
    create_topic(bs, later, 2)
    produce(bs, later, [{"value": b"x", "partition": i % 2} for i in range(6)])
    produce(bs, first, [{"value": b"y"}])
    run_available_now(stream, tmp_path / "ckpt", sink)
    offsets = json.loads(
        sorted((tmp_path / "ckpt" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1]
        .read_text()
        .splitlines()[-1]
    )
    assert offsets == {first: {"0": 11}, later: {"0": 3, "1": 3}}  # never the non-matching topic
    assert len(sink.rows()) == 10 + 6 + 1


def test_stream_data_loss_fails_or_skips(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 1)
    produce(bs, t, numbered(1, 0, 100))
    ckpt = tmp_path / "ckpt"
    sink = Batches()
    run_available_now(source(spark, bs, True, subscribe=t, startingOffsets="earliest"), ckpt, sink)
    produce(bs, t, numbered(1, 100, 200))
    admin = AdminClient({"bootstrap.servers": bs})
    for fut in admin.delete_records([KafkaTopicPartition(t, 0, 150)]).values():
        fut.result(30)

    strict = source(spark, bs, True, subscribe=t)
    q = (
        strict.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="failOnDataLoss"):
        q.awaitTermination(120)

    lenient = source(spark, bs, True, subscribe=t, failOnDataLoss="false")
    after = Batches()
    run_available_now(lenient, ckpt, after)
    assert sorted(o for _, o in after.rows()) == list(range(150, 200))


def test_stream_min_offsets_per_trigger_waits_for_data_or_delay(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 2)
    produce(bs, t, numbered(2, 0, 40))
    sink = Batches()
    began = time.monotonic()
    q = (
        source(
            spark,
            bs,
            True,
            subscribe=t,
            startingOffsets="earliest",
            minOffsetsPerTrigger="100",
            maxTriggerDelay="6s",
        )
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while not sink.rows() and time.monotonic() < deadline and q.isActive:
            time.sleep(0.1)
        # 40 < 100 offsets: no batch until maxTriggerDelay has passed since the start.
        assert len(sink.rows()) == 40, q.exception()
        assert time.monotonic() - began >= 6
        produce(bs, t, numbered(2, 40, 160))  # 120 more: enough for a batch of its own
        while len(sink.rows()) < 160 and time.monotonic() < deadline and q.isActive:
            time.sleep(0.1)
        assert sorted(sink.rows()) == sorted((i % 2, i // 2) for i in range(160))
        sizes = [len(rows) for _, rows in sink.batches if rows]
        assert sizes[0] == 40 and sizes[1] >= 100, sizes
    finally:
        q.stop()


def test_stream_progress_reports_offsets_behind_latest(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    t = unique_topic
    create_topic(bs, t, 2)
    produce(bs, t, numbered(2, 0, 1000))  # 500 per partition, all there before the start
    q = (
        source(spark, bs, True, subscribe=t, startingOffsets="earliest", maxOffsetsPerTrigger="100")
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        progress = None
        while time.monotonic() < deadline and q.isActive:
            progress = q.lastProgress
            if progress and progress["sources"] and progress["sources"][0].get("endOffset"):
                break
            time.sleep(0.2)
        assert progress is not None, q.exception()
    finally:
        q.stop()
    src = with_offsets_behind(progress)["sources"][0]
    consumed = json.loads(src["endOffset"])[t]
    assert json.loads(src["latestOffset"]) == {t: {"0": 500, "1": 500}}
    behind = [500 - consumed["0"], 500 - consumed["1"]]
    assert src["metrics"] == {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / 2),
    }
    assert max(behind) > 0  # the rate limit keeps the query behind
