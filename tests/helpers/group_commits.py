"""A consumer's synchronous offset commit on a cluster that has just started.

Right after start the group coordinator may still be loading its shard of
``__consumer_offsets``: OffsetCommit answers COORDINATOR_LOAD_IN_PROGRESS (retriable,
as in Kafka), which librdkafka retries a few times on its own
(``rd_kafka_handle_OffsetCommit``) and then hands to the application. On a quiet
machine the first commit after start succeeds (about 0.4 s, FindCoordinator and the
load included); on one running two suites the load can outlast those retries.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition


def commit_when_loaded(
    consumer: Consumer, offsets: Sequence[TopicPartition], timeout: float = 60.0
) -> None:
    """``consumer.commit(offsets, asynchronous=False)``, again while the coordinator is
    loading; any other error, or loading past ``timeout``, is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            consumer.commit(offsets=list(offsets), asynchronous=False)
            return
        except KafkaException as exc:
            loading = exc.args[0].code() == KafkaError.COORDINATOR_LOAD_IN_PROGRESS
            if not loading or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
