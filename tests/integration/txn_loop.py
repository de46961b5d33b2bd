"""A consume-transform-produce loop, exactly once (KIP-98/447), as its own process.

    python txn_loop.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [--idle-exit S]

Reads INPUT as a member of GROUP (read_committed), writes each record to OUTPUT's
partition of the same number with ``!`` appended to its value, and commits the
consumed offsets in the same transaction (``send_offsets_to_transaction``), so the
output holds every input record exactly once whatever process dies when. The
transactional id is fixed: a restarted loop fences its killed predecessor and the
coordinator aborts what that one left open. Prints ``COMMITTED <n>`` after every
transaction; exits 0 after ``--idle-exit`` seconds without input (default: never).
Used by tests/integration/test_transactions_kill9.py and the anomaly tests.
"""

from __future__ import annotations

import argparse
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def rewind(consumer: Consumer) -> None:
    """Back to the committed offsets: an aborted transaction's input is read again."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=30):
        offset = tp.offset if tp.offset >= 0 else confluent_kafka.OFFSET_BEGINNING
        consumer.seek(TopicPartition(tp.topic, tp.partition, offset))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "transactional_id"):
        parser.add_argument(name)
    parser.add_argument("--idle-exit", type=float, default=0.0)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args(argv)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": 30000,
            "linger.ms": 5,
        }
    )
    try:
        return run(args, consumer, producer)
    except KafkaException as exc:  # fenced by a successor, or another fatal error
        error = exc.args[0]
        print(f"FATAL {error.name()} {error.str()}", flush=True)
        return 1


def run(args: argparse.Namespace, consumer: Consumer, producer: Producer) -> int:
    producer.init_transactions(120)
    consumer.subscribe([args.input])
    idle_since = time.monotonic()
    while True:
        messages = [m for m in consumer.consume(args.batch, 0.5) if m.error() is None]
        if not messages:
            if args.idle_exit and time.monotonic() - idle_since > args.idle_exit:
                return 0
            continue
        idle_since = time.monotonic()
        positions: dict[int, int] = {}
        producer.begin_transaction()
        for m in messages:
            part = m.partition() or 0
            value = (m.value() or b"") + b"!"
            while True:
                try:
                    producer.produce(args.output, key=m.key(), value=value, partition=part)
                    break
                except BufferError:
                    producer.poll(0.1)
            positions[part] = max(positions.get(part, -1), (m.offset() or 0) + 1)
        offsets = [TopicPartition(args.input, p, o) for p, o in sorted(positions.items())]
        try:
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 120)
            while True:
                try:
                    producer.commit_transaction(120)
                    break
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
        except KafkaException as exc:
            error = exc.args[0]
            if not error.txn_requires_abort():
                raise
            print(f"ABORTED {error.name()}", flush=True)
            producer.abort_transaction(120)
            rewind(consumer)
            continue
        print(f"COMMITTED {len(messages)}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
