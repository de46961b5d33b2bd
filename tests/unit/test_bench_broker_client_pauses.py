"""bench broker: the consuming kcat's own queue-full pauses are counted per round, and
``--consumer-set`` reaches kcat (docs/data-link.md, "The client's queue-full pause")."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.bench_broker import Phase, Runner, Series, client_pauses, consume_cmd, report

# librdkafka 2.16's `-d fetch` lines from a kcat consuming 1,000,000 x 100 B from three
# partitions of an Odradek gateway (2026-11-27): one pause (three partitions put off
# at once), then the broker-wide backoff and its remainder, which are not pauses of
# their own; a fetch error's backoff is not a queue-full pause either.
LOG = b"""\
%7|1795765343.484|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: Fetch 3/3/3 toppar(s)
%7|1795765343.485|BACKOFF|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: t-odradek [0]: Fetch backoff for 1000ms: Local: Queue full
%7|1795765343.485|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: Topic t-odradek [0] in state active at offset 0 (leader epoch 0) (111649/100000 msgs, 10903/65536 kb queued, opv 2) is not fetchable: queued.min.messages exceeded
%7|1795765343.485|BACKOFF|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: t-odradek [1]: Fetch backoff for 1000ms: Local: Queue full
%7|1795765343.485|BACKOFF|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: t-odradek [2]: Fetch backoff for 1000ms: Local: Queue full
%7|1795765343.485|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: Fetch backoff for 1000ms
%7|1795765344.068|FETCH|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: Fetch backoff for 416ms
%7|1795765344.101|BACKOFF|rdkafka#consumer-1| [thrd:127.0.0.1:43121/100]: 127.0.0.1:43121/100: t-odradek [1]: Fetch backoff for 500ms: Broker: Not leader for partition
"""


def test_one_pause_of_three_partitions_counts_once() -> None:
    assert client_pauses(LOG) == 1


def test_a_second_pause_counts_and_a_quiet_log_has_none() -> None:
    again = LOG.replace(b"1795765343.485", b"1795765345.201")
    assert client_pauses(LOG + again) == 2
    assert client_pauses(b"") == 0
    assert client_pauses(LOG.replace(b"Queue full", b"Queue fine")) == 0


def test_the_consumer_logs_its_fetches_and_takes_the_settings() -> None:
    cmd = consume_cmd("kcat", "127.0.0.1:9092", "t", 10, ["fetch.queue.backoff.ms=10"])
    assert cmd[cmd.index("-d") + 1] == "fetch"
    assert cmd[-2:] == ["-X", "fetch.queue.backoff.ms=10"]
    assert "-X" not in consume_cmd("kcat", "127.0.0.1:9092", "t", 10)


def test_the_table_says_which_rounds_paused_and_their_pace_without_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = argparse.Namespace(messages=1_000_000, size=100, rounds=3, partitions=3)
    runner = Runner("kcat", {}, Path("/nonexistent"), args)
    series = {
        # 100 MB in 0.5 s is 200 MB/s; the round that paused took 1.5 s.
        "odradek": Series(consume=[Phase(0.5, 0.2), Phase(1.5, 0.2, 1), Phase(0.625, 0.2)]),
        "tansu": Series(consume=[Phase(0.8, 0.3), Phase(0.8, 0.3), Phase(2.0, 0.3, 1)]),
    }
    report(series, runner, "1")
    rows = {line.split(" | ")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["| consume MB/s"] == "| consume MB/s | 160 | 125 | 1.28x | >= 1.0x |"
    assert rows["| consume rounds the client paused"] == (
        "| consume rounds the client paused | 1 of 3 | 1 of 3 | | |"
    )
    assert rows["| consume MB/s, rounds not paused"] == (
        "| consume MB/s, rounds not paused | 180 | 125 | 1.44x | |"
    )
