"""The access-log pipeline end to end on a real cluster: the generator CLI writes
nginx lines, the Spark job counts them per minute into Parquet and a summary
topic, and a job killed with SIGKILL mid-stream and restarted still leaves every
minute exactly once in both outputs, with no gaps."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.waiting import wait_until
from pipeline_kafka import read_all, run_generator
from pyspark.sql import SparkSession

from odradek.pipeline.jobs import access_log
from odradek.pipeline.logformat import parse_line
from odradek.pipeline.session import local_session
from odradek.pipeline.summaries import CountRow, build_summaries, minute_key
from odradek.pipeline.topic_batches import HEADER_BATCH, HEADER_SEQ
from odradek.tools.launcher import Cluster

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LOG_RATE = 20  # lines per second of log time: 1200 per minute
WATERMARK = timedelta(minutes=1)
TOP = 5


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield local_session("test-pipeline-access-log")


def generate(bs: str, topic: str, count: int, seed: int = 1) -> str:
    """``count`` lines of log time from START at LOG_RATE, as fast as they go."""
    return run_generator(
        bs,
        topic,
        *("--rate", "0", "--count", str(count), "--seed", str(seed)),
        *("--start-time", START.isoformat(), "--log-rate", str(LOG_RATE)),
    ).stdout


class Truth:
    """The counts the job must produce, computed from the input topic in Python."""

    def __init__(self, bs: str, topic: str) -> None:
        self.counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        latest = START
        lines = 0
        for m in read_all(bs, topic):
            p = parse_line(m.value.decode())
            assert p is not None
            lines += 1
            latest = max(latest, p.time)
            for dim, value in (("status", str(p.status)), ("path", p.path), ("client", p.client)):
                c = self.counts[(minute_key(p.minute), dim, value)]
                c[0] += 1
                c[1] += p.body_bytes_sent
        self.lines = lines
        watermark = latest - WATERMARK
        # Spark closes a minute once the watermark reaches its end.
        self.final_minutes = sorted(
            {
                k[0]
                for k in self.counts
                if datetime.fromisoformat(k[0]) + timedelta(minutes=1) <= watermark
            }
        )

    def final_counts(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        keep = set(self.final_minutes)
        return {k: (v[0], v[1]) for k, v in self.counts.items() if k[0] in keep}

    def summaries(self) -> dict[str, str]:
        rows: list[CountRow] = []
        by_group: dict[tuple[str, str], list[tuple[str, int, int]]] = defaultdict(list)
        for (minute, dim, value), (n, size) in self.final_counts().items():
            by_group[(minute, dim)].append((value, n, size))
        for (minute, dim), entries in by_group.items():
            entries.sort(key=lambda e: (-e[1], e[0]))
            for rank, (value, n, size) in enumerate(entries, 1):
                rows.append(
                    CountRow(
                        datetime.fromisoformat(minute), dim, value, n, size, rank, len(entries)
                    )
                )
        return {s.key: s.to_json() for s in build_summaries(rows, TOP)}


def check_outputs(
    spark: SparkSession, truth: Truth, bs: str, summary_topic: str, output: Path
) -> None:
    """Every final minute exactly once in Parquet and in the summary topic."""
    assert len(truth.final_minutes) >= 5
    table = spark.read.parquet(str(output / access_log.COUNTS_TABLE))
    rows = table.selectExpr(
        "cast(minute as long) as minute_s", "dimension", "value", "requests", "bytes", "batch_id"
    ).collect()
    keys = [
        (minute_key(datetime.fromtimestamp(r.minute_s, UTC)), r.dimension, r.value) for r in rows
    ]
    dupes = [k for k, n in Counter(keys).items() if n > 1]
    assert not dupes, f"duplicate rows in Parquet: {dupes[:5]}"
    got = {k: (r.requests, r.bytes) for k, r in zip(keys, rows, strict=True)}
    assert got == truth.final_counts()

    records = read_all(bs, summary_topic)
    minutes = [m.required_key().decode() for m in records]
    assert minutes == truth.final_minutes, "summary topic: gaps, duplicates or disorder"
    expected = truth.summaries()
    for m in records:
        assert m.value.decode() == expected[m.required_key().decode()]
    tags = [(int(m.header(HEADER_BATCH)), int(m.header(HEADER_SEQ))) for m in records]
    assert tags == sorted(tags) and len(set(tags)) == len(tags)
    # Minutes of one batch went to Parquet under that batch's directory.
    batch_of_minute = {
        minute_key(datetime.fromtimestamp(r.minute_s, UTC)): r.batch_id for r in rows
    }
    assert [batch_of_minute[k] for k in minutes] == [b for b, _ in tags]


def job_args(bs: str, topic: str, summary: str, tmp: Path, *extra: str) -> list[str]:
    return [
        "--bootstrap-server",
        bs,
        "--topic",
        topic,
        "--checkpoint",
        str(tmp / "ckpt"),
        "--output",
        str(tmp / "out"),
        "--summary-topic",
        summary,
        "--top",
        str(TOP),
        "--watermark",
        "1 minute",
        *extra,
    ]


def test_generator_writes_combined_log_lines(cluster: Cluster, unique_topic: str) -> None:
    bs = cluster.bootstrap_servers
    out = generate(bs, unique_topic, 3000)
    assert "sent 3000 lines" in out.splitlines()[-1]
    msgs = read_all(bs, unique_topic)
    assert len(msgs) == 3000
    assert {m.partition for m in msgs} == {0, 1, 2}  # created with the seed's 3 partitions
    parsed = [parse_line(m.value.decode()) for m in msgs]
    assert all(p is not None for p in parsed)
    times = sorted(p.time for p in parsed if p)
    assert times[0] == START and times[-1] == START + timedelta(seconds=2999 // LOG_RATE)
    # A rate-limited run takes the time its rate says.
    began = time.monotonic()
    run_generator(bs, unique_topic, "--rate", "400", "--count", "800", timeout=60)
    assert 1.5 <= time.monotonic() - began < 20


@pytest.mark.slow  # tens of seconds: in make test-slow, which CI runs
def test_access_log_job_end_to_end(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    summary = f"{unique_topic}-summary"
    generate(bs, unique_topic, 9000)  # 7.5 minutes of traffic
    lines: list[str] = []
    args = access_log.parse_args(
        job_args(
            bs,
            unique_topic,
            summary,
            tmp_path,
            "--trigger-available-now",
            "--max-offsets-per-trigger",
            "4000",
        )
    )
    q = access_log.start(spark, args, lines.append)
    assert q.awaitTermination(300)
    assert q.exception() is None
    assert any("minute summaries" in line for line in lines)
    truth = Truth(bs, unique_topic)
    assert truth.lines == 9000
    check_outputs(spark, truth, bs, summary, tmp_path / "out")


def _run_job(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "odradek.pipeline.jobs.access_log", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: the JVM dies with it
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)

    def gone() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False

    # Wait until the whole group (the JVM too) is gone before a restart.
    wait_until(gone, "the job's processes to die of SIGKILL", timeout=30, interval=0.1)


def _commits(tmp: Path) -> int:
    d = tmp / "ckpt" / "commits"
    return len([p for p in d.glob("[0-9]*")]) if d.exists() else 0


@pytest.mark.slow
def test_access_log_job_killed_and_restarted_is_exactly_once(
    spark: SparkSession, cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    summary = f"{unique_topic}-summary"
    generate(bs, unique_topic, 24000)  # 20 minutes of traffic
    log = tmp_path / "job.log"
    env = {k: v for k, v in os.environ.items() if k != access_log.CRASH_ENV}
    base = job_args(
        bs,
        unique_topic,
        summary,
        tmp_path,
        "--max-offsets-per-trigger",
        "3000",
        "--trigger-interval",
        "1 second",
    )

    # 1. The job kills itself (SIGKILL) with half of a batch's summaries published.
    first = _run_job(base, {**env, access_log.CRASH_ENV: "mid-summary@2"}, log)
    assert first.wait(timeout=240) == -signal.SIGKILL, log.read_text()[-3000:]
    _kill_group(first)
    published = read_all(bs, summary)
    assert published, log.read_text()[-3000:]
    last_batch = int(published[-1].header(HEADER_BATCH))
    assert _commits(tmp_path) == last_batch  # that batch never committed: it will be replayed

    # 2. Killed from outside in a later batch, once its Parquet is out (likely
    #    before its summaries or its commit).
    second = _run_job(base, env, log)
    parquet = tmp_path / "out" / access_log.COUNTS_TABLE

    def later_batch_written() -> bool:
        assert second.poll() is None, log.read_text()[-3000:]
        done = _commits(tmp_path)
        return done > last_batch and (parquet / f"batch_id={done}").exists()

    wait_until(later_batch_written, "a later batch's Parquet", timeout=240, interval=0.01)
    _kill_group(second)

    # 3. Restarted once more, it finishes what is there.
    third = _run_job([*base, "--trigger-available-now"], env, log)
    assert third.wait(timeout=300) == 0, log.read_text()[-3000:]
    _kill_group(third)

    truth = Truth(bs, unique_topic)
    assert truth.lines == 24000
    check_outputs(spark, truth, bs, summary, tmp_path / "out")
    # The replay of the half-published batch completed it instead of repeating it.
    text = log.read_text()
    replay = re.search(
        rf"^batch {last_batch}: parquet already there, (\d+) minute summaries "
        r"\((\d+) already published, (\d+) written\)$",
        text,
        re.MULTILINE,
    )
    assert replay, text[-3000:]
    planned, present, written = map(int, replay.groups())
    assert present == planned // 2 and written == planned - present and present >= 1
