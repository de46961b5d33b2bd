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


def end_sum(bootstrap: str, topic: str, partitions: int) -> int:
    """The target topic's end offsets, summed: records written (at least once, no
    transaction markers)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        )
    except KafkaException:
        return 0  # not created yet
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
    mode: str,
    tmp: Path,
) -> tuple[float, float]:
    """(seconds from process start, seconds from readiness) until every record is copied
    with ``exactly.once.support=mode``. Readiness (/readyz) comes once the first topic
    sync is done and the instance has its partitions (the group's first rebalance, which
    the coordinator delays by group.initial.rebalance.delay.ms for a new group): the
    second figure is the copy itself, without start-up."""
    extra = ["--set", f"exactly.once.support={mode}"]
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
        # Done: at least once, when the target holds every record (as for the pipe);
        # exactly once, when the last transaction (records and position) is committed.
        while (
            end_sum(target, f"{alias}.{topic}", args.partitions)
            if mode == "disabled"
            else committed_sum(target, f"bench-{alias}", f"{alias}.{topic}", args.partitions)
        ) < args.messages:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"mirror {alias} did not finish; see {tmp}/mirror-{alias}.log")
            time.sleep(0.05)
        end = time.perf_counter()
    warnings = [
        line
        for line in (tmp / f"mirror-{alias}.log").read_text(errors="replace").splitlines()
        if " WARNING " in line
    ]
    if warnings:  # retries slow a copy down: say so next to its figure
        print(f"  mirror {alias}: {len(warnings)} warnings, first: {warnings[0][:200]}")
    return end - start, end - up


def paced(producer: object, topic: str, rate: int, seconds: int) -> dict[int, tuple[float, float]]:
    """Produce ``rate`` numbered records a second for ``seconds`` (value ``x<number>``,
    CreateTime = when produce() was called); returns (acknowledged, created) for each
    (ms, this machine's clock)."""
    ack_at: dict[int, tuple[float, float]] = {}

    def delivered(err: object, msg: object) -> None:
        if err is None:
            number = int(msg.value()[1:11])  # type: ignore[attr-defined]
            ack_at[number] = (time.time() * 1000, msg.timestamp()[1])  # type: ignore[attr-defined]

    start = time.monotonic()
    for i in range(rate * seconds):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, value=b"x%010d" % i + b"x" * 89, on_delivery=delivered)  # type: ignore[attr-defined]
        producer.poll(0)  # type: ignore[attr-defined]
    if producer.flush(60):  # type: ignore[attr-defined]
        raise RuntimeError("the source did not take every latency record within 60 s")
    return ack_at


def quantiles(values: list[float]) -> tuple[float, float]:
    """(p50, p99) of ``values``."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[max(0, int(len(ordered) * 0.99) - 1)]


def latency(
    source: str, target: str, args: argparse.Namespace, tmp: Path
) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, samples) from source produce to target consume. Also printed,
    to tell where the time goes: the source's own acknowledgement latency at this rate
    with no mirror running, then during the measured run the source's acknowledgement,
    the mirror's share (source acknowledgement to target read, per record), and the
    mirror's own view from its /metrics (records per produced batch, latency histogram)."""
    from confluent_kafka import Consumer, Producer

    from bench.bench_broker import free_port

    producer = Producer({"bootstrap.servers": source, "linger.ms": 5, "acks": "all"})
    create_topic(source, "alone", args.partitions)
    alone = paced(producer, "alone", args.rate, args.seconds)
    a50, a99 = quantiles([acked - created for acked, created in alone.values()])
    print(
        f"  source alone, produce to ack at {args.rate:,} records/s: p50 {a50:.1f} ms, p99 {a99:.1f} ms"
    )

    topic = "latency"
    create_topic(source, topic, args.partitions)
    samples: list[float] = []
    read_at: dict[int, float] = {}
    stop = threading.Event()
    port = free_port()

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
                now = time.time() * 1000
                samples.append(now - msg.timestamp()[1])
                value = msg.value() or b""
                if value.startswith(b"x"):
                    read_at.setdefault(int(value[1:11]), now)
        consumer.close()

    with mirror(
        source,
        target,
        "lat",
        topic,
        ["--set", f"exactly.once.support={args.latency_mode}"]
        + [a for setting in args.mirror_set for a in ("--set", setting)],
        tmp / "mirror-lat.log",
        port,
    ):
        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        warmup = time.monotonic() + 120  # until the mirror runs and the reader sees its copies
        while len(samples) < 20:
            if time.monotonic() > warmup:
                raise RuntimeError("no mirrored record reached the reader in 120 s")
            producer.produce(topic, value=b"w" * 100)
            producer.poll(0.05)
        producer.flush(30)
        time.sleep(1)
        samples.clear()
        read_at.clear()
        before = scrape(port)
        ack_at = paced(producer, topic, args.rate, args.seconds)
        total = args.rate * args.seconds
        deadline = time.monotonic() + 60
        while len(read_at) < total and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        reader.join(10)
        after = scrape(port)
    if len(read_at) < total:
        print(f"  only {len(read_at):,} of {total:,} records reached the target reader in time")
    s50, s99 = quantiles([acked - created for acked, created in ack_at.values()])
    m50, m99 = quantiles([read_at[i] - ack_at[i][0] for i in read_at if i in ack_at])
    print(
        f"  with the mirror: source produce to ack p50 {s50:.1f} ms, p99 {s99:.1f} ms; "
        f"the mirror's share (source ack to target read) p50 {m50:.1f} ms, p99 {m99:.1f} ms"
    )
    batches = after.get("count", 0) - before.get("count", 0)
    records = after.get("records", 0) - before.get("records", 0)
    if batches:
        print(
            f"  mirror: {records:,.0f} records in {batches:,.0f} produced batches "
            f"({records / batches:.1f} per batch); its replication latency (source timestamp "
            f"to target ack, histogram buckets): p50 <= {bucket_quantile(before, after, 0.5)}, "
            f"p99 <= {bucket_quantile(before, after, 0.99)} s"
        )
    if not samples:
        raise RuntimeError("no latency samples")
    p50, p99 = quantiles(samples)
    return p50, p99, len(samples)


def scrape(port: int) -> dict[str, float]:
    """The mirror's latency histogram (cumulative ``le`` buckets, count) and records total."""
    import urllib.request

    out: dict[str, float] = {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            name, _, value = line.rpartition(" ")
            if name.startswith("odradek_mirror_replication_latency_seconds_bucket"):
                le = name.split('le="')[1].split('"')[0]
                out[f"le={le}"] = out.get(f"le={le}", 0) + float(value)
            elif name.startswith("odradek_mirror_replication_latency_seconds_count"):
                out["count"] = out.get("count", 0) + float(value)
            elif name.startswith("odradek_mirror_records_total"):
                out["records"] = out.get("records", 0) + float(value)
    return out


def bucket_quantile(before: dict[str, float], after: dict[str, float], q: float) -> str:
    """The smallest histogram bucket bound holding the q-quantile of the run's batches."""
    count = after.get("count", 0) - before.get("count", 0)
    bounds = sorted(
        (float(k[3:]), after[k] - before.get(k, 0)) for k in after if k.startswith("le=")
    )
    for bound, n in bounds:
        if n >= q * count:
            return "+Inf" if bound == float("inf") else f"{bound:g}"
    return "+Inf"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench mirror")
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument(
        "--latency-mode",
        default="disabled",
        choices=("disabled", "requested"),
        help="exactly.once.support of the latency run (default: at least once)",
    )
    parser.add_argument(
        "--mirror-set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a mirror setting for the latency run (e.g. fetch.min.bytes=65536)",
    )
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
            source, target, alias, "orders", args, mode, tmp,
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
