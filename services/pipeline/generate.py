"""``python -m odradek.pipeline.generate``: write nginx access-log lines (combined
format) to a topic at a steady rate, with a progress line every second.

    python -m odradek.pipeline.generate --bootstrap-server 127.0.0.1:9092 \\
        --topic nginx_access_log --rate 2000 --count 100000

The topic is created with 3 partitions if missing (the seed article's
``nginx_access_log``). Lines carry the wall-clock time unless ``--start-time`` is
given: then line ``i`` is stamped ``start + i / --log-rate`` seconds, so a test can
write an hour of traffic in seconds. Records have no key (as a log shipper sends
them), spread round-robin over the partitions like a log shipper's, through an
idempotent producer; the exit code is 1 if any line was not delivered.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import TextIO

from confluent_kafka import KafkaError, Message, Producer

from odradek.pipeline.logformat import format_line
from odradek.pipeline.topics import ensure_topic
from odradek.pipeline.traffic import TrafficModel

DEFAULT_TOPIC = "nginx_access_log"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m odradek.pipeline.generate", description=__doc__.split("\n")[0]
    )
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", default=DEFAULT_TOPIC)
    p.add_argument(
        "--rate", type=float, required=True, help="lines per second (0: as fast as possible)"
    )
    p.add_argument(
        "--count", type=int, default=0, help="stop after this many lines (0: run until Ctrl-C)"
    )
    p.add_argument("--partitions", type=int, default=3, help="partitions if the topic is created")
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clients", type=int, default=500, help="distinct client addresses")
    p.add_argument(
        "--start-time", help="ISO time of the first line (simulated clock); default: now"
    )
    p.add_argument(
        "--log-rate",
        type=float,
        default=0.0,
        help="lines per second of simulated time (default: --rate, or 100)",
    )
    p.add_argument("--progress-interval", type=float, default=1.0)
    p.add_argument(
        "-X",
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra librdkafka producer setting",
    )
    return p.parse_args(argv)


class Progress:
    def __init__(self, out: TextIO, interval: float) -> None:
        self.out = out
        self.interval = interval
        self.started = time.monotonic()
        self.last = self.started
        self.sent = 0
        self.failed = 0
        self.first_error: str | None = None

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed += 1
            self.first_error = self.first_error or str(err)

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.interval:
            self.last = now
            elapsed = max(now - self.started, 1e-9)
            print(
                f"sent {self.sent} lines in {elapsed:.1f}s ({self.sent / elapsed:.0f}/s), "
                f"failed {self.failed}",
                file=self.out,
                flush=True,
            )


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    partitions = ensure_topic(
        args.bootstrap_server, args.topic, args.partitions, args.replication_factor
    )
    progress = Progress(out, args.progress_interval)
    conf: dict[str, object] = {
        "bootstrap.servers": args.bootstrap_server,
        "enable.idempotence": True,
        "linger.ms": 20,
        "delivery.report.only.error": True,
        "on_delivery": progress.on_delivery,
    }
    for item in args.producer_property:
        key, _, value = item.partition("=")
        conf[key] = value
    producer = Producer(conf)
    model = TrafficModel(seed=args.seed, clients=args.clients)
    simulated = datetime.fromisoformat(args.start_time) if args.start_time else None
    if simulated is not None and simulated.tzinfo is None:
        simulated = simulated.replace(tzinfo=UTC)
    log_rate = args.log_rate or args.rate or 100.0
    rate = args.rate
    start = time.monotonic()
    try:
        while not args.count or progress.sent < args.count:
            due = int((time.monotonic() - start) * rate) + 1 if rate > 0 else progress.sent + 1000
            if args.count:
                due = min(due, args.count)
            while progress.sent < due:
                if simulated is not None:
                    t = simulated + timedelta(seconds=progress.sent / log_rate)
                else:
                    t = datetime.now(UTC)
                line = format_line(model.entry(t)).encode()
                try:
                    # Round-robin, as log shippers do: partitions advance in step.
                    producer.produce(args.topic, line, partition=progress.sent % partitions)
                except BufferError:
                    producer.poll(0.05)
                    continue
                progress.sent += 1
            producer.poll(0)
            progress.tick()
            if rate > 0 and (not args.count or progress.sent < args.count):
                time.sleep(min(0.01, 1.0 / rate))
    except KeyboardInterrupt:
        pass
    finally:
        undelivered = producer.flush(60)
        if undelivered:
            progress.failed += undelivered
            progress.first_error = progress.first_error or "flush timed out"
        progress.tick(force=True)
    if progress.failed:
        print(f"{progress.failed} lines not delivered: {progress.first_error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
