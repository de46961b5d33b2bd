"""``odradek consume``: print a topic's records like kafka-console-consumer.

Without ``--group`` the tool assigns itself every partition of the topic (or only
``--partition P``) and commits nothing; with ``--group G`` it joins the consumer
group and commits as it goes. It starts at the end of the log unless
``--from-beginning`` (or ``--offset earliest|N`` with ``--partition``) says
otherwise, and stops after ``--max-messages``, after ``--timeout-ms`` without a new
record, or on Ctrl-C/SIGTERM, then prints ``Processed a total of N messages`` on
stderr as Kafka does. Records are written as raw bytes in the console consumer's
layout (``--property print.key=true`` etc., see :mod:`odradek.tools.record_format`),
one write per fetched batch. Runs longer than ``--reporting-interval`` print a rate
line to stderr now and then.

The consumer is a plain kafka-python ``KafkaConsumer``, so any Kafka broker works.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from odradek.tools.common import (
    DEFAULT_REPORTING_INTERVAL_MS,
    EXIT_ERROR,
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
from odradek.tools.record_format import MessageFormat, RecordFormatError

PREFIX = "odradek consume: "
EARLIEST = -2
LATEST = -1
POLL_RECORDS = 500
POLL_WAIT_MS = 1000
CLOSE_TIMEOUT_MS = 5000


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "consume",
        help="print a topic's records (like kafka-console-consumer)",
        description="Consume a topic and print its records like kafka-console-consumer.",
    )
    add_connection_arguments(p)
    p.add_argument("--topic", required=True, help="the topic to consume")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest record (when the group has no committed offset)",
    )
    p.add_argument("--partition", type=int, default=None, help="consume only this partition")
    p.add_argument(
        "--offset",
        default=None,
        help="with --partition: 'earliest', 'latest' (default) or an offset to start at",
    )
    p.add_argument(
        "--max-messages", type=int, default=None, metavar="N", help="stop after N records"
    )
    p.add_argument("--group", default=None, help="consume as a member of this consumer group")
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help="stop when no record arrives for this long",
    )
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="output setting: print.key, print.value, print.timestamp, print.partition, "
        "print.offset, print.headers, key.separator, line.separator, headers.separator, "
        "null.literal (repeatable)",
    )
    p.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Kafka consumer config, e.g. fetch.max.wait.ms=100 (repeatable)",
    )
    p.add_argument(
        "--reporting-interval",
        type=int,
        default=DEFAULT_REPORTING_INTERVAL_MS,
        metavar="MS",
        help=f"how often long runs print progress (default {DEFAULT_REPORTING_INTERVAL_MS})",
    )
    p.set_defaults(func=lambda a: run_tool(_run, a, PREFIX))


def parse_offset(text: str) -> int:
    lowered = text.strip().lower()
    if lowered == "earliest":
        return EARLIEST
    if lowered == "latest":
        return LATEST
    try:
        value = int(lowered)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(
            "The provided offset value is incorrect. Valid values are 'earliest', 'latest', "
            "or a non-negative long."
        )
    return value


def _check_args(args: argparse.Namespace) -> int | None:
    """The start offset for --partition (None: follow --from-beginning)."""
    if args.offset is not None and args.partition is None:
        raise UsageError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if args.group is not None and args.partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    if args.max_messages is not None and args.max_messages <= 0:
        raise UsageError("--max-messages should be greater than zero")
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition should not be negative")
    return parse_offset(args.offset) if args.offset is not None else None


def _consumer(args: argparse.Namespace) -> KafkaConsumer:
    config: dict[str, Any] = connection_config(args, "odradek-console-consumer")
    config.update(
        group_id=args.group,
        enable_auto_commit=args.group is not None,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        allow_auto_create_topics=False,  # reading must not create what it reads
    )
    config.update(
        client_properties(parse_key_values(args.consumer_property, "--consumer-property"))
    )
    consumer: KafkaConsumer = connect(KafkaConsumer, args, config)
    return consumer


def _position(consumer: KafkaConsumer, args: argparse.Namespace, offset: int | None) -> None:
    topic = args.topic
    partitions = sorted(consumer.partitions_for_topic(topic) or ())
    if not partitions:
        raise ToolError(f"Topic '{topic}' does not exist")
    if args.group is not None:
        consumer.subscribe([topic])
        return
    if args.partition is not None:
        if args.partition not in partitions:
            raise ToolError(
                f"Partition {args.partition} does not exist in topic '{topic}' "
                f"(partitions 0-{partitions[-1]})"
            )
        partitions = [args.partition]
    assigned = [TopicPartition(topic, p) for p in partitions]
    consumer.assign(assigned)
    if offset is None:
        offset = EARLIEST if args.from_beginning else LATEST
    if offset == EARLIEST:
        consumer.seek_to_beginning(*assigned)
    elif offset == LATEST:
        consumer.seek_to_end(*assigned)
    else:
        consumer.seek(assigned[0], offset)


def _run(args: argparse.Namespace) -> int:
    offset = _check_args(args)
    try:
        formatter = MessageFormat.from_properties(parse_key_values(args.property, "--property"))
    except RecordFormatError as exc:
        raise UsageError(str(exc)) from None
    interrupt_on_sigterm()
    consumer = _consumer(args)
    status = 0
    try:
        _position(consumer, args, offset)
        status = _consume(consumer, args, formatter)
    except KeyboardInterrupt:
        pass
    finally:
        try:
            consumer.close(timeout_ms=CLOSE_TIMEOUT_MS)
        except Exception:
            pass
    return status


def _consume(consumer: KafkaConsumer, args: argparse.Namespace, formatter: MessageFormat) -> int:
    """Poll and print until a stop condition; the exit status (1 after a client error)."""
    out = sys.stdout.buffer
    limit = args.max_messages
    idle_limit = (
        args.timeout_ms / 1000.0 if args.timeout_ms is not None and args.timeout_ms >= 0 else None
    )
    progress = Progress(
        "Processed {total} messages, {rate:.1f} messages/sec ({mb_rate:.2f} MB/sec)",
        args.reporting_interval / 1000.0,
    )
    count = 0
    status = 0
    last_record = time.monotonic()
    try:
        while limit is None or count < limit:
            wait_ms = POLL_WAIT_MS
            if idle_limit is not None:
                left = idle_limit - (time.monotonic() - last_record)
                if left <= 0:
                    break
                wait_ms = max(1, min(wait_ms, int(left * 1000)))
            max_records = POLL_RECORDS if limit is None else min(POLL_RECORDS, limit - count)
            batch = consumer.poll(timeout_ms=wait_ms, max_records=max_records)
            if not batch:
                progress.tick()
                continue
            last_record = time.monotonic()
            chunks = [formatter.format(records) for records in batch.values()]
            taken = sum(len(records) for records in batch.values())
            # Counted before the bytes reach the reader: a SIGTERM sent as soon as the
            # reader sees them must not find them printed but not counted.
            count += taken
            progress.add(taken, sum(len(data) for data in chunks))
            for data in chunks:
                out.write(data)
            out.flush()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        print("Unable to write to standard out, closing consumer.", file=sys.stderr)
        _silence_stdout()
    except Exception as exc:
        print(f"{PREFIX}{describe_exception(exc)}", file=sys.stderr)
        status = EXIT_ERROR
    finally:
        print(f"Processed a total of {count} messages", file=sys.stderr, flush=True)
    return status


def _silence_stdout() -> None:
    """After the reader went away, later flushes (at exit) must not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
