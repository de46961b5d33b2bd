"""Idempotent producers: retries never duplicate, gaps are refused (docs/compatibility.md C7).

Retries are forced for real: the very same produce request replayed over a raw
socket (same producer id, epoch and sequence); and a paced librdkafka or Java
producer stream during which the storage node first freezes past the client's request
timeout (the client resends while the gateway still holds the original, so both
copies arrive) and later is killed with SIGKILL and restarted (producer state must
survive the crash). Each streaming test checks that its client did retry.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
from compat_clients import Client, ConfluentClient, JavaClient, create_topic
from compat_model import assert_consecutive
from compat_wire import WireClient, init_producer_id, produce

from odradek.protocol.errors import ErrorCode
from odradek.records import BatchBuilder
from odradek.tools.launcher import Cluster

STREAM = 6000  # records per streaming test


def _batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    now = int(time.time() * 1000)
    for v in values:
        builder.append(now, None, v)
    return builder.build()


def test_replayed_batches_answer_their_original_offsets(
    bootstrap: str, confluent: ConfluentClient, unique_topic: str
) -> None:
    create_topic(bootstrap, unique_topic)
    with WireClient(bootstrap) as wire:
        pid, epoch = init_producer_id(wire)
        first = _batch(pid, epoch, 0, [b"a", b"b", b"c"])
        second = _batch(pid, epoch, 3, [b"d", b"e"])
        assert produce(wire, unique_topic, 0, first) == (0, 0)
        assert produce(wire, unique_topic, 0, first) == (0, 0), "a retry must not append again"
        assert produce(wire, unique_topic, 0, second) == (0, 3)
        assert produce(wire, unique_topic, 0, first) == (0, 0), "still one of the last 5 batches"
        assert produce(wire, unique_topic, 0, second) == (0, 3)
        gap = _batch(pid, epoch, 9, [b"lost?"])
        code, _ = produce(wire, unique_topic, 0, gap)
        assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        third = _batch(pid, epoch, 5, [b"f"])
        assert produce(wire, unique_topic, 0, third) == (0, 5), "the gap was not appended"
    got = confluent.consume(unique_topic, [0], 6, timeout=10)
    assert [r.value for r in got] == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert_consecutive(got, 0, "replayed batches")


STREAM_S = 3.0  # the stream is paced over this long, so it runs through every blow


class StorageTrouble(threading.Thread):
    """Trouble for the storage node on a schedule, while a producer streams.

    At FREEZE_AT seconds the node is stopped (SIGSTOP) for FREEZE_S, longer than the
    client's request timeout: requests sent meanwhile time out at the client, which
    sends them again while the gateway still holds the originals, so both copies reach
    the node when it continues (SIGCONT). At CRASH_AT it is killed (SIGKILL) and
    restarted; its producer state has to come back from disk."""

    FREEZE_AT = 0.5
    FREEZE_S = 1.2
    CRASH_AT = 2.2

    def __init__(self, cluster: Cluster, name: str = "storage-100") -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.service = name
        self.error: BaseException | None = None

    def run(self) -> None:
        start = time.monotonic()
        try:
            svc = self.cluster.service(self.service)
            # The sleeps here are the scenario: blows at fixed moments of a paced stream.
            time.sleep(max(0.0, start + self.FREEZE_AT - time.monotonic()))
            os.kill(svc.process.pid, signal.SIGSTOP)
            try:
                time.sleep(self.FREEZE_S)
            finally:
                os.kill(svc.process.pid, signal.SIGCONT)
            time.sleep(max(0.0, start + self.CRASH_AT - time.monotonic()))
            os.kill(svc.process.pid, signal.SIGKILL)
            svc.process.wait(10)
            self.cluster.restart(self.service)
        except BaseException as exc:
            self.error = exc

    def done(self) -> None:
        self.join(60)
        assert not self.is_alive(), f"{self.service} did not restart"
        if self.error is not None:
            raise self.error


def _pace(start: float, i: int) -> None:
    """Sleep until record ``i`` is due: STREAM records spread over STREAM_S seconds."""
    delay = start + STREAM_S * i / STREAM - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _stream_confluent(cluster: Cluster, topic: str) -> int:
    """Stream STREAM records with librdkafka through the trouble; how often it resent."""
    stats: list[dict[str, Any]] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 5,
            # librdkafka's client-side timeout for requests in flight
            "socket.timeout.ms": 300,
            "message.timeout.ms": 120000,
            "retry.backoff.ms": 100,
            "statistics.interval.ms": 100,
            "stats_cb": lambda doc: stats.append(json.loads(doc)),
        }
    )
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer.produce(topic, value=b"0", partition=0, on_delivery=report)
    assert producer.flush(30) == 0, "the producer is not up"  # InitProducerId done
    trouble = StorageTrouble(cluster)
    start = time.monotonic()
    trouble.start()
    for i in range(1, STREAM):
        producer.produce(topic, value=b"%d" % i, partition=0, on_delivery=report)
        producer.poll(0)
        if i % 20 == 0:
            _pace(start, i)
    left = producer.flush(120)
    trouble.done()
    assert not errors, f"delivery failures: {errors[:3]}"
    assert left == 0, f"{left} records undelivered"
    producer.poll(0.5)  # one more statistics report
    # A timed-out request tears the connection down and its batches go again on the
    # next one (req_timeouts); error answers retry on the same one (txretries). A broker
    # handle that librdkafka drops and re-creates (the broker missing from one Metadata
    # answer while its storage node restarts) starts its counters again, so each
    # handle's highest count over the run is taken, not the last report's.
    most: dict[str, int] = {}
    for doc in stats:
        for name, b in doc["brokers"].items():
            most[name] = max(most.get(name, 0), b["txretries"] + b["req_timeouts"])
    return sum(most.values())


def _stream_java(cluster: Cluster, java: JavaClient, topic: str) -> int:
    """The same stream through the Java producer fed line by line; its retry count."""
    cmd = [
        "java",
        "-cp",
        java.classpath,
        "CompatClient",
        "produce",
        cluster.bootstrap_servers,
        f"topic={topic}",
        "partition=0",
        "producer.enable.idempotence=true",
        "producer.linger.ms=5",
        "producer.request.timeout.ms=500",
        "producer.delivery.timeout.ms=120000",
        "producer.retry.backoff.ms=100",
        "ready-after-first=true",
    ]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdin is not None and proc.stdout is not None
    # The first record is acknowledged before the trouble starts (as librdkafka's is
    # above): a JVM slow to start would otherwise meet the blows before its first send.
    proc.stdin.write(b"-\t%s\t.\n" % base64.b64encode(b"0"))
    proc.stdin.flush()
    first = proc.stdout.readline()
    assert first == b"READY\n", f"the Java producer is not up: {first!r}"
    trouble = StorageTrouble(cluster)
    start = time.monotonic()
    trouble.start()
    for i in range(1, STREAM):
        proc.stdin.write(b"-\t%s\t.\n" % base64.b64encode(b"%d" % i))
        if i % 20 == 0:
            proc.stdin.flush()
            _pace(start, i)
    out, _ = proc.communicate(timeout=180)  # closes stdin: the producer flushes and exits
    trouble.done()
    rows = [line.split("\t") for line in out.decode().splitlines()]
    errors = [r for r in rows if r[0] == "ERROR"]
    assert proc.returncode == 0 and not errors, f"java producer failed: {errors[:3]}"
    (retries,) = [float(r[2]) for r in rows if r[0] == "METRIC"]
    return int(retries)


def _check_exactly_once_in_order(client: Client, topic: str, what: str) -> None:
    got = client.consume(topic, [0], STREAM, timeout=20)
    got += client.consume(topic, [0], 10, start=STREAM, timeout=1)  # nothing beyond
    values = [int(r.value or b"-1") for r in got]
    dupes = len(values) - len(set(values))
    assert dupes == 0, f"{what}: {dupes} duplicated records after retries"
    assert values == list(range(STREAM)), f"{what}: lost or reordered records"
    assert_consecutive(got, 0, what)


def test_librdkafka_retries_across_a_storage_crash(
    cluster_factory: Callable[..., Cluster], make_client: Callable[[str, str], Client]
) -> None:
    cluster = cluster_factory(with_groups=False)
    topic = "idem-rdkafka"
    create_topic(cluster.bootstrap_servers, topic)
    retries = _stream_confluent(cluster, topic)
    assert retries > 0, "librdkafka never retried: the test proved nothing"
    _check_exactly_once_in_order(
        make_client("confluent", cluster.bootstrap_servers), topic, "librdkafka"
    )


def test_java_retries_across_a_storage_crash(
    cluster_factory: Callable[..., Cluster], make_client: Callable[[str, str], Client]
) -> None:
    cluster = cluster_factory(with_groups=False)
    java = make_client("java", cluster.bootstrap_servers)
    assert isinstance(java, JavaClient)
    topic = "idem-java"
    create_topic(cluster.bootstrap_servers, topic)
    retries = _stream_java(cluster, java, topic)
    assert retries > 0, "the Java producer never retried: the test proved nothing"
    _check_exactly_once_in_order(make_client("confluent", cluster.bootstrap_servers), topic, "java")
