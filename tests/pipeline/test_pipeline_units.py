"""The pipeline's pure parts: Spark-compatible options, offset JSON and range
planning, rate limiting, the nginx log format, traffic model and summaries."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer
from helpers import fetch_answers
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from odradek.pipeline.arrow_producer import murmur2_partitions
from odradek.pipeline.batch_encoder import encode_batch
from odradek.pipeline.kafka_properties import translate_consumer, translate_producer
from odradek.pipeline.logformat import (
    COMBINED_REGEX,
    AccessLogEntry,
    format_line,
    format_time_local,
    parse_line,
    request_path,
)
from odradek.pipeline.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    OptionError,
    SpecificOffsets,
    SpecificTimestamps,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)
from odradek.pipeline.pyfiles import build
from odradek.pipeline.record_columns import decode_records
from odradek.pipeline.schema import arrow_schema, source_schema
from odradek.pipeline.sink_columns import sink_columns
from odradek.pipeline.source_metrics import offsets_behind, with_offsets_behind
from odradek.pipeline.spark_offsets import (
    OffsetRange,
    from_json,
    plan_ranges,
    rate_limit,
    to_json,
)
from odradek.pipeline.summaries import CountRow, build_summaries, minute_key
from odradek.pipeline.traffic import TrafficModel
from odradek.records import (
    BatchBuilder,
    ControlRecordType,
    decode_batches,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # record timestamps are ms since this


# -- options ---------------------------------------------------------------------------


def test_source_defaults_follow_spark() -> None:
    batch = parse_source_options({**BS, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert isinstance(batch.starting, Earliest) and isinstance(batch.ending, Latest)
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.group_id_prefix == "spark-kafka-relation"
    stream = parse_source_options({**BS, "subscribePattern": "t-.*"}, streaming=True)
    assert isinstance(stream.starting, Latest)
    assert stream.group_id_prefix == "spark-kafka-source"


def test_options_are_case_insensitive_and_pass_kafka_settings() -> None:
    opts = parse_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "Subscribe": "t",
            "maxOffsetsPerTrigger": "10",
            "INCLUDEHEADERS": "true",
            "failOnDataLoss": "false",
            "kafka.security.protocol": "PLAINTEXT",
            "minPartitions": "4",
        },
        streaming=True,
    )
    assert opts.bootstrap_servers == "h:1"
    assert opts.max_offsets_per_trigger == 10 and opts.min_partitions == 4
    assert opts.include_headers and not opts.fail_on_data_loss
    assert opts.kafka_params == {"bootstrap.servers": "h:1", "security.protocol": "PLAINTEXT"}


def test_offset_specs_and_timestamp_precedence() -> None:
    spec = {"t": {"0": 23, "1": -2}}
    opts = parse_source_options(
        {**BS, "subscribe": "t", "startingOffsets": json.dumps(spec)}, streaming=False
    )
    assert opts.starting == SpecificOffsets({("t", 0): 23, ("t", 1): -2})
    opts = parse_source_options(
        {
            **BS,
            "assign": '{"t":[1,0]}',
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"t":{"0":5,"1":6}}',
            "startingTimestamp": "1000",
        },
        streaming=True,
    )
    assert opts.subscription.partitions == (("t", 0), ("t", 1))
    assert opts.starting == GlobalTimestamp(1000)
    opts = parse_source_options(
        {**BS, "subscribe": "t", "endingOffsetsByTimestamp": '{"t":{"0":5}}'}, streaming=False
    )
    assert opts.ending == SpecificTimestamps({("t", 0): 5})


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "t"}, False, "kafka.bootstrap.servers"),
        ({**BS}, False, "Exactly one of"),
        ({**BS, "subscribe": "t", "subscribePattern": "t"}, False, "Exactly one of"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, False, "can't be latest"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "can't be latest"),
        ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, False, "can't be earliest"),
        ({**BS, "subscribe": "t", "endingOffsets": "latest"}, True, "not valid in streaming"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, True, "startingOffsets"),
        ({**BS, "subscribe": "t", "kafka.enable.auto.commit": "true"}, True, "not supported"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
        ({**BS, "subscribe": "t", "includeHeaders": "yes"}, True, "true or false"),
        ({**BS, "subscribe": "t", "startingOffsets": "{bad"}, True, "JSON"),
        ({**BS, "assign": "[0]"}, True, "assign"),
        ({**BS, "subscribe": "t", "maxBytesPerTrigger": "5"}, True, "not supported"),
        ({**BS, "subscribePattern": "t-(["}, True, "not a valid regular expression"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "5"}, False, "only valid in streaming"),
        (
            {**BS, "subscribe": "t", "maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"},
            True,
            "must not exceed",
        ),
        ({**BS, "subscribe": "t", "maxTriggerDelay": "soon"}, True, "duration"),
        ({**BS, "subscribe": "t", "fetchOffset.numRetries": "-1"}, True, "non-negative"),
        ({**BS, "subscribe": "t", "kafka.partitioner.class": "x.Y"}, True, "Java partitioner"),
        ({**BS, "subscribe": "t", "kafka.ssl.truststore.location": "/t.jks"}, True, "keytool"),
        (
            {**BS, "subscribe": "t", "kafka.sasl.jaas.config": "com.x.Custom required;"},
            True,
            "no librdkafka equivalent",
        ),
    ],
)
def test_invalid_source_options_fail_like_spark(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_source_options(options, streaming=streaming)


def test_sink_options() -> None:
    opts = parse_sink_options({**BS, "topic": " out "})
    assert opts.topic == "out" and not opts.exactly_once
    assert parse_sink_options(BS).topic is None
    with pytest.raises(OptionError, match="producer"):
        parse_sink_options({"topic": "x"})
    with pytest.raises(OptionError, match="deliveryGuarantee=exactly-once"):
        parse_sink_options({**BS, "kafka.transactional.id": "x"})
    eos = parse_sink_options(
        {**BS, "deliveryGuarantee": "EXACTLY_ONCE", "transactionalIdPrefix": "q1"}
    )
    assert eos.exactly_once and eos.transactional_id_prefix == "q1"
    with pytest.raises(OptionError, match="transactionalIdPrefix"):
        parse_sink_options({**BS, "deliveryGuarantee": "exactly-once"})
    with pytest.raises(OptionError, match="acks=all"):
        parse_sink_options(
            {
                **BS,
                "deliveryGuarantee": "exactly-once",
                "transactionalIdPrefix": "q",
                "kafka.acks": "1",
            }
        )
    with pytest.raises(OptionError, match="needs deliveryGuarantee"):
        parse_sink_options({**BS, "transactionalIdPrefix": "q"})
    with pytest.raises(OptionError, match="at-least-once or exactly-once"):
        parse_sink_options({**BS, "deliveryGuarantee": "twice"})


def test_streaming_trigger_options() -> None:
    opts = parse_source_options(
        {
            **BS,
            "subscribe": "t",
            "minOffsetsPerTrigger": "100",
            "maxTriggerDelay": "30s",
            "fetchOffset.numRetries": "0",
            "fetchOffset.retryIntervalMs": "250",
        },
        streaming=True,
    )
    assert opts.min_offsets_per_trigger == 100 and opts.max_trigger_delay_ms == 30_000
    assert opts.fetch_offset_retries == 0 and opts.fetch_offset_retry_interval_ms == 250
    defaults = parse_source_options({**BS, "subscribe": "t"}, streaming=True)
    assert defaults.max_trigger_delay_ms == 15 * 60_000  # Spark's default
    assert (defaults.fetch_offset_retries, defaults.fetch_offset_retry_interval_ms) == (3, 1000)
    assert [parse_duration_ms("d", v) for v in ("500ms", "2 minutes", "1h", "7")] == [
        500,
        120_000,
        3_600_000,
        7,
    ]


# -- Java client property names ---------------------------------------------------------


def test_java_property_names_are_translated() -> None:
    consumer = translate_consumer(
        {
            "bootstrap.servers": "h:1",
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="alice" password="p\\"w";'
            ),
            "sasl.mechanism": "SCRAM-SHA-512",
            "fetch.max.wait.ms": "50",
            "receive.buffer.bytes": "65536",
            "ssl.truststore.location": "/etc/ca.pem",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.password": "ignored",
            "ssl.keystore.location": "/etc/me.p12",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": "secret",
            "ssl.endpoint.identification.algorithm": "",
            "max.poll.records": "500",
        }
    )
    assert consumer == {
        "bootstrap.servers": "h:1",
        "sasl.username": "alice",
        "sasl.password": 'p"w',
        "sasl.mechanisms": "SCRAM-SHA-512",
        "fetch.wait.max.ms": "50",
        "socket.receive.buffer.bytes": "65536",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.keystore.location": "/etc/me.p12",
        "ssl.keystore.password": "secret",
        "ssl.endpoint.identification.algorithm": "none",
    }
    producer = translate_producer(
        {
            "bootstrap.servers": "h:1",
            "max.request.size": "5000000",
            "buffer.memory": "33554433",
            "max.block.ms": "1000",
            "acks": "1",
        }
    )
    assert producer == {
        "bootstrap.servers": "h:1",
        "message.max.bytes": "5000000",
        "queue.buffering.max.kbytes": "32769",
        "acks": "1",
        "enable.idempotence": "false",  # acks=1 turns the default idempotence off (KIP-679)
    }
    with pytest.raises(ValueError, match=r"Must set kafka\.acks to all"):
        translate_producer({"acks": "1", "enable.idempotence": "true"})
    kerberos = translate_consumer(
        {
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useKeyTab=true keyTab="/k.keytab" principal="spark@EX.COM";'
        }
    )
    assert kerberos == {
        "sasl.kerberos.keytab": "/k.keytab",
        "sasl.kerberos.principal": "spark@EX.COM",
        "sasl.mechanisms": "GSSAPI",
    }
    oauth = translate_producer(
        {
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
            'OAuthBearerLoginModule required clientId="c" clientSecret="s" scope="kafka";',
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        }
    )
    assert oauth["sasl.oauthbearer.method"] == "oidc" and oauth["sasl.oauthbearer.client.id"] == "c"
    assert oauth["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    with pytest.raises(ValueError, match="PKCS12"):
        translate_producer({"ssl.keystore.location": "/k.jks"})


def test_translated_names_are_librdkafka_properties() -> None:
    """librdkafka refuses unknown property names when a client is built."""
    common = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}
    consumer = translate_consumer(
        {"fetch.max.wait.ms": "50", "receive.buffer.bytes": "65536", "send.buffer.bytes": "65536"}
    )
    Consumer({**common, **consumer, "group.id": "g"}).close()
    producer = translate_producer(
        {
            "max.request.size": "5000000",
            "buffer.memory": "33554432",
            "acks": "1",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
        }
    )
    producer.pop("ssl.ca.pem")  # a real PEM is parsed at construction
    Producer({**common, **producer}).flush(0)


def test_sink_accepts_headers_of_any_nullability() -> None:
    def headers(contains_null: bool, key_nullable: bool, value_nullable: bool) -> ArrayType:
        return ArrayType(
            StructType(
                [
                    StructField("key", StringType(), key_nullable),
                    StructField("value", BinaryType(), value_nullable),
                ]
            ),
            contains_null,
        )

    for flags in itertools.product((True, False), repeat=3):
        schema = StructType(
            [StructField("value", StringType()), StructField("headers", headers(*flags), False)]
        )
        assert sink_columns(schema, "t").headers == "headers"
    bad = StructType(
        [
            StructField("value", StringType()),
            StructField("headers", ArrayType(StructType([StructField("k", StringType())]))),
        ]
    )
    with pytest.raises(OptionError, match="headers attribute type"):
        sink_columns(bad, "t")


def test_offsets_behind_latest_is_sparks_formula() -> None:
    source = {
        "endOffset": json.dumps({"t": {"0": 10, "1": 40}, "u": {"0": 5}}),
        "latestOffset": json.dumps({"t": {"0": 25, "1": 40}, "u": {"0": 9}}),
        "metrics": {},
    }
    assert offsets_behind(source) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "15",
        "avgOffsetsBehindLatest": str(19 / 3),
    }
    progress = with_offsets_behind({"sources": [source, {"endOffset": None}]})
    assert progress["sources"][0]["metrics"]["maxOffsetsBehindLatest"] == "15"
    assert progress["sources"][1]["metrics"] == {}


# -- offsets and planning -------------------------------------------------------------


def test_offset_json_is_sparks_layout_and_sorted() -> None:
    offsets = {("b", 10): 5, ("a", 2): 7, ("b", 9): 1, ("a", 10): 0}
    doc = to_json(offsets)
    assert json.dumps(doc) == '{"a": {"2": 7, "10": 0}, "b": {"9": 1, "10": 5}}'
    assert from_json(json.loads(json.dumps(doc))) == offsets
    assert from_json(None) == {}
    with pytest.raises(ValueError):
        from_json({"t": {"0": "x"}})


def test_plan_ranges_one_per_partition_and_skips_empty() -> None:
    start = {("t", 0): 0, ("t", 1): 5, ("t", 2): 9}
    end = {("t", 0): 10, ("t", 1): 5, ("t", 2): 4, ("u", 0): 3}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 10)]


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=8),
    min_partitions=st.integers(min_value=1, max_value=40),
    max_records=st.one_of(st.none(), st.integers(min_value=1, max_value=3000)),
)
def test_plan_ranges_splits_cover_exactly(
    sizes: list[int], min_partitions: int, max_records: int | None
) -> None:
    start = {("t", i): 100 * i for i in range(len(sizes))}
    end = {("t", i): 100 * i + n for i, n in enumerate(sizes)}
    ranges = plan_ranges(
        start, end, min_partitions=min_partitions, max_records_per_partition=max_records
    )
    total = sum(sizes)
    # Exact cover: per partition, contiguous, in order, from start to end.
    for i, n in enumerate(sizes):
        mine = [r for r in ranges if r.partition == i]
        if n == 0:
            assert not mine
            continue
        assert mine[0].start == start[("t", i)] and mine[-1].end == end[("t", i)]
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        assert all(r.size > 0 for r in mine)
    if max_records:
        assert all(r.size <= max_records for r in ranges)
    assert len(ranges) >= min(min_partitions, total)


@given(
    lags=st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=6),
    limit=st.integers(min_value=0, max_value=30_000),
)
def test_rate_limit_admits_exactly_the_limit(lags: list[int], limit: int) -> None:
    start = {("t", i): 1000 for i in range(len(lags))}
    latest = {("t", i): 1000 + n for i, n in enumerate(lags)}
    end = rate_limit(start, latest, limit)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)
    assert sum(end[tp] - start[tp] for tp in latest) == min(limit, sum(lags))
    assert end == rate_limit(start, latest, limit)  # deterministic


def test_rate_limit_is_proportional_to_lag() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    end = rate_limit(start, {("t", 0): 900, ("t", 1): 100}, 100)
    assert end == {("t", 0): 90, ("t", 1): 10}


# -- nginx combined format --------------------------------------------------------------


def test_seed_style_line_parses() -> None:
    line = (
        '203.0.113.7 - alice [11/Oct/2019:20:07:31 +0800] "GET /api/v1/items?page=2 HTTP/1.1" '
        '200 5316 "https://shop.example.com/" "Mozilla/5.0 (X11; Linux x86_64)"'
    )
    p = parse_line(line)
    assert p is not None
    assert (p.client, p.user, p.status, p.body_bytes_sent) == ("203.0.113.7", "alice", 200, 5316)
    assert p.path == "/api/v1/items"
    assert p.time == datetime(2019, 10, 11, 20, 7, 31, tzinfo=timezone(timedelta(hours=8)))
    assert p.minute == datetime(2019, 10, 11, 12, 7, tzinfo=UTC)
    assert parse_line("not a log line") is None
    assert parse_line(line.replace("11/Oct/2019", "99/Foo/2019")) is None


def test_format_parse_round_trip_with_quotes_and_dashes() -> None:
    e = AccessLogEntry(
        remote_addr="2001:db8::1",
        time=datetime(2024, 2, 29, 23, 59, 59, tzinfo=timezone(timedelta(hours=-7, minutes=-30))),
        method="POST",
        uri='/search?q="x"',
        status=404,
        body_bytes_sent=0,
        referer="",
        user_agent='agent "quoted"',
    )
    line = format_line(e)
    assert "[29/Feb/2024:23:59:59 -0730]" in line and '"-"' in line and "\\x22" in line
    p = parse_line(line)
    assert p is not None
    assert (p.client, p.status, p.path, p.referer) == ("2001:db8::1", 404, "/search", "-")
    assert p.time == e.time
    assert request_path("-") == "-"
    assert (
        format_time_local(datetime(2024, 1, 5, 1, 2, 3, tzinfo=UTC)) == "05/Jan/2024:01:02:03 +0000"
    )


def test_traffic_model_is_seeded_and_plausible() -> None:
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    a = [format_line(TrafficModel(seed=7).entry(t0)) for _ in range(1)]
    m1, m2 = TrafficModel(seed=7), TrafficModel(seed=7)
    lines1 = [format_line(m1.entry(t0)) for _ in range(2000)]
    lines2 = [format_line(m2.entry(t0)) for _ in range(2000)]
    assert lines1 == lines2 and lines1[0] == a[0]
    parsed = [parse_line(x) for x in lines1]
    assert all(
        p is not None and re.match(COMBINED_REGEX, x) for p, x in zip(parsed, lines1, strict=True)
    )
    statuses = {p.status for p in parsed if p}
    assert {200, 304, 404} <= statuses
    clients = [p.client for p in parsed if p]
    top = max(set(clients), key=clients.count)
    assert clients.count(top) > len(clients) / 50  # a heavy hitter, Zipf-like


# -- summaries ------------------------------------------------------------------------------


def test_build_summaries_orders_and_limits() -> None:
    m0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    m1 = m0 + timedelta(minutes=1)
    rows = [
        CountRow(m1, "status", "200", 3, 30, 1, 1),
        CountRow(m0, "status", "404", 1, 5, 2, 2),
        CountRow(m0, "status", "200", 4, 40, 1, 2),
        CountRow(m0, "path", "/b", 2, 0, 2, 3),
        CountRow(m0, "path", "/a", 2, 0, 1, 3),
        CountRow(m0, "path", "/c", 1, 0, 3, 3),
        CountRow(m0, "client", "1.1.1.1", 5, 0, 1, 1),
    ]
    s0, s1 = build_summaries(rows, top=2)
    assert s0.key == "2024-05-01T12:00:00Z" and s1.key == "2024-05-01T12:01:00Z"
    assert (s0.requests, s0.bytes, s0.status) == (5, 45, {"200": 4, "404": 1})
    assert s0.top_paths == [("/a", 2), ("/b", 2)] and s0.distinct_paths == 3
    assert s0.top_clients == [("1.1.1.1", 5)] and s0.distinct_clients == 1
    doc = json.loads(s0.to_json())
    assert doc["top_paths"] == [["/a", 2], ["/b", 2]] and doc["status"] == {"200": 4, "404": 1}
    assert s0.end_ms == int(m1.timestamp() * 1000)
    assert build_summaries(reversed(rows), top=2)[0].to_json() == s0.to_json()
    assert minute_key(datetime(2024, 5, 1, 12, 0)) == "2024-05-01T12:00:00Z"


# -- packaging for spark-submit --py-files ------------------------------------------------


def test_pyfiles_zip_is_importable_on_its_own(tmp_path: Path) -> None:
    out = tmp_path / "odradek_pipeline.zip"
    names = build(out)
    assert (
        "odradek/pipeline/datasource.py" in names and "odradek/pipeline/jobs/access_log.py" in names
    )
    shipped = ("odradek/pipeline/", "odradek/protocol/", "odradek/records/")
    assert not [n for n in names if not n.startswith(shipped) and n != "odradek/__init__.py"]
    assert "odradek/records/compression.py" in names and "odradek/protocol/messages.py" in names
    extensions = [n for n in names if n.startswith("odradek/records/_columns.")]
    assert extensions and extensions[0].endswith(tuple(EXTENSION_SUFFIXES))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import odradek.pipeline.datasource as d, odradek.pipeline.jobs.access_log as j;"
        "import odradek.pipeline.partition_fetcher;"
        "from odradek.pipeline import record_columns as r, batch_encoder as b;"
        "print(d.__file__); print(j.__file__); print(d.OdradekDataSource.name());"
        "print(r._columns.__file__); print(b._columns is r._columns)"
    )
    for _ in range(2):  # the second run loads the copy the first one left
        res = subprocess.run(
            [sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=60
        )
        assert res.returncode == 0, res.stderr
        ds_file, job_file, name, native, shared = res.stdout.split()
        assert ds_file.startswith(str(out)) and job_file.startswith(str(out)) and name == "odradek"
        # The C record walk, loaded from the zip's copy (zipimport cannot load it).
        assert "odradek-native-" in native and shared == "True"


def test_pyfiles_runs_where_an_odradek_folder_shadows_the_install(tmp_path: Path) -> None:
    """From a directory holding a folder named ``odradek`` (a clone of the repository),
    ``odradek`` resolves to that folder as a namespace package without ``__file__``."""
    (tmp_path / "odradek").mkdir()
    res = subprocess.run(
        [sys.executable, "-m", "odradek.pipeline.pyfiles", "--output", "out.zip"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out.zip").stat().st_size > 0 and "wrote out.zip" in res.stdout


# -- record batches to Arrow columns ---------------------------------------------------------


@settings(deadline=None, max_examples=60)  # numpy/Arrow start-up varies on a busy machine
@given(
    batches=fetch_answers.batches(max_records=40, max_batches=5, min_delta=0),
    cut=st.integers(min_value=0, max_value=60),
    window=st.tuples(st.integers(0, 30), st.integers(0, 300)),
)
def test_record_batches_decode_column_wise_like_the_batch_decoder(
    batches: list[fetch_answers.Batch],
    cut: int,
    window: tuple[int, int],
) -> None:
    """Decoded columns equal what Odradek's reference decoder reads from the same bytes,
    across codecs, null keys/values, headers, LogAppendTime, control batches, offset
    gaps and a last batch cut short (as a Fetch size limit leaves it)."""
    schema = arrow_schema(source_schema(True))
    wire = fetch_answers.fetch_answer(batches, marker=ControlRecordType.COMMIT)
    cut_wire = wire[: max(0, len(wire) - cut)]
    expected = (
        [r for b in decode_batches(cut_wire) if not b.is_control for r in b.records]
        if cut_wire
        else []
    )
    start, end = 5 + window[0], 5 + window[0] + window[1]
    want = [r for r in expected if start <= r.offset < end]
    chunk = decode_records(memoryview(cut_wire), 5, start, end, "t", 3, schema, True)
    got = chunk.batch.to_pylist() if chunk.batch is not None else []
    assert [g["offset"] for g in got] == [r.offset for r in want]
    for g, r in zip(got, want, strict=True):
        assert (g["key"], g["value"], g["topic"], g["partition"]) == (r.key, r.value, "t", 3)
        # Exact: timestamp() is a float, and 2187855152.581 * 1000 is 2187855152580.9998.
        assert (g["timestamp"] - _EPOCH) // timedelta(milliseconds=1) == r.timestamp
        assert g["headers"] == ([{"key": k, "value": v} for k, v in r.headers] or None)
    log_append_offsets = (
        {r.offset for b in decode_batches(cut_wire) if b.timestamp_type == 1 for r in b.records}
        if cut_wire
        else set()
    )
    assert [g["timestampType"] for g in got] == [
        1 if g["offset"] in log_append_offsets else 0 for g in got
    ]
    whole = [b for b in decode_batches(cut_wire)] if cut_wire else []
    assert chunk.next_offset == (max((b.last_offset + 1 for b in whole), default=5))


@settings(deadline=None, max_examples=60)  # numpy/Arrow start-up varies on a busy machine
@given(
    rows=st.lists(
        st.tuples(st.none() | st.binary(max_size=200), st.none() | st.binary(max_size=2000)),
        min_size=1,
        max_size=300,
    ),
    as_text=st.booleans(),
)
def test_arrow_columns_encode_to_a_batch_the_reference_decoder_reads(
    rows: list[tuple[bytes | None, bytes | None]], as_text: bool
) -> None:
    keys = pa.array([k for k, _ in rows], pa.binary())
    values = pa.array([v for _, v in rows], pa.binary())
    if as_text:  # string columns are written as their UTF-8 bytes
        keys = pa.array([None if k is None else k.hex() for k, _ in rows], pa.string())
        rows = [(None if k is None else k.hex().encode(), v) for k, v in rows]
    wire = encode_batch(
        keys,
        values,
        timestamp_ms=1_700_000_000_123,
        producer_id=9,
        producer_epoch=2,
        base_sequence=40,
    )
    (batch,) = decode_batches(wire)  # verifies the CRC-32C
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 40)
    assert batch.record_count == len(rows)
    assert [(r.key, r.value) for r in batch.records] == rows
    assert {r.timestamp for r in batch.records} == {1_700_000_000_123}


@settings(deadline=None, max_examples=60)  # numpy/Arrow start-up varies on a busy machine
@given(keys=st.lists(st.binary(max_size=64), min_size=1, max_size=200), n=st.integers(1, 50))
def test_key_partitions_are_the_java_clients(keys: list[bytes], n: int) -> None:
    got = murmur2_partitions(pa.array(keys, pa.binary()), n).tolist()
    assert got == [(murmur2(k) & 0x7FFFFFFF) % n for k in keys]


def test_records_of_one_size_decode_on_the_fast_path_too() -> None:
    """60 records of one encoded size: their starts are predicted and checked at once."""
    schema = arrow_schema(source_schema(False))
    builder = BatchBuilder(base_offset=100)
    for i in range(60):
        builder.append(1_700_000_000_000, b"k%02d" % i, b"v" * 40)
    wire = builder.build()
    chunk = decode_records(memoryview(wire), 100, 100, 200, "t", 0, schema, False)
    assert chunk.batch is not None and chunk.next_offset == 160
    assert chunk.batch.column("key").to_pylist() == [b"k%02d" % i for i in range(60)]
    assert chunk.batch.column("offset").to_pylist() == list(range(100, 160))
