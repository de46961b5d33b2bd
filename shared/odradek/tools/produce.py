"""``odradek produce``: kafka-console-producer and kafka-producer-perf-test in one tool.

Two modes:

- Lines (default): every line of stdin or ``--file`` becomes one record, parsed by
  the console producer's ``--property`` settings (``parse.key``, ``key.separator``,
  ``parse.headers``, ``null.marker``, ... see :mod:`odradek.tools.record_format`).
  Nothing is printed for a small run; a run longer than ``--reporting-interval``
  prints a rate line to stderr now and then (not while typing at a terminal).
- Synthetic (``--num-records N [--record-size B]``): N records of B random letters,
  reported like kafka-producer-perf-test on stdout: a line per interval and a total
  with latency percentiles.

``--throughput`` paces either mode. Failed sends are counted; the first failure is
reported on stderr and the exit code is 1. The producer is a plain kafka-python
``KafkaProducer`` (idempotent with ``--acks all``, the default), so any Kafka broker
works.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

import kafka.errors as kafka_errors
from kafka import KafkaProducer

from odradek.tools.common import (
    DEFAULT_REPORTING_INTERVAL_MS,
    EXIT_INTERRUPTED,
    Progress,
    ToolError,
    UsageError,
    add_connection_arguments,
    client_properties,
    connect,
    connection_config,
    describe_exception,
    interrupt_on_sigterm,
    parse_key_values,
    run_tool,
)
from odradek.tools.perf_stats import ProducerStats, Throttle
from odradek.tools.record_format import LineFormat, RecordFormatError

PREFIX = "odradek produce: "
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
DEFAULT_RECORD_SIZE = 100
DEFAULT_LINGER_MS = 5  # Kafka 4.x clients' default; kafka-python's is 0
_LETTERS = bytes(65 + (i % 26) for i in range(256))  # random byte -> A..Z
_PAYLOAD_SLACK = 4096
MAX_UNACKNOWLEDGED = 200_000


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "produce",
        help="send lines from stdin/a file, or synthetic records, to a topic",
        description="Produce records like kafka-console-producer (one record per input "
        "line) or, with --num-records, like kafka-producer-perf-test.",
    )
    add_connection_arguments(p)
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument("--file", type=Path, default=None, help="read lines from this file, not stdin")
    p.add_argument(
        "--num-records", type=int, default=None, metavar="N", help="send N synthetic records"
    )
    p.add_argument(
        "--record-size",
        type=int,
        default=None,
        metavar="BYTES",
        help=f"size of each synthetic record (default {DEFAULT_RECORD_SIZE})",
    )
    p.add_argument(
        "--throughput",
        type=float,
        default=-1,
        metavar="N",
        help="send at most about N records/sec (default: as fast as possible)",
    )
    p.add_argument("--acks", choices=("all", "-1", "0", "1"), default="all", help="default all")
    p.add_argument("--compression-type", choices=COMPRESSION_TYPES, default="none")
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="line reader setting: parse.key, key.separator, parse.headers, "
        "headers.delimiter, headers.separator, headers.key.separator, null.marker, "
        "ignore.error (repeatable)",
    )
    p.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Kafka producer config, e.g. linger.ms=10 or batch.size=65536 (repeatable)",
    )
    p.add_argument(
        "--reporting-interval",
        type=int,
        default=DEFAULT_REPORTING_INTERVAL_MS,
        metavar="MS",
        help=f"how often long runs print progress (default {DEFAULT_REPORTING_INTERVAL_MS})",
    )
    p.set_defaults(func=lambda a: run_tool(_run, a, PREFIX))


class Backlog:
    """Bounds records sent but not yet acknowledged (kafka-python has no ``buffer.memory``).

    Every ``stride``-th future is remembered; once more than ``limit`` records are
    outstanding, the oldest remembered one is waited for, so a slow cluster slows the
    sender instead of growing its memory without end.
    """

    def __init__(self, limit: int = MAX_UNACKNOWLEDGED, stride: int = 1000) -> None:
        self.stride = stride
        self.marks: deque[Any] = deque()
        self.max_marks = max(1, limit // stride)

    def sent(self, index: int, future: Any) -> None:
        if index % self.stride:
            return
        self.marks.append(future)
        if len(self.marks) > self.max_marks:
            oldest = self.marks.popleft()
            try:
                oldest.get()
            except kafka_errors.KafkaError:
                pass  # its errback counted it


class SendErrors:
    """Failed sends, counted from the client's I/O thread; the first one is kept to report."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.first: str | None = None

    def __call__(self, exc: BaseException) -> None:
        with self._lock:
            self.count += 1
            if self.first is None:
                self.first = describe_exception(exc)


def _check_args(args: argparse.Namespace) -> None:
    if args.num_records is not None:
        if args.file is not None:
            raise UsageError("--num-records generates records; it cannot be combined with --file")
        if args.num_records <= 0:
            raise UsageError("--num-records should be greater than zero")
    elif args.record_size is not None:
        raise UsageError("--record-size needs --num-records")
    if args.record_size is not None and args.record_size <= 0:
        raise UsageError("--record-size should be greater than zero")
    if args.num_records is not None and args.property:
        raise UsageError(
            "--property configures the line reader; it has no effect with --num-records"
        )


def _producer(args: argparse.Namespace, client_id: str) -> KafkaProducer:
    config = connection_config(args, client_id)
    acks: Any = -1 if args.acks in ("all", "-1") else int(args.acks)
    config.update(
        acks=acks,
        compression_type=None if args.compression_type == "none" else args.compression_type,
        linger_ms=DEFAULT_LINGER_MS,
        # Bounds the wait for the topic's metadata, which is the only blocking in send().
        max_block_ms=config["bootstrap_timeout_ms"],
    )
    if acks != -1:
        config["enable_idempotence"] = False  # Kafka: idempotence requires acks=all
    config.update(
        client_properties(parse_key_values(args.producer_property, "--producer-property"))
    )
    producer: KafkaProducer = connect(KafkaProducer, args, config)
    try:
        producer.partitions_for(args.topic)
    except kafka_errors.KafkaTimeoutError:
        producer.close(timeout=1)
        raise ToolError(
            f"Topic {args.topic} not present in metadata after {config['max_block_ms']} ms."
        ) from None
    except kafka_errors.KafkaError as exc:
        producer.close(timeout=1)
        raise ToolError(f"Topic {args.topic}: {describe_exception(exc)}") from None
    return producer


def _run(args: argparse.Namespace) -> int:
    _check_args(args)
    interrupt_on_sigterm()
    if args.num_records is not None:
        return _run_synthetic(args)
    try:
        line_format = LineFormat.from_properties(parse_key_values(args.property, "--property"))
    except RecordFormatError as exc:
        raise UsageError(str(exc)) from None
    if args.file is not None:
        try:
            source: IO[bytes] = open(args.file, "rb")
        except OSError as exc:
            raise ToolError(f"Cannot read {args.file}: {exc.strerror}") from None
    else:
        source = sys.stdin.buffer
    try:
        return _run_lines(args, line_format, source)
    finally:
        if source is not sys.stdin.buffer:
            source.close()


def _run_lines(args: argparse.Namespace, line_format: LineFormat, source: IO[bytes]) -> int:
    interactive = args.file is None and sys.stdin.isatty()
    prompt = interactive and sys.stdout.isatty()
    producer = _producer(args, "odradek-console-producer")
    errors = SendErrors()
    progress = Progress(
        "Sent {total} records, {rate:.1f} records/sec ({mb_rate:.2f} MB/sec)",
        args.reporting_interval / 1000.0,
        enabled=not interactive,
    )
    throttle = Throttle(args.throughput)
    backlog = Backlog()
    topic = args.topic
    interrupted = False
    failure: ToolError | None = None
    try:
        if prompt:
            _prompt()
        for number, raw in enumerate(source, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            try:
                parsed = line_format.parse(line, number)
            except RecordFormatError as exc:
                failure = ToolError(str(exc))
                break
            if parsed.key is None and parsed.value is None:
                failure = ToolError(
                    f"Line number {number} has neither a key nor a value (both null)"
                )
                break
            try:
                future = producer.send(
                    topic, value=parsed.value, key=parsed.key, headers=parsed.headers or None
                )
                future.add_errback(errors)
                backlog.sent(number, future)
            except kafka_errors.KafkaError as exc:
                errors(exc)
            progress.add(1, len(line))
            throttle.wait(progress.count)
            if prompt:
                _prompt()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        producer.close()
    if failure is not None:
        raise failure
    _report_errors(errors, progress.count, topic)
    return EXIT_INTERRUPTED if interrupted else 0


def _prompt() -> None:
    sys.stdout.write(">")
    sys.stdout.flush()


def _report_errors(errors: SendErrors, total: int, topic: str) -> None:
    if errors.count:
        raise ToolError(
            f"Error when sending {errors.count} of {total} records to topic {topic}: {errors.first}"
        )


def random_payloads(record_size: int) -> bytes:
    """Random capital letters, like Kafka's perf test; records are slices at moving offsets."""
    return os.urandom(record_size + _PAYLOAD_SLACK).translate(_LETTERS)


def _run_synthetic(args: argparse.Namespace) -> int:
    size = args.record_size or DEFAULT_RECORD_SIZE
    total = args.num_records
    producer = _producer(args, "odradek-perf-producer")
    block = random_payloads(size)
    stats = ProducerStats(total, args.reporting_interval / 1000.0, sys.stdout)
    errors = SendErrors()
    throttle = Throttle(args.throughput)
    backlog = Backlog()
    topic = args.topic
    send = producer.send
    monotonic = time.monotonic
    on_success = stats.on_success
    interrupted = False
    sent = 0
    try:
        for i in range(total):
            offset = (i * 61) % _PAYLOAD_SLACK
            value = block[offset : offset + size]
            started = monotonic()
            try:
                future = send(topic, value=value)
                future.add_callback(on_success, started, size).add_errback(errors)
                backlog.sent(i, future)
            except kafka_errors.KafkaError as exc:
                errors(exc)
            sent += 1
            throttle.wait(sent)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        producer.close()
    print(stats.total_line(), flush=True)
    _report_errors(errors, sent, topic)
    return EXIT_INTERRUPTED if interrupted else 0
