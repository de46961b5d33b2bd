"""Reassignment copy rate against plain follower fetch, and the replication throttle.

One local cluster of three storage nodes (100, 101, 102), in one run, node 101 always
the one copying from leader 100 (issue 12's figures):

1. plain follower fetch: ``bench-follow`` (replicas [100, 101]) gets ``--mb`` MB while
   101 is stopped; 101 restarts and catches up as an ordinary follower;
2. reassignment: ``bench-move`` (replicas [100], the same bytes) is reassigned to
   [100, 101] (AlterPartitionReassignments, KIP-455): 101 copies it as an adding
   replica, which is follower fetch through the reassignment machinery;
3. throttle: ``bench-throttled`` (replicas [100], ``--throttle-mb`` x ``--throttle-s``
   MB) is reassigned to [100, 101] with ``--throttle-mb`` MB/s set as
   kafka-reassign-partitions.sh sets it (``leader/follower.replication.throttled.rate``
   on both brokers, the throttled replica lists on the topic).

Each rate is the slope of the bytes node 101 holds for the topic (DescribeLogDirs,
sampled every ``--sample-ms``) between 10% and 90% of the total, so start-up latency
(a restart, the metadata reaching the follower) is left out of both sides alike; the
end-to-end time is printed beside it. Figures: copy/follower ratio (goal >= 0.8) and
throttled rate / setting (goal within 10%).

    python -m bench reassignment [--mb=200] [--partitions=4] [--throttle-mb=10]
                                 [--throttle-s=8] [--sample-ms=50]

(``--name=value`` form: ``python -m bench`` treats bare words as benchmark names.)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from bench.producing import produce_waiting
from odradek.tools.launcher import Cluster, ClusterOptions
from odradek.tools.reassign_admin import ReassignAdmin
from odradek.tools.reassign_files import move_map

LEADER, COPIER = 100, 101
SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "3000",
    "auto.leader.rebalance.enable": "false",
    "min.insync.replicas": "1",
}
VALUE = 16 * 1024


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench reassignment")
    p.add_argument("--mb", type=int, default=200, help="MB copied in runs 1 and 2")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--throttle-mb", type=float, default=10.0, help="throttle, MB/s")
    p.add_argument("--throttle-s", type=float, default=8.0, help="seconds of data at it")
    p.add_argument("--sample-ms", type=int, default=50)
    return p.parse_args(argv)


def create(admin: KafkaAdminClient, name: str, partitions: int, replicas: list[int]) -> None:
    admin.create_topics(
        [NewTopic(name, replica_assignments={p: list(replicas) for p in range(partitions)})]
    )


def fill(bootstrap: str, topic: str, partitions: int, nbytes: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 19,
            "message.max.bytes": 1 << 21,
        }
    )
    value = b"r" * VALUE
    for i in range(max(1, nbytes // VALUE)):
        produce_waiting(producer, topic, value, i % partitions)
    assert producer.flush(300) == 0, f"{topic}: records not delivered"


def load() -> str:
    """The 1-minute load average: the machine may be shared, so each figure carries it."""
    return f"load {os.getloadavg()[0]:.1f}"


def bytes_on(ops: ReassignAdmin, broker: int, topic: str) -> int:
    return sum(
        r.size
        for (t, _p), replicas in ops.log_dirs([broker]).items()
        if t == topic
        for r in replicas
        if r.broker == broker and not r.future
    )


def copy_rate(
    ops: ReassignAdmin, topic: str, total: int, sample_s: float, done: Callable[[], bool]
) -> tuple[float, float]:
    """(bytes/s between 10% and 90% of ``total`` on the copier, seconds until done)."""
    start = time.perf_counter()
    samples: list[tuple[float, int]] = []
    while True:
        now, held = time.perf_counter(), bytes_on(ops, COPIER, topic)
        samples.append((now, held))
        if held >= 0.999 * total and done():
            break
        if now - start > 900:
            raise RuntimeError(f"{topic}: {held} of {total} bytes after 900 s")
        time.sleep(sample_s)
    lo = next(s for s in samples if s[1] >= 0.1 * total)
    hi = next(s for s in samples if s[1] >= 0.9 * total)
    if hi[0] <= lo[0]:  # faster than one sample: the whole run bounds it
        return total / max(samples[-1][0] - start, sample_s), samples[-1][0] - start
    return (hi[1] - lo[1]) / (hi[0] - lo[0]), samples[-1][0] - start


def leader_bytes(ops: ReassignAdmin, topic: str) -> int:
    return bytes_on(ops, LEADER, topic)


def reassign_to_copier(ops: ReassignAdmin, topic: str, partitions: int) -> None:
    errors = ops.alter({(topic, p): [LEADER, COPIER] for p in range(partitions)})
    assert not errors, errors


def main(argv: list[str]) -> None:
    args = parse(argv)
    sample_s = args.sample_ms / 1000.0
    with tempfile.TemporaryDirectory(prefix="bench-reassign-") as tmp:
        cluster = Cluster(
            ClusterOptions(
                data_dir=Path(tmp) / "data",
                port=0,
                storage_nodes=3,
                replication_factor=1,
                settings=SETTINGS,
                console=False,
            )
        )
        cluster.start()
        kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        ops = ReassignAdmin(kadmin)
        try:
            boot = cluster.bootstrap_servers
            n = args.partitions
            nbytes = args.mb * 1_000_000
            throttle = int(args.throttle_mb * 1_000_000)
            create(kadmin, "bench-follow", n, [LEADER, COPIER])
            create(kadmin, "bench-move", n, [LEADER])
            create(kadmin, "bench-throttled", n, [LEADER])
            print(
                f"3 storage nodes; node {COPIER} copies from leader {LEADER}; "
                f"{args.mb} MB over {n} partitions, {VALUE} B records",
                flush=True,
            )

            # 1. plain follower fetch: 101 misses the writes, then catches up.
            copier = cluster.service(f"storage-{COPIER}")
            copier.process.terminate()
            copier.process.wait(60)
            fill(boot, "bench-follow", n, nbytes)
            fill(boot, "bench-move", n, nbytes)
            fill(boot, "bench-throttled", n, int(throttle * args.throttle_s))
            follow_total = leader_bytes(ops, "bench-follow")
            cluster.restart(f"storage-{COPIER}")
            follow, follow_s = copy_rate(ops, "bench-follow", follow_total, sample_s, lambda: True)
            print(
                f"  follower fetch (catch-up)   {follow / 1e6:8.1f} MB/s  "
                f"({follow_total / 1e6:.0f} MB, {follow_s:.1f} s from restart)  {load()}",
                flush=True,
            )

            # 2. the same bytes copied by a reassignment adding 101.
            move_total = leader_bytes(ops, "bench-move")
            reassign_to_copier(ops, "bench-move", n)
            move, move_s = copy_rate(
                ops, "bench-move", move_total, sample_s, lambda: not ops.ongoing()
            )
            print(
                f"  reassignment copy           {move / 1e6:8.1f} MB/s  "
                f"({move_total / 1e6:.0f} MB, {move_s:.1f} s from AlterPartitionReassignments)  "
                f"ratio {move / follow:.2f} (goal >= 0.8)  {load()}",
                flush=True,
            )

            # 3. a throttled reassignment.
            total = leader_bytes(ops, "bench-throttled")
            current = ops.assignment(["bench-throttled"])
            targets = {(t, p): [LEADER, COPIER] for (t, p) in current}
            ops.set_throttles(move_map({}, targets, current), throttle)
            reassign_to_copier(ops, "bench-throttled", n)
            rate, took = copy_rate(
                ops, "bench-throttled", total, sample_s, lambda: not ops.ongoing()
            )
            ops.clear_throttles([LEADER, COPIER], ["bench-throttled"])
            print(
                f"  throttled at {throttle / 1e6:.1f} MB/s        {rate / 1e6:8.2f} MB/s  "
                f"({total / 1e6:.0f} MB, {took:.1f} s)  "
                f"rate/setting {rate / throttle:.3f} (goal within 10%)  {load()}",
                flush=True,
            )
            if throttle > 0.8 * min(follow, move):
                print(
                    "  (the throttle is near the unthrottled rate here, so it hardly binds: "
                    "lower --throttle-mb)",
                    flush=True,
                )
        finally:
            kadmin.close()
            cluster.stop()
