"""``make fuzz``: the frame fuzzer against a fresh cluster, with a real client throughout.

Starts a cluster (controller, storage node, offsets, coordinator, transactions,
gateway) in a temp dir, then runs :func:`odradek.tools.fuzz_frames.fuzz` for
``--frames`` frames (default 100000; the issue's campaign is 1000000) while a
confluent-kafka producer writes with acks=all every 200 ms. Prints frames/second,
hung connections, dead services, the gateway's RSS before/after and the client's
failures; exits non-zero on any hang, crash or client failure.

    python -m bench.fuzz [--frames N] [--seed S] [--concurrency C]
    make fuzz ARGS="--frames 1000000"
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from odradek.tools.fuzz_frames import fuzz
from odradek.tools.launcher import Cluster, ClusterOptions


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz")
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory(prefix="odradek-fuzz-") as tmp:
        cluster = Cluster(ClusterOptions(data_dir=Path(tmp), port=0, console=False))
        cluster.start()
        try:
            bootstrap = cluster.bootstrap_servers
            AdminClient({"bootstrap.servers": bootstrap}).create_topics(
                [NewTopic("fuzz-client", 1, 1)]
            )["fuzz-client"].result(60)
            gateway = next(s for s in cluster.services if s.spec.kind == "gateway")
            rss_before = _rss_mib(gateway.process.pid)
            stop = threading.Event()
            delivered, failures = [0], [0]

            def client() -> None:
                producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})

                def done(err: object, _msg: object) -> None:
                    if err is None:
                        delivered[0] += 1
                    else:
                        failures[0] += 1

                while not stop.is_set():
                    producer.produce("fuzz-client", b"x", on_delivery=done)
                    producer.flush(30)
                    stop.wait(0.2)

            thread = threading.Thread(target=client, daemon=True)
            thread.start()
            host, port = bootstrap.split(",")[0].rsplit(":", 1)
            print(f"fuzzing {bootstrap} with {args.frames} frames (seed {args.seed})", flush=True)
            report = asyncio.run(
                fuzz(
                    host,
                    int(port),
                    args.frames,
                    seed=args.seed,
                    concurrency=args.concurrency,
                    progress=30,
                )
            )
            stop.set()
            thread.join(60)
            time.sleep(1)
            dead = [s.spec.name for s in cluster.dead()]
            rss_after = _rss_mib(gateway.process.pid) if not dead else 0.0
            print(report.summary())
            print(f"gateway RSS {rss_before:.0f} MiB -> {rss_after:.0f} MiB")
            print(f"real client: {delivered[0]} delivered, {failures[0]} failed")
            print(f"dead services: {dead or 'none'}")
            if report.hung_examples:
                print("hung bursts (api key, version, cid of each frame):", report.hung_examples)
            return 1 if report.hung or dead or failures[0] or not delivered[0] else 0
        finally:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
