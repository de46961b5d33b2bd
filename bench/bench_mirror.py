"""``odradek mirror`` throughput against a ``kcat -C | kcat -P`` pipe, and its latency.

Two fresh Odradek clusters (source and target, started through
:class:`odradek.tools.launcher.Cluster`). The source topic is filled once with N x
S-byte messages (kcat -P from a file). Then, in the same run:

* pipe: ``kcat -C -e`` from the source piped into ``kcat -P`` (acks=all) to a target
  topic: the whole pipe's wall time (values only: kcat's line format drops keys,
  headers and timestamps, which the mirror keeps);
* mirror: ``odradek mirror`` (alias policy, one run at least once with the idempotent
  producer, one exactly once with transactions) from process start until its
  committed source positions reach the source's end offsets.

Rates are payload MB/s (10^6 bytes); the ratio is mirror / pipe (goal >= 1.0). Latency:
a producer writes R records/s (default 2,000) with the current time as timestamp; a
consumer on the target reads the mirrored topic and records now - timestamp; p50/p99
over the run (source produce to target consume, both on this machine's clock).

    python -m bench mirror [--messages=N] [--size=BYTES] [--partitions=P] [--rate=R]
                           [--seconds=S]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench.bench_broker import create_topic, kcat_env, kcat_version, write_messages
from odradek.process import terminate


@contextlib.contextmanager
def two_clusters(tmp: Path) -> Iterator[tuple[str, str]]:
    from odradek.tools.launcher import Cluster, ClusterOptions

    started = []
    try:
        for name in ("source", "target"):
            c = Cluster(ClusterOptions(data_dir=tmp / name, port=0, console=False))
            c.start()
            started.append(c)
            print(f"  {name}: {c.bootstrap_servers}", flush=True)
        yield started[0].bootstrap_servers, started[1].bootstrap_servers
    finally:
        for c in reversed(started):
            c.stop()


def committed_sum(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return sum(tp.offset for tp in found if tp.offset >= 0)
    finally:
        consumer.close()


@contextlib.contextmanager
def mirror(
    source: str, target: str, alias: str, topic: str, extra: list[str], log: Path, port: int = 0
) -> Iterator[subprocess.Popen[bytes]]:
    cmd = [
        sys.executable, "-m", "odradek.cli", "mirror", "--source", source, "--target", target,
        "--source-alias", alias, "--policy", "alias", "--topics", topic,
        "--group-id", f"bench-{alias}", "--set", "refresh.topics.interval.seconds=1",
        "--metrics-port", str(port), *extra,
    ]  # fmt: skip
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        terminate(proc, 30)


def ready(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def time_mirror(
    source: str,
    target: str,
    alias: str,
    topic: str,
    args: argparse.Namespace,
    extra: list[str],
    tmp: Path,
) -> tuple[float, float]:
    """(seconds from process start, seconds from readiness) until every record is copied.
    Readiness (/readyz) comes once the first topic sync is done and the partition
    tasks run: the second figure is the copy itself, without Python's start-up."""
    from bench.bench_broker import free_port

    port = free_port()
    start = time.perf_counter()
    with mirror(source, target, alias, topic, extra, tmp / f"mirror-{alias}.log", port):
        deadline = start + 600
        while not ready(port):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"mirror {alias} never ready; see {tmp}/mirror-{alias}.log")
            time.sleep(0.02)
        up = time.perf_counter()
        while (
            committed_sum(target, f"bench-{alias}", f"{alias}.{topic}", args.partitions)
            < args.messages
        ):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"mirror {alias} did not finish; see {tmp}/mirror-{alias}.log")
            time.sleep(0.05)
        end = time.perf_counter()
        return end - start, end - up


def latency(
    source: str, target: str, args: argparse.Namespace, tmp: Path
) -> tuple[float, float, int]:
    from confluent_kafka import Consumer, Producer

    topic = "latency"
    create_topic(source, topic, args.partitions)
    samples: list[float] = []
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": target,
                "group.id": "bench-latency",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 5,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        consumer.subscribe([f"lat.{topic}"])
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                samples.append(time.time() * 1000 - msg.timestamp()[1])
        consumer.close()

    with mirror(
        source,
        target,
        "lat",
        topic,
        ["--set", "exactly.once.support=disabled"],
        tmp / "mirror-lat.log",
    ):
        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        producer = Producer({"bootstrap.servers": source, "linger.ms": 5, "acks": "all"})
        warmup = time.monotonic() + 120  # until the mirror runs and the reader sees its copies
        while len(samples) < 20:
            if time.monotonic() > warmup:
                raise RuntimeError("no mirrored record reached the reader in 120 s")
            producer.produce(topic, value=b"w" * 100)
            producer.poll(0.05)
        time.sleep(1)
        samples.clear()
        total = args.rate * args.seconds
        start = time.monotonic()
        for i in range(total):
            due = start + i / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, value=b"x" * 100)
            producer.poll(0)
        if producer.flush(60):
            raise RuntimeError("the source did not take every latency record within 60 s")
        time.sleep(2)
        stop.set()
        reader.join(10)
    values = sorted(samples)
    if not values:
        raise RuntimeError("no latency samples")
    return values[len(values) // 2], values[int(len(values) * 0.99) - 1], len(values)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench mirror")
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument(
        "--only", choices=("throughput", "latency"), help="run one part (default: both)"
    )
    args, _ = parser.parse_known_args(argv)
    kcat = "kcat"
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as d:
        tmp = Path(d)
        env = kcat_env(tmp)
        print(f"  kcat with {kcat_version(kcat, env)}", flush=True)
        data = tmp / "messages.txt"
        if args.only != "latency":
            write_messages(data, args.messages, args.size)
        with two_clusters(tmp) as (source, target):
            if args.only != "latency":
                throughput(source, target, data, env, args, tmp)
            if args.only != "throughput":
                p50, p99, n = latency(source, target, args, tmp)
                print(
                    f"latency at {args.rate:,} records/s ({n:,} samples): "
                    f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"
                )
        os.sync()


def throughput(
    source: str, target: str, data: Path, env: dict[str, str], args: argparse.Namespace, tmp: Path
) -> None:
    """The kcat pipe, then the mirror at least once and exactly once, on the same data."""
    kcat = "kcat"
    create_topic(source, "orders", args.partitions)
    fill = [kcat, "-P", "-b", source, "-t", "orders", "-l", str(data), "-X", "linger.ms=5"]
    subprocess.run(fill, env=env, check=True)
    mb = args.messages * args.size / 1e6
    create_topic(target, "piped", args.partitions)
    pipe = (
        f"{kcat} -C -b {source} -t orders -o beginning -e -q -c {args.messages} -f '%s\\n' "
        f"| {kcat} -P -b {target} -t piped -X acks=all -X linger.ms=5"
    )
    start = time.perf_counter()
    subprocess.run(["bash", "-o", "pipefail", "-c", pipe], env=env, check=True)
    pipe_s = time.perf_counter() - start
    print(
        f"  pipe:   {shlex.quote(pipe)}\n          {pipe_s:6.1f} s  {mb / pipe_s:7.1f} MB/s",
        flush=True,
    )
    results = {}
    for alias, mode in (("alo", "disabled"), ("eos", "requested")):
        total, copy = time_mirror(
            source, target, alias, "orders", args,
            ["--set", f"exactly.once.support={mode}"], tmp,
        )  # fmt: skip
        results[alias] = (total, copy)
        label = "at least once" if alias == "alo" else "exactly once"
        print(
            f"  mirror ({label}): {total:6.1f} s with start-up ({mb / total:7.1f} MB/s), "
            f"{copy:6.1f} s from ready ({mb / copy:7.1f} MB/s)",
            flush=True,
        )
    for alias, (total, copy) in results.items():
        print(
            f"ratio mirror({alias})/pipe: {pipe_s / copy:.2f}x from ready, "
            f"{pipe_s / total:.2f}x with process start-up "
            f"({args.messages:,} x {args.size} B, {args.partitions} partitions)"
        )
