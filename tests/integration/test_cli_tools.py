"""The console tools as a user runs them: ``python -m odradek topics|produce|consume``.

Every tool run is a real subprocess talking to a real cluster started with
``odradek.tools.launcher.Cluster`` (controller, storage node, group services and gateway as
processes on 127.0.0.1); ``odradek up`` itself is run once, as a user runs it. Set ``ODRADEK_TEST_BOOTSTRAP=host:port`` to aim the same tests at another
Kafka-compatible broker instead: the tools are plain Kafka clients.

The pure parts (line parsing, record formatting, perf-test lines, config lists) are
tested directly at the end of the file.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.waiting import wait_until

from odradek.tools.common import DEFAULT_BOOTSTRAP_SERVER, default_bootstrap_servers
from odradek.tools.launcher import Cluster
from odradek.tools.perf_stats import ProducerStats
from odradek.tools.record_format import LineFormat, MessageFormat, RecordFormatError
from odradek.tools.topics import parse_add_config, split_config_list, topic_id_text

TOOL_TIMEOUT = 60
PERF_SUMMARY = re.compile(
    r"^20000 records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, "
    r"\d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)
PERF_WINDOW = re.compile(
    r"^\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, "
    r"\d+\.\d ms max latency\.$"
)
PARTITION_LINE = re.compile(
    r"^\tTopic: (\S+)\tPartition: (\d+)\tLeader: (\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)$"
)


@dataclass
class Env:
    bootstrap: str
    cwd: Path  # holds data/cluster.json, so tools find the cluster without --bootstrap-server


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, module_cluster_factory: Callable[..., Cluster]
) -> Env:
    work = tmp_path_factory.mktemp("cli")
    external = os.environ.get("ODRADEK_TEST_BOOTSTRAP")
    if external:
        (work / "data").mkdir()
        (work / "data" / "cluster.json").write_text(json.dumps({"bootstrap_servers": external}))
        return Env(external, work)
    cluster = module_cluster_factory(settings={"auto.create.topics.enable": "false"})
    (work / "data").mkdir()
    (work / "data" / "cluster.json").write_text(cluster.cluster_file.read_text())
    return Env(cluster.bootstrap_servers, work)


def odradek(
    env: Env,
    *args: str,
    stdin: str | bytes | None = None,
    bootstrap: bool = True,
    timeout: float = TOOL_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "odradek", *args]
    if bootstrap:
        cmd += ["--bootstrap-server", env.bootstrap]
    data = stdin.decode() if isinstance(stdin, bytes) else stdin
    return subprocess.run(
        cmd,
        input=data if data is not None else "",
        capture_output=True,
        text=True,
        cwd=env.cwd,
        timeout=timeout,
    )


def fresh_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(env: Env, topic: str, partitions: int = 1, *extra: str) -> None:
    result = odradek(
        env, "topics", "create", "--topic", topic, "--partitions", str(partitions), *extra
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Created topic {topic}.\n"


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """Errors are a single line on stderr and a non-zero exit, never a traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def describe(env: Env, topic: str) -> tuple[str, list[re.Match[str]]]:
    result = odradek(env, "topics", "describe", "--topic", topic)
    assert result.returncode == 0, result.stderr
    header, *rest = result.stdout.splitlines()
    parts = [PARTITION_LINE.match(line) for line in rest]
    assert all(parts), result.stdout
    return header, [p for p in parts if p]


# --- topics -----------------------------------------------------------------------


def test_topic_lifecycle(env: Env) -> None:
    topic = fresh_topic("life")
    create(env, topic, 3, "--replication-factor", "1", "--config", "retention.ms=3600000")

    again = odradek(env, "topics", "create", "--topic", topic, "--partitions", "3")
    assert one_line_error(again) == (
        f"Error while executing topic command : Topic '{topic}' already exists."
    )
    quiet = odradek(env, "topics", "create", "--topic", topic, "--if-not-exists")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")

    listed = odradek(env, "topics", "list")
    assert listed.returncode == 0
    assert topic in listed.stdout.splitlines()
    only = odradek(env, "topics", "list", "--topic", "life-.*,nothing")
    assert topic in only.stdout.splitlines()
    assert all(name.startswith("life-") for name in only.stdout.splitlines())

    header, parts = describe(env, topic)
    assert re.match(
        rf"^Topic: {topic}\tTopicId: [A-Za-z0-9_-]{{22}}\tPartitionCount: 3\tReplicationFactor: 1"
        r"\tConfigs: (.*)$",
        header,
    ), header
    assert "retention.ms=3600000" in header.split("\tConfigs: ")[1].split(",")
    assert [int(p.group(2)) for p in parts] == [0, 1, 2]
    for p in parts:
        # Leaders, replicas and ISR are storage node ids (the brokers clients see): one
        # replica per partition, in sync, and it leads.
        assert p.group(1) == topic
        assert p.group(4) == p.group(5) and "," not in p.group(4)
        assert p.group(3) == p.group(4)

    changed = odradek(
        env,
        "topics",
        "alter-config",
        "--topic",
        topic,
        "--add-config",
        "retention.ms=7200000,segment.ms=600000",
    )
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout == f"Completed updating config for topic {topic}.\n"
    configs = odradek(env, "topics", "describe", "--topic", topic, "--configs")
    assert configs.returncode == 0, configs.stderr
    lines = configs.stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert any(
        line.startswith(
            "  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=7200000"
        )
        for line in lines
    ), configs.stdout
    assert any(line.startswith("  segment.ms=600000 ") for line in lines), configs.stdout
    all_configs = odradek(env, "topics", "describe", "--topic", topic, "--configs", "--all")
    assert all_configs.stdout.startswith(f"All configs for topic {topic} are:\n")
    assert "  cleanup.policy=delete " in all_configs.stdout  # a default shows up with --all only
    assert "  cleanup.policy=" not in configs.stdout

    removed = odradek(
        env, "topics", "alter-config", "--topic", topic, "--delete-config", "segment.ms"
    )
    assert removed.returncode == 0, removed.stderr
    header, _ = describe(env, topic)
    overrides = header.split("\tConfigs: ")[1].split(",")
    assert "retention.ms=7200000" in overrides
    assert not any(o.startswith("segment.ms=") for o in overrides)

    grown = odradek(env, "topics", "alter", "--topic", topic, "--partitions", "4")
    assert (grown.returncode, grown.stderr) == (0, "")
    wait_until(lambda: "PartitionCount: 4" in describe(env, topic)[0], "4 partitions in describe")

    deleted = odradek(env, "topics", "delete", "--topic", topic)
    assert (deleted.returncode, deleted.stdout, deleted.stderr) == (0, "", "")
    wait_until(
        lambda: topic not in odradek(env, "topics", "list").stdout.splitlines(),
        f"{topic} to leave the topic list",
    )
    gone = odradek(env, "topics", "describe", "--topic", topic)
    assert one_line_error(gone) == f"Topic '{topic}' does not exist as expected"
    assert one_line_error(odradek(env, "topics", "delete", "--topic", topic)) == (
        f"Topic '{topic}' does not exist as expected"
    )
    assert odradek(env, "topics", "delete", "--topic", topic, "--if-exists").returncode == 0


def test_default_bootstrap_comes_from_cluster_json(env: Env) -> None:
    topic = fresh_topic("dflt")
    create(env, topic)
    listed = odradek(env, "topics", "list", bootstrap=False)  # cwd has data/cluster.json
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout.splitlines()


def test_up_serves_clients_and_stops_every_service_on_ctrl_c(tmp_path: Path) -> None:
    """``odradek up`` in the foreground: data/cluster.json appears once every service
    serves, the tools find the cluster through it, and Ctrl-C (SIGINT) stops every
    service and exits 0."""
    output = tmp_path / "up.out"
    cluster_file = tmp_path / "data" / "cluster.json"
    with open(output, "wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "odradek", "up", "--port", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=tmp_path,
        )
    try:

        def started() -> bool:
            assert up.poll() is None, f"odradek up exited:\n{output.read_text(errors='replace')}"
            return cluster_file.exists()  # written atomically, once every service is ready

        wait_until(started, "odradek up to write data/cluster.json", timeout=90)
        doc = json.loads(cluster_file.read_text())
        here = Env(doc["bootstrap_servers"], tmp_path)
        topic = fresh_topic("up")
        assert odradek(here, "topics", "create", "--topic", topic, bootstrap=False).returncode == 0
        assert (
            odradek(here, "produce", "--topic", topic, stdin="hi\n", bootstrap=False).returncode
            == 0
        )
        read = odradek(
            here,
            "consume",
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            "1",
            bootstrap=False,
        )
        assert (read.returncode, read.stdout) == (0, "hi\n"), read.stderr
        assert {s["kind"] for s in doc["services"]} == {
            "controller",
            "storage",
            "offsets",
            "coordinator",
            "transactions",
            "gateway",
            "console",
        }
        up.send_signal(signal.SIGINT)
        code = up.wait(60)
    finally:
        if up.poll() is None:  # a failed check above: stop the cluster all the same
            up.send_signal(signal.SIGINT)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait(10)
    assert code == 0, f"odradek up exited with {code}:\n{output.read_text(errors='replace')}"
    for service in doc["services"]:
        with pytest.raises(ProcessLookupError):
            os.kill(service["pid"], 0)


# --- produce and consume ------------------------------------------------------------


def test_keyed_lines_round_trip(env: Env) -> None:
    topic = fresh_topic("keys")
    create(env, topic, 3)
    lines = [f"key{i}:value {i}" for i in range(10)]
    produced = odradek(
        env,
        "produce",
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin="\n".join(lines) + "\n",
    )
    assert (produced.returncode, produced.stdout, produced.stderr) == (0, "", "")

    consumed = odradek(
        env,
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "10",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(lines)
    assert consumed.stderr == "Processed a total of 10 messages\n"  # small runs stay quiet

    # Kafka's column order: partition, offset, then key and value; same key, same partition.
    located = odradek(
        env,
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "10",
        "--property",
        "print.partition=true",
        "--property",
        "print.offset=true",
        "--property",
        "print.key=true",
        "--property",
        "print.timestamp=true",
    )
    offsets: dict[int, list[int]] = {}
    for line in located.stdout.splitlines():
        ts, partition, offset, key, value = line.split("\t")
        assert re.fullmatch(r"CreateTime:\d{13}", ts)
        assert value == "value " + key.removeprefix("key")
        offsets.setdefault(int(partition.removeprefix("Partition:")), []).append(
            int(offset.removeprefix("Offset:"))
        )
    assert sum(len(v) for v in offsets.values()) == 10
    for found in offsets.values():
        assert sorted(found) == list(range(len(found)))


def test_file_input_partition_offset_and_timeout(env: Env, tmp_path: Path) -> None:
    topic = fresh_topic("file")
    create(env, topic, 1)
    source = tmp_path / "lines.txt"
    source.write_text("".join(f"line {i}\n" for i in range(5)))
    produced = odradek(env, "produce", "--topic", topic, "--file", str(source))
    assert produced.returncode == 0, produced.stderr

    middle = odradek(
        env, "consume", "--topic", topic, "--partition", "0", "--offset", "2", "--max-messages", "2"
    )
    assert middle.stdout.splitlines() == ["line 2", "line 3"]
    earliest = odradek(
        env,
        "consume",
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        "1",
    )
    assert earliest.stdout == "line 0\n"

    started = time.monotonic()
    idle = odradek(env, "consume", "--topic", topic, "--from-beginning", "--timeout-ms", "1500")
    assert idle.returncode == 0, idle.stderr
    assert idle.stdout.splitlines() == [f"line {i}" for i in range(5)]
    assert idle.stderr == "Processed a total of 5 messages\n"
    assert time.monotonic() - started < 20


def test_null_marker_and_headers(env: Env) -> None:
    topic = fresh_topic("hdrs")
    create(env, topic, 1)
    produced = odradek(
        env,
        "produce",
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "parse.headers=true",
        "--property",
        "null.marker=NULL",
        stdin="h1:a,h2:b\tk1\tv1\nNULL\tNULL\ttombstone-less\nx:y\tk3\tNULL\n",
    )
    assert produced.returncode == 0, produced.stderr
    consumed = odradek(
        env,
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.headers=true",
        "--property",
        "print.key=true",
    )
    assert consumed.stdout.splitlines() == [
        "h1:a,h2:b\tk1\tv1",
        "NO_HEADERS\tnull\ttombstone-less",
        "x:y\tk3\tnull",
    ]


def test_synthetic_records_print_perf_summary(env: Env) -> None:
    topic = fresh_topic("perf")
    create(env, topic, 2)
    result = odradek(
        env,
        "produce",
        "--topic",
        topic,
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "25000",
        "--reporting-interval",
        "200",
        "--compression-type",
        "lz4",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert PERF_SUMMARY.match(lines[-1]), lines[-1]
    windows = lines[:-1]
    assert windows, "a run of about 0.8 s reports every 200 ms"
    assert all(PERF_WINDOW.match(line) for line in windows), windows
    assert sum(int(line.split()[0]) for line in windows) <= 20000

    consumed = odradek(
        env,
        "consume",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "20000",
        "--property",
        "print.partition=true",
        "--reporting-interval",
        "100000",
    )
    assert consumed.returncode == 0, consumed.stderr
    values = [line.split("\t")[1] for line in consumed.stdout.splitlines()]
    assert len(values) == 20000
    assert all(len(v) == 100 and v.isalpha() and v.isupper() for v in values)
    assert consumed.stderr == "Processed a total of 20000 messages\n"


def test_long_line_run_reports_progress(env: Env, tmp_path: Path) -> None:
    topic = fresh_topic("prog")
    create(env, topic, 1)
    source = tmp_path / "many.txt"
    source.write_text("".join(f"{i}\n" for i in range(300)))
    result = odradek(
        env,
        "produce",
        "--topic",
        topic,
        "--file",
        str(source),
        "--throughput",
        "400",
        "--reporting-interval",
        "150",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    progress = result.stderr.splitlines()
    assert progress, "a 0.75 s run reports every 150 ms"
    for line in progress:
        assert re.fullmatch(r"Sent \d+ records, \d+\.\d records/sec \(\d+\.\d\d MB/sec\)", line), (
            line
        )


def test_sigterm_stops_consumer_with_total(env: Env) -> None:
    topic = fresh_topic("term")
    create(env, topic, 1)
    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek",
            "consume",
            "--topic",
            topic,
            "--from-beginning",
            "--bootstrap-server",
            env.bootstrap,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=env.cwd,
    )
    try:
        produced = odradek(env, "produce", "--topic", topic, stdin="a\nb\nc\n")
        assert produced.returncode == 0, produced.stderr
        received = b""
        deadline = time.monotonic() + 20
        assert consumer.stdout is not None
        while received.count(b"\n") < 3 and time.monotonic() < deadline:
            ready, _, _ = select.select([consumer.stdout], [], [], 0.5)
            if ready:
                received += os.read(consumer.stdout.fileno(), 4096)
        assert received == b"a\nb\nc\n"
        consumer.send_signal(signal.SIGTERM)
        _, err = consumer.communicate(timeout=20)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0
    assert err.decode().splitlines()[-1] == "Processed a total of 3 messages"


def test_group_consumption_resumes_from_commit(env: Env) -> None:
    topic = fresh_topic("grp")
    create(env, topic, 2)
    lines = [f"m{i}" for i in range(10)]
    assert odradek(env, "produce", "--topic", topic, stdin="\n".join(lines) + "\n").returncode == 0
    group = fresh_topic("g")
    first = odradek(
        env,
        "consume",
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        "6",
    )
    second = odradek(
        env,
        "consume",
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        "4",
    )
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    got_first, got_second = first.stdout.splitlines(), second.stdout.splitlines()
    assert len(got_first) == 6 and len(got_second) == 4
    assert sorted(got_first + got_second) == sorted(lines)


# --- errors -----------------------------------------------------------------------


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_bootstrap(env: Env) -> None:
    address = f"127.0.0.1:{_dead_port()}"
    for args in (
        ["topics", "list"],
        ["produce", "--topic", "t"],
        ["consume", "--topic", "t"],
    ):
        result = odradek(
            env,
            *args,
            "--bootstrap-server",
            address,
            "--connect-timeout-ms",
            "1000",
            bootstrap=False,
        )
        message = one_line_error(result)
        assert message.endswith(
            f"Could not connect to bootstrap server(s) {address} within 1000 ms"
        )
    bad = odradek(env, "topics", "list", "--bootstrap-server", "no-port-here", bootstrap=False)
    assert one_line_error(bad).endswith("Invalid url in bootstrap.servers: no-port-here")


def test_unknown_topics(env: Env) -> None:
    missing = fresh_topic("missing")
    consume = odradek(
        env, "consume", "--topic", missing, "--from-beginning", "--timeout-ms", "1000"
    )
    assert one_line_error(consume) == f"odradek consume: Topic '{missing}' does not exist"
    # The test cluster runs with auto.create.topics.enable=false.
    produce = odradek(
        env, "produce", "--topic", missing, "--connect-timeout-ms", "1500", stdin="x\n"
    )
    assert one_line_error(produce) == (
        f"odradek produce: Topic {missing} not present in metadata after 1500 ms."
    )
    alter = odradek(
        env, "topics", "alter-config", "--topic", missing, "--add-config", "retention.ms=1"
    )
    assert one_line_error(alter).endswith(f"Topic '{missing}' does not exist as expected")
    topic = fresh_topic("onepart")
    create(env, topic, 1)
    partition = odradek(env, "consume", "--topic", topic, "--partition", "5", "--offset", "0")
    assert one_line_error(partition).startswith(
        f"odradek consume: Partition 5 does not exist in topic '{topic}'"
    )


def test_bad_configs_and_arguments(env: Env) -> None:
    topic = fresh_topic("bad")
    created = odradek(env, "topics", "create", "--topic", topic, "--config", "retention.ms=abc")
    assert one_line_error(created).startswith("Error while executing topic command : ")
    assert topic not in odradek(env, "topics", "list").stdout.splitlines()

    create(env, topic, 1)
    altered = odradek(
        env, "topics", "alter-config", "--topic", topic, "--add-config", "retention.ms=abc"
    )
    assert one_line_error(altered).startswith("Error while executing config command : ")
    unknown = odradek(
        env, "topics", "alter-config", "--topic", topic, "--add-config", "no.such.config=1"
    )
    assert one_line_error(unknown).startswith("Error while executing config command : ")

    cases = [
        (
            ("topics", "create", "--topic", topic + "x", "--partitions", "0"),
            "The partitions must be greater than 0",
        ),
        (
            ("consume", "--topic", topic, "--offset", "3"),
            "The partition is required when offset is specified.",
        ),
        (
            ("consume", "--topic", topic, "--partition", "0", "--offset", "-4"),
            "The provided offset value is incorrect. Valid values are 'earliest', 'latest', or a non-negative long.",
        ),
        (("consume", "--topic", topic, "--property", "print.kye=true"), None),
        (("produce", "--topic", topic, "--producer-property", "no.such.setting=1"), None),
    ]
    for args, expected in cases:
        message = one_line_error(odradek(env, *args))
        if expected is not None:
            assert message == expected
    unparsable = odradek(
        env, "produce", "--topic", topic, "--property", "parse.key=true", stdin="no separator\n"
    )
    assert one_line_error(unparsable) == (
        "odradek produce: No key separator found on line number 1: 'no separator'"
    )


# --- pure parts ---------------------------------------------------------------------


def test_default_bootstrap_servers_reads_cluster_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    assert default_bootstrap_servers(path) == DEFAULT_BOOTSTRAP_SERVER
    path.write_text(json.dumps({"bootstrap_servers": "127.0.0.1:1234,127.0.0.1:1235"}))
    assert default_bootstrap_servers(path) == "127.0.0.1:1234,127.0.0.1:1235"
    path.write_text("{not json")
    assert default_bootstrap_servers(path) == DEFAULT_BOOTSTRAP_SERVER


def test_line_format_follows_console_producer() -> None:
    fmt = LineFormat.from_properties({"parse.key": "true", "key.separator": "::"})
    parsed = fmt.parse(b"k::v::w", 1)
    assert (parsed.key, parsed.value, parsed.headers) == (b"k", b"v::w", [])
    with pytest.raises(RecordFormatError, match="No key separator found on line number 7: 'kv'"):
        fmt.parse(b"kv", 7)
    lenient = LineFormat.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse(b"kv", 1).key is None and lenient.parse(b"kv", 1).value == b"kv"
    full = LineFormat.from_properties(
        {"parse.headers": "true", "parse.key": "true", "null.marker": "-"}
    )
    parsed = full.parse("a:1,b:é\t-\tvalue".encode(), 1)
    assert (parsed.key, parsed.value, parsed.headers) == (
        None,
        b"value",
        [("a", b"1"), ("b", "é".encode())],
    )
    assert full.parse(b"-\tk\t-", 2).headers == [] and full.parse(b"-\tk\t-", 2).value is None
    with pytest.raises(RecordFormatError, match="may not be equal"):
        LineFormat.from_properties({"null.marker": "\t"})
    with pytest.raises(
        RecordFormatError, match=r"Unknown producer line reader property: parse\.kye"
    ):
        LineFormat.from_properties({"parse.kye": "true"})


class _Record:
    def __init__(
        self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
    ) -> None:
        self.partition = 2
        self.offset = 41
        self.timestamp = 1_700_000_000_123
        self.timestamp_type = 0
        self.key = key
        self.value = value
        self.headers = headers


def test_message_format_follows_console_consumer() -> None:
    records = [_Record(b"k", b"v", [("h", b"x")]), _Record(None, None, [])]
    assert MessageFormat().format(records) == b"v\nnull\n"
    everything = MessageFormat.from_properties(
        {
            "print.timestamp": "true",
            "print.partition": "true",
            "print.offset": "true",
            "print.headers": "true",
            "print.key": "true",
            "key.separator": "|",
            "null.literal": "<null>",
        }
    )
    assert everything.format(records) == (
        b"CreateTime:1700000000123|Partition:2|Offset:41|h:x|k|v\n"
        b"CreateTime:1700000000123|Partition:2|Offset:41|NO_HEADERS|<null>|<null>\n"
    )
    key_only = MessageFormat.from_properties({"print.key": "TRUE", "print.value": "false"})
    assert key_only.format(records) == b"k\nnull\n"


def test_perf_lines_match_kafka_format() -> None:
    from io import StringIO

    out = StringIO()
    stats = ProducerStats(4, interval_s=0, out=out)
    for latency in (1.0, 2.0, 3.0, 10.0):
        stats.record(latency, 100, stats.start + 1.0)
    assert out.getvalue() == ""  # interval 0: no window lines
    line = stats.total_line(now=stats.start + 2.0)
    assert line == (
        "4 records sent, 2.000000 records/sec (0.00 MB/sec), 4.00 ms avg latency, "
        "10.00 ms max latency, 3 ms 50th, 10 ms 95th, 10 ms 99th, 10 ms 99.9th."
    )


def test_config_lists_and_topic_ids() -> None:
    assert split_config_list("a=1,b=[x,y],c=2") == ["a=1", "b=[x,y]", "c=2"]
    assert parse_add_config(["cleanup.policy=[compact,delete]", "retention.ms=5"]) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "5",
    }
    assert topic_id_text("00000000-0000-0000-0000-000000000000") is None
    assert topic_id_text(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
