"""``odradek mirror`` between two real Odradek clusters started by the tests.

Proves: the identity copy keeps every record's key, value, headers and timestamp in
partition order, creates the target topic with the source's partition count and
topic configs, follows partitions added at the source, and resumes after a clean
stop without duplicates; kill -9 of the mirror mid-stream loses nothing and keeps
order (at least once); two clusters mirroring each other with the alias policy
make no loops; a consumer group that consumed at the source resumes on the target at
the translated offsets with no gap (checkpoints and group offset sync); a source
cluster whose brokers go away and come back is caught up with.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.mirror.checkpoints import decode_checkpoint
from odradek.tools.launcher import Cluster
from tests.helpers.waiting import wait_until
from tests.integration.mirror_process import (
    MirrorProcess,
    Row,
    add_partitions,
    create_topic,
    end_offsets,
    mirror_position,
    partition_count,
    produce,
    read_all,
    topic_config,
    topic_names,
)

# Slow suite (make test-slow, run by CI): every test starts two clusters and a mirror.
pytestmark = pytest.mark.slow

FAST = ["--set", "refresh.topics.interval.seconds=1", "--set", "progress.interval.seconds=1"]


@pytest.fixture(scope="module")
def two_clusters(
    module_cluster_factory: Callable[..., Cluster],
) -> Iterator[tuple[Cluster, Cluster]]:
    yield module_cluster_factory(console=False), module_cluster_factory(console=False)


def mirrored(
    source: str,
    target: str,
    topic: str,
    target_topic: str | None = None,
    group: str = "odradek-mirror-target",
) -> bool:
    """The mirror's committed source positions on the target reach the source's end
    offsets: everything is copied (a check to poll; the records are compared after)."""
    try:
        src = end_offsets(source, topic)
        done = mirror_position(target, target_topic or topic, group)
    except KafkaException:  # a topic or partition not in the metadata yet
        return False
    return bool(src) and src == done


def test_identity_copy_keeps_records_configs_partitions_and_resumes(
    two_clusters: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    a, b = (c.bootstrap_servers for c in two_clusters)
    create_topic(a, "orders", 3, {"retention.ms": "7200000", "cleanup.policy": "delete"})
    create_topic(a, "skipped", 1)
    produce(a, "orders", 3000)
    mirror = MirrorProcess(
        tmp_path / "mirror.log", "--source", a, "--target", b, "--topics", "orders", *FAST
    )
    with mirror:
        wait_until(lambda: mirrored(a, b, "orders"), "orders copied", timeout=60)
        assert partition_count(b, "orders") == 3
        assert topic_config(b, "orders", "retention.ms") == "7200000"
        assert read_all(b, "orders") == read_all(a, "orders")
        # Partitions added at the source are followed.
        add_partitions(a, "orders", 5)
        produce(a, "orders", 1000, start=3000, partitions=5)
        wait_until(lambda: partition_count(b, "orders") == 5, "target grows", timeout=60)
        wait_until(lambda: mirrored(a, b, "orders"), "new partitions copied", timeout=60)
    assert "skipped" not in topic_names(b)
    assert "mirrored" in mirror.log()  # progress lines
    # A clean stop commits the positions: a restart copies only what is new.
    produce(a, "orders", 500, start=4000, partitions=5)
    with mirror:
        wait_until(lambda: mirrored(a, b, "orders"), "copied after restart", timeout=60)
    assert read_all(b, "orders") == read_all(a, "orders")


def first_occurrences(rows: list[Row]) -> list[Row]:
    seen: set[Row] = set()
    out = []
    for row in rows:
        if row not in seen:
            seen.add(row)
            out.append(row)
    return out


@pytest.mark.parametrize("support", ["requested", "disabled"])
def test_kill9_mid_stream_loses_nothing_and_keeps_order(
    two_clusters: tuple[Cluster, Cluster], tmp_path: Path, support: str
) -> None:
    """exactly.once.support=requested: the target (Odradek, with transactions) ends up
    with every source record exactly once; disabled: at least once, in order."""
    a, b = (c.bootstrap_servers for c in two_clusters)
    topic = f"stream-{support}"
    create_topic(a, topic, 4)
    done = threading.Event()

    def write() -> None:
        for i in range(20):
            produce(a, topic, 500, start=i * 500, partitions=4)
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    mirror = MirrorProcess(
        tmp_path / "mirror.log",
        "--source",
        a,
        "--target",
        b,
        "--topics",
        topic,
        "--set",
        f"exactly.once.support={support}",
        *FAST,
    )
    mirror.start()
    try:
        wait_until(
            lambda: (
                sum(mirror_position(b, topic).values()) > 2000 if topic in topic_names(b) else 0
            ),
            "the mirror under way",
            timeout=60,
        )
        mirror.kill9()
        mirror.start()
        writer.join(120)
        assert done.is_set()
        wait_until(lambda: mirrored(a, b, topic), "everything copied after the kill", timeout=90)
    finally:
        mirror.stop()
    source, target = read_all(a, topic), read_all(b, topic)
    if support == "requested":
        assert "exactly once (transactions)" in mirror.log()
        assert target == source
        return
    for p, rows in source.items():
        # At least once: every source record, in order; a re-sent tail may repeat.
        assert first_occurrences(target[p]) == rows, f"partition {p}"
        assert set(target[p]) == set(rows)


def test_mutual_mirroring_with_the_alias_policy_makes_no_loops(
    two_clusters: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    a, b = (c.bootstrap_servers for c in two_clusters)
    create_topic(a, "events", 2)
    create_topic(b, "events", 2)
    produce(a, "events", 300, partitions=2)
    produce(b, "events", 200, start=10_000, partitions=2)
    common = ["--policy", "alias", "--topics", "events|east\\.events|west\\.events", *FAST]
    east_to_west = MirrorProcess(
        tmp_path / "e2w.log",
        "--source",
        a,
        "--source-alias",
        "east",
        "--target",
        b,
        "--target-alias",
        "west",
        *common,
    )
    west_to_east = MirrorProcess(
        tmp_path / "w2e.log",
        "--source",
        b,
        "--source-alias",
        "west",
        "--target",
        a,
        "--target-alias",
        "east",
        *common,
    )
    with east_to_west, west_to_east:
        wait_until(
            lambda: mirrored(a, b, "events", "east.events", "odradek-mirror-west"),
            "east.events on west",
            timeout=120,
        )
        wait_until(
            lambda: mirrored(b, a, "events", "west.events", "odradek-mirror-east"),
            "west.events on east",
            timeout=120,
        )
        # Several refreshes later, the copies have not been copied back.
        wait_until(
            lambda: (
                east_to_west.log().count("mirrored") >= 3
                and west_to_east.log().count("mirrored") >= 3
            ),
            "three progress lines each",
            timeout=30,
        )
    names = topic_names(a) | topic_names(b)
    assert not {n for n in names if n.count(".") > 1 or n.startswith(("east.west", "west.east"))}
    assert read_all(b, "east.events") == read_all(a, "events")
    assert read_all(a, "west.events") == read_all(b, "events")


def writable(bootstrap: str, topic: str) -> bool:
    """One probe record per partition is acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    errors: list[object] = []
    for p in (0, 1):
        producer.produce(
            topic, value=b"probe", partition=p, on_delivery=lambda e, m: errors.append(e)
        )
    producer.flush(10)
    return len(errors) == 2 and not any(errors)


def test_source_cluster_that_goes_away_and_comes_back(
    module_cluster_factory: Callable[..., Cluster],
    two_clusters: tuple[Cluster, Cluster],
    tmp_path: Path,
) -> None:
    source = module_cluster_factory(console=False)
    a, b = source.bootstrap_servers, two_clusters[1].bootstrap_servers
    create_topic(a, "outage", 2)
    produce(a, "outage", 400, partitions=2)
    with MirrorProcess(
        tmp_path / "mirror.log", "--source", a, "--target", b, "--topics", "outage", *FAST
    ) as mirror:
        wait_until(lambda: mirrored(a, b, "outage"), "copied before the outage", timeout=60)
        down = [s.spec.name for s in source.services if s.spec.kind == "storage"]
        for name in down:
            os.kill(source.service(name).process.pid, signal.SIGKILL)
            source.service(name).process.wait(10)
        wait_until(
            lambda: "retried after errors" in mirror.log() or "WARNING" in mirror.log(),
            "the mirror notices",
            timeout=30,
        )
        for name in down:
            source.restart(name)
        # The source is back once it takes writes again (leaders elected).
        wait_until(lambda: writable(a, "outage"), "the source writable again", timeout=60)
        produce(a, "outage", 400, start=400, partitions=2)
        wait_until(lambda: mirrored(a, b, "outage"), "copied after the outage", timeout=90)
    assert read_all(b, "outage") == read_all(a, "outage")


def consume_values(
    bootstrap: str, group: str, topic: str, count: int, timeout: float = 60
) -> list[bytes]:
    """``count`` records read by ``group`` from its committed offsets, then committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    out: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return out


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


def test_consumer_group_fails_over_to_the_target_at_translated_offsets(
    two_clusters: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    a, b = (c.bootstrap_servers for c in two_clusters)
    create_topic(a, "payments", 2)
    produce(a, "payments", 1000, partitions=2)
    before = consume_values(a, "billing", "payments", 600)
    assert len(before) == 600
    at_source = committed(a, "billing", "payments", 2)
    with MirrorProcess(
        tmp_path / "mirror.log",
        "--source",
        a,
        "--target",
        b,
        "--topics",
        "payments",
        "--set",
        "sync.group.offsets.enabled=true",
        "--set",
        "emit.checkpoints.interval.seconds=1",
        *FAST,
    ):
        wait_until(lambda: mirrored(a, b, "payments"), "payments copied", timeout=60)
        wait_until(
            lambda: committed(b, "billing", "payments", 2) == at_source,
            "billing's offsets translated onto the target",
            timeout=60,
        )
        wait_until(
            lambda: "source.checkpoints.internal" in topic_names(b), "checkpoints topic", timeout=30
        )
    after = consume_values(b, "billing", "payments", 400)
    # No gap, and here (no compaction or transactions at the source) no re-read either.
    assert sorted(before + after, key=lambda v: int(v[1:])) == [b"v%d" % i for i in range(1000)]
    rows = read_all(b, "source.checkpoints.internal")[0]
    decoded = [decode_checkpoint(k or b"", v or b"") for k, v, _, _ in rows]
    assert {(c.group, c.topic, c.partition, c.upstream) for c in decoded} >= {
        ("billing", "payments", p, o) for p, o in at_source.items()
    }


def shares(bootstrap: str, group: str) -> list[int]:
    """How many partitions each member of the mirrors' group owns, as the group
    description shows it (the consumer protocol's assignments), smallest first."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        described = admin.describe_consumer_groups([group])[group].result(10)
    except KafkaException:
        return []
    return sorted(len(m.assignment.topic_partitions) for m in described.members)


def copied(mirror: MirrorProcess) -> int:
    """Records this instance copied, from its last progress line."""
    counts = re.findall(r"partitions: ([\d,]+) records", mirror.log())
    return int(counts[-1].replace(",", "")) if counts else 0


@pytest.mark.parametrize("support", ["requested", "disabled"])
def test_instances_share_the_partitions_and_survive_kill9_of_one(
    two_clusters: tuple[Cluster, Cluster], tmp_path: Path, support: str
) -> None:
    """Three instances with one mirror.group.id split six partitions two each; after
    kill -9 of one, the other two take its partitions over (three each) and the target
    holds every source record exactly once (exactly once) or at least once, in order."""
    a, b = (c.bootstrap_servers for c in two_clusters)
    topic, group = f"shared-{support}", f"mirrors-{support}"
    create_topic(a, topic, 6)
    stop_writing = threading.Event()
    chunks: list[int] = []

    def write() -> None:
        while not stop_writing.is_set() or len(chunks) < 4:
            produce(a, topic, 300, start=len(chunks) * 300, partitions=6)
            chunks.append(300)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    common = [
        *("--source", a, "--target", b, "--topics", topic, "--group-id", group),
        *("--set", f"exactly.once.support={support}", "--set", "session.timeout.ms=6000"),
        *("--set", "heartbeat.interval.ms=500", *FAST),
    ]
    mirrors = [MirrorProcess(tmp_path / f"mirror-{i}.log", *common) for i in range(3)]
    try:
        for mirror in mirrors:
            mirror.start()
        wait_until(lambda: shares(b, group) == [2, 2, 2], "two partitions each", timeout=90)
        wait_until(
            lambda: all(copied(m) > 0 for m in mirrors), "every instance copying", timeout=60
        )
        mirrors[0].kill9()
        written = len(chunks)
        wait_until(lambda: shares(b, group) == [3, 3], "the survivors take over", timeout=60)
        wait_until(lambda: len(chunks) > written + 1, "the source still written", timeout=60)
        stop_writing.set()
        writer.join(120)
        assert not writer.is_alive()
        wait_until(lambda: mirrored(a, b, topic, group=group), "everything copied", timeout=90)
    finally:
        stop_writing.set()
        for mirror in mirrors[1:]:
            mirror.stop()
    for mirror in mirrors:
        print(f"--- {mirror.log_path.name} ---\n{mirror.log()}")  # shown if an assert fails
    source, target = read_all(a, topic), read_all(b, topic)
    assert sum(len(rows) for rows in source.values()) == sum(chunks)
    if support == "requested":
        assert target == source
        return
    for p, rows in source.items():
        assert first_occurrences(target[p]) == rows, f"partition {p}"
