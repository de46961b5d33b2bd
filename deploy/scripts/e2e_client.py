#!/usr/bin/env python3
"""The client side of ``make compose-e2e``: a Kafka round trip through the gateway.

Creates a topic, produces ``--messages`` records with acks=all and reads them back
with kafka-python, first by partition assignment and then, when the cluster serves
consumer groups, through a group with a commit (so the coordinator and offset store
are on the path). Prints one JSON line with what it saw; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

from kafka.errors import IncompatibleBrokerVersion


def round_trip(bootstrap: str, messages: int, timeout: float, use_group: bool) -> dict[str, object]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + timeout
    while True:  # the gateway may be healthy a moment before metadata settles
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, value=b"m-%d" % i) for i in range(messages)]
        producer.flush(timeout=timeout)
        offsets = [f.get(timeout=timeout).offset for f in futures]
    finally:
        producer.close(timeout=10)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    parts = [TopicPartition(topic, p) for p in range(3)]
    consumer.assign(parts)
    consumer.seek_to_beginning()
    seen: set[bytes] = set()
    try:
        while len(seen) < messages and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.update(r.value for r in records)
    finally:
        consumer.close()
    result: dict[str, object] = {
        "topic": topic,
        "produced": len(offsets),
        "consumed": len(seen),
        "ok": len(seen) == messages,
    }
    if use_group:
        try:
            result.update(_group_round_trip(bootstrap, topic, messages, deadline))
        except IncompatibleBrokerVersion:
            result["group"] = "not served by the gateway yet (no FindCoordinator)"
        else:
            result["ok"] = bool(result["ok"]) and result["group_committed"] == messages
    return result


def _group_round_trip(
    bootstrap: str, topic: str, messages: int, deadline: float
) -> dict[str, object]:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata

    group = f"e2e-group-{uuid.uuid4().hex[:6]}"
    gc = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got = 0
    try:
        while got < messages and time.monotonic() < deadline:
            got += sum(len(v) for v in gc.poll(timeout_ms=500).values())
        positions = {tp: gc.position(tp) for tp in gc.assignment()}
        gc.commit({tp: OffsetAndMetadata(pos, "", -1) for tp, pos in positions.items()})
        committed = sum(gc.committed(tp) or 0 for tp in positions)
    finally:
        gc.close()
    return {"group": group, "group_consumed": got, "group_committed": committed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--group", action="store_true", help="also consume through a group")
    args = parser.parse_args(argv)
    try:
        result = round_trip(args.bootstrap, args.messages, args.timeout, args.group)
    except Exception as exc:
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
