"""The exactly-once output helpers on a real cluster: ``BatchPublisher`` completes
a half-published batch instead of repeating it, and ``ensure_topic`` creates topics
without the auto-creation side effects of metadata lookups."""

from __future__ import annotations

import pytest
from pipeline_kafka import read_all

from odradek.pipeline.topic_batches import (
    HEADER_BATCH,
    HEADER_SEQ,
    HEADER_WRITER,
    BatchPublisher,
    InconsistentTopicError,
    OutRecord,
    partition_for,
)
from odradek.pipeline.topics import ensure_topic
from odradek.tools.launcher import Cluster


def records(batch: int, n: int) -> list[OutRecord]:
    return [OutRecord(f"b{batch}-k{i}".encode(), f"b{batch}-v{i}".encode()) for i in range(n)]


def test_ensure_topic_creates_once(cluster: Cluster, unique_topic: str) -> None:
    bs = cluster.bootstrap_servers
    assert ensure_topic(bs, unique_topic, partitions=3) == 3
    assert ensure_topic(bs, unique_topic, partitions=5) == 3  # exists: left alone


def test_publisher_completes_a_half_published_batch(cluster: Cluster, unique_topic: str) -> None:
    bs = cluster.bootstrap_servers
    ensure_topic(bs, unique_topic, partitions=3)
    pub = BatchPublisher(bs, unique_topic, "query-1")
    first = pub.publish(0, records(0, 10))
    assert (first.planned, first.already_present, first.written) == (10, 0, 10)

    # Batch 1 crashes after a prefix went out; the replay plans the full batch again.
    full = records(1, 12)
    crashed = BatchPublisher(bs, unique_topic, "query-1")
    crashed.publish(1, full[:5])
    crashed.close()
    replay = BatchPublisher(bs, unique_topic, "query-1")
    report = replay.publish(1, full)
    assert (report.planned, report.already_present, report.written) == (12, 5, 7)
    # A second replay of the same batch writes nothing.
    assert replay.publish(1, full).written == 0
    # Another writer's records do not count as ours.
    other = BatchPublisher(bs, unique_topic, "query-2").publish(1, full)
    assert other.already_present == 0 and other.written == 12

    msgs = [m for m in read_all(bs, unique_topic, 3) if m.header(HEADER_WRITER) == b"query-1"]
    assert sorted(m.value for m in msgs) == sorted(r.value for r in records(0, 10) + full)
    for m in msgs:
        assert m.partition == partition_for(m.required_key(), 3)
    per_partition: dict[tuple[int, int], list[int]] = {}
    for m in msgs:
        per_partition.setdefault((m.partition, int(m.header(HEADER_BATCH))), []).append(
            int(m.header(HEADER_SEQ))
        )
    assert all(seqs == list(range(len(seqs))) for seqs in per_partition.values())

    # A checkpoint older than the topic (batch 0 again after batch 1) is refused.
    with pytest.raises(InconsistentTopicError, match="older than the topic"):
        replay.publish(0, records(0, 10))
    replay.close()
    pub.close()
