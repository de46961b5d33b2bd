"""The pipeline's pure parts: Spark-compatible options, offset JSON and range
planning, rate limiting, the nginx log format, traffic model and summaries."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    parse_sink_options,
    parse_source_options,
)
from odradek.pipeline.pyfiles import build
from odradek.pipeline.spark_offsets import (
    OffsetRange,
    from_json,
    plan_ranges,
    rate_limit,
    to_json,
)
from odradek.pipeline.summaries import CountRow, build_summaries, minute_key
from odradek.pipeline.traffic import TrafficModel

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


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
        ({**BS, "subscribe": "t", "minOffsetsPerTrigger": "5"}, True, "not supported"),
    ],
)
def test_invalid_source_options_fail_like_spark(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        parse_source_options(options, streaming=streaming)


def test_sink_options() -> None:
    opts = parse_sink_options({**BS, "topic": " out "})
    assert opts.topic == "out"
    assert parse_sink_options(BS).topic is None
    with pytest.raises(OptionError, match="producer"):
        parse_sink_options({"topic": "x"})
    with pytest.raises(OptionError, match="transactional"):
        parse_sink_options({**BS, "kafka.transactional.id": "x"})


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
    assert not [
        n for n in names if not n.startswith("odradek/pipeline/") and n != "odradek/__init__.py"
    ]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import odradek.pipeline.datasource as d, odradek.pipeline.jobs.access_log as j;"
        "print(d.__file__); print(j.__file__); print(d.OdradekDataSource.name())"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    ds_file, job_file, name = res.stdout.split()
    assert ds_file.startswith(str(out)) and job_file.startswith(str(out)) and name == "odradek"
