"""A consumer's Fetch as the project's own clients send it: sessionless (a full fetch,
KIP-227's session_id 0 and epoch -1, the message's defaults) from ``replica_id`` -1,
one entry per partition at its position. The console's message browser, the mirror's
source reads and the Spark source's partition reads build it here.

Isolation levels are Kafka's ``org.apache.kafka.common.IsolationLevel`` ids (KIP-98):
a read_committed fetch stops at the last stable offset and carries the aborted
transactions.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.protocol.messages import FetchRequest

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def consumer_fetch(
    positions: Mapping[tuple[str, int], int],
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int = READ_UNCOMMITTED,
) -> FetchRequest:
    """A FetchRequest reading each ``(topic, partition)`` from its offset, topics in
    the order their first partition comes in ``positions``."""
    by_topic: dict[str, list[FetchRequest.FetchTopic.FetchPartition]] = {}
    for (topic, partition), offset in positions.items():
        by_topic.setdefault(topic, []).append(
            FetchRequest.FetchTopic.FetchPartition(
                partition=partition,
                fetch_offset=offset,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            )
        )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )
