"""Set-up and inspection shared by the consumer-group compat suites: a topic created
through librdkafka's admin client (asked again when a just-started cluster's controller
is slow to answer) and a group read back with ConsumerGroupDescribe (KIP-848)."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.wire import WireClient

from odradek.protocol.messages import ConsumerGroupDescribeRequest


def make_topic(bootstrap: str, prefix: str, partitions: int, records: int = 0) -> str:
    """A new topic ``<prefix>-<random>`` of ``partitions`` partitions (replication 1),
    holding ``records`` records spread round-robin over its partitions."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for attempt in range(3):
        # librdkafka gives up waiting for the controller of a cluster that has just
        # started on a busy machine ("Failed while waiting for controller"): ask again.
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])[name].result(90)
            break
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if code != KafkaError._TIMED_OUT or attempt == 2:
                raise
    if records:
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(records):
            producer.produce(name, f"v{i}".encode(), partition=i % partitions)
        producer.flush(30)
    return name


def describe_group(bootstrap: str, group: str) -> Any:
    """The group as ConsumerGroupDescribe v1 answers it (its error code unchecked)."""
    with WireClient(bootstrap) as wire:
        response = wire.request(69, 1, ConsumerGroupDescribeRequest(group_ids=[group]))
    return response.groups[0]
