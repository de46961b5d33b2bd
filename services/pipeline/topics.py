"""Topic housekeeping for the tools and jobs: create-if-missing and partition counts.

Metadata is asked through a consumer-type client: librdkafka's admin and producer
clients request topic auto-creation when they ask about one topic, so merely
looking at a missing topic would create it with the broker's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def metadata_client(conf: Mapping[str, Any]) -> Consumer:
    """A consumer used only for Metadata requests (never assigned, never subscribed)."""
    return Consumer(
        {
            "log_level": 2,  # failed connections are reported by the caller, not logged
            **conf,
            "group.id": conf.get("group.id", "odradek-metadata"),
            "enable.auto.commit": False,
            "allow.auto.create.topics": False,
        }
    )


def partition_count(client: Consumer, topic: str, timeout: float = 30.0) -> int:
    """Partitions of ``topic``; 0 if it does not exist."""
    md = client.list_topics(topic=topic, timeout=timeout)
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None:
        return 0
    return len(tmd.partitions)


def ensure_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    replication: int = 1,
    conf: Mapping[str, Any] | None = None,
) -> int:
    """Create ``topic`` unless it exists; return its partition count either way."""
    base = {"bootstrap.servers": bootstrap, **(conf or {})}
    admin = AdminClient(base)
    for fut in admin.create_topics([NewTopic(topic, partitions, replication)]).values():
        try:
            fut.result(30)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise
    client = metadata_client(base)
    try:
        return partition_count(client, topic)
    finally:
        client.close()
