"""Replication cost: acks=all with replication factor 3 against acks=1 with factor 1.

One local cluster of three storage nodes (started here unless ``--bootstrap`` names
one), two topics with the same partition count: ``bench-rf1`` (replication factor 1)
and ``bench-rf3`` (factor 3, ``min.insync.replicas`` 2). In the same run:

1. throughput: kcat (librdkafka 2.16 from the confluent-kafka wheel, loaded through a
   ``librdkafka.so.1`` symlink and ``LD_LIBRARY_PATH``; Debian's own librdkafka 2.0.2
   when that is missing) sends ``--records`` (1,000,000) lines of ``--record-size``
   (100) bytes to each topic — acks=1 to RF 1, acks=all to RF 3 — and the ratio of
   the two rates (medians of ``--repeat`` alternating runs) is the figure of merit
   (goal >= 0.5 on a 2-core machine);
2. latency: a confluent-kafka producer paced at ``--rate`` (2,000) msgs/s for
   ``--seconds`` (10) times every message from ``produce()`` to its delivery callback
   and prints percentiles, acks=all/RF 3 next to acks=1/RF 1.

    python -m bench replication [--records=N] [--record-size=B] [--partitions=P]
                                [--repeat=K] [--rate=R] [--seconds=S] [--bootstrap=HOST:PORT]

(``--name=value`` form: ``python -m bench`` treats bare words as benchmark names.)
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.tools.launcher import Cluster, ClusterOptions

RF1, RF3 = "bench-rf1", "bench-rf3"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench replication")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="throughput runs per topic (median)")
    p.add_argument("--rate", type=int, default=2000, help="msgs/s of the latency run")
    p.add_argument("--seconds", type=float, default=10.0, help="length of each latency run")
    p.add_argument("--bootstrap", default="", help="use a running cluster (3 storage nodes)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------- kcat with librdkafka 2.16


def kcat_env(workdir: Path) -> tuple[dict[str, str], str]:
    """Environment that makes Debian's kcat load the wheel's librdkafka, and its version."""
    env = dict(os.environ)
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(glob.glob(str(libs / "librdkafka-*.so.1")))
    if found:
        link = workdir / "librdkafka.so.1"
        link.unlink(missing_ok=True)
        link.symlink_to(found[0])
        env["LD_LIBRARY_PATH"] = f"{workdir}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    version = subprocess.run(
        ["kcat", "-V"], env=env, capture_output=True, text=True, timeout=10
    ).stdout
    lib = next((line for line in version.splitlines() if "librdkafka" in line), "?")
    return env, lib.strip()


def make_input(path: Path, records: int, size: int) -> None:
    """``records`` lines of ``size`` bytes each (newline excluded), written in big chunks."""
    line = (b"x" * max(0, size - 8)) + b"%07d\n"
    chunk = 100_000
    with open(path, "wb") as f:
        for start in range(0, records, chunk):
            f.write(
                b"".join(line % (i % 10_000_000) for i in range(start, min(records, start + chunk)))
            )


def kcat_produce(bootstrap: str, topic: str, acks: str, source: Path, env: dict[str, str]) -> float:
    cmd = [
        "kcat",
        "-P",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-l",
        "-X",
        f"acks={acks}",
        "-X",
        "linger.ms=10",
        "-X",
        "batch.size=1000000",
        "-X",
        "queue.buffering.max.kbytes=1048576",
        "-X",
        "enable.idempotence=false",
        str(source),
    ]
    start = time.perf_counter()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"kcat failed ({result.returncode}): {result.stderr[-2000:]}")
    return took


def count_records(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
    try:
        total = 0
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += high - low
        return total
    finally:
        consumer.close()


# ---------------------------------------------------------------------- latency


def latency_run(
    bootstrap: str, topic: str, acks: str, rate: int, seconds: float, size: int
) -> list[float]:
    """Milliseconds from produce() to the delivery callback, for every delivered message."""
    latencies: list[float] = []
    failures = 0

    def delivered(err: object, _msg: object, sent: float) -> None:
        nonlocal failures
        if err is None:
            latencies.append((time.perf_counter() - sent) * 1000.0)
        else:
            failures += 1

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": False}
    )
    payload = b"y" * size
    total = int(rate * seconds)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            producer.poll(due - now)
        sent = time.perf_counter()
        producer.produce(
            topic, payload, on_delivery=lambda err, msg, sent=sent: delivered(err, msg, sent)
        )
        producer.poll(0)
    producer.flush(60)
    if failures:
        print(f"  {failures} messages failed", flush=True)
    return latencies


def percentiles(values: list[float]) -> str:
    if not values:
        return "no deliveries"
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return (
        f"p50 {at(0.50):6.2f} ms  p95 {at(0.95):6.2f} ms  p99 {at(0.99):6.2f} ms  "
        f"max {ordered[-1]:6.2f} ms  mean {statistics.fmean(ordered):6.2f} ms  (n={len(ordered)})"
    )


# ---------------------------------------------------------------------- main


def create_topics(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(RF1, partitions, 1),
            NewTopic(RF3, partitions, 3, config={"min.insync.replicas": "2"}),
        ],
        request_timeout=30,
    )
    for topic, future in futures.items():
        try:
            future.result(30)
        except Exception as exc:
            if "already exists" not in str(exc).lower():
                raise RuntimeError(f"cannot create {topic}: {exc}") from exc


def main(argv: list[str]) -> None:
    args = parse(argv)
    if shutil.which("kcat") is None:
        print("kcat is not installed (Debian package kcat); skipping", file=sys.stderr)
        return
    with tempfile.TemporaryDirectory(prefix="odradek-bench-repl-") as tmp:
        work = Path(tmp)
        cluster: Cluster | None = None
        bootstrap = args.bootstrap
        if not bootstrap:
            cluster = Cluster(
                ClusterOptions(
                    data_dir=work / "cluster", port=0, storage_nodes=3, with_groups=False
                )
            )
            cluster.start()
            bootstrap = cluster.bootstrap_servers
        try:
            create_topics(bootstrap, args.partitions)
            env, lib = kcat_env(work)
            source = work / "records.txt"
            make_input(source, args.records, args.record_size)
            mb = args.records * args.record_size / 1e6
            print(f"kcat with {lib}", flush=True)
            print(
                f"{args.records:,} records x {args.record_size} B, {args.partitions} partitions",
                flush=True,
            )
            times: dict[str, list[float]] = {RF1: [], RF3: []}
            for round_ in range(args.repeat):  # alternating, so drift hits both alike
                for topic, acks in ((RF1, "1"), (RF3, "all")):
                    took = kcat_produce(bootstrap, topic, acks, source, env)
                    times[topic].append(took)
                    print(
                        f"  run {round_ + 1} {topic} acks={acks:<3}: {took:7.2f} s "
                        f"{args.records / took:10,.0f} msgs/s {mb / took:7.2f} MB/s",
                        flush=True,
                    )
            for topic in (RF1, RF3):
                stored = count_records(bootstrap, topic, args.partitions)
                sent = args.records * args.repeat
                note = "" if stored >= sent else f"  WARNING: sent {sent:,}"
                print(f"  {topic} holds {stored:,} records{note}")
            results = {topic: statistics.median(t) for topic, t in times.items()}
            for topic, acks in ((RF1, "1"), (RF3, "all")):
                took = results[topic]
                print(
                    f"  median {topic} acks={acks:<3}: {args.records / took:10,.0f} msgs/s "
                    f"{mb / took:7.2f} MB/s"
                )
            ratio = results[RF1] / results[RF3]
            verdict = "meets" if ratio >= 0.5 else "below"
            print(f"throughput ratio acks=all RF3 / acks=1 RF1: {ratio:.2f} ({verdict} goal 0.5)")
            print(f"produce latency at {args.rate} msgs/s for {args.seconds:.0f} s:", flush=True)
            for topic, acks in ((RF1, "1"), (RF3, "all")):
                lat = latency_run(bootstrap, topic, acks, args.rate, args.seconds, args.record_size)
                print(f"  {topic} acks={acks:<3}: {percentiles(lat)}", flush=True)
        finally:
            if cluster is not None:
                cluster.stop()
