"""Loading a coordinator's partition (``odradek.internal_topic.read_partition``, what the
offset store and the transaction coordinator replay) never stops short of an
acknowledged write: while the leader's high watermark is below its log end, as after
a whole-cluster restart until the followers fetch again, the load waits (LoadError,
retried) instead of returning a cache that misses the records above it for good.

Found by test_groups_protocol.py's whole-cluster restart: a simple group's offset
committed just before the stop was gone after it, now and then."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import Callable

import pytest
from test_storage_harness import Client, make_batch, storage_clusters

from odradek.internal_topic.partition_log import LoadError, read_partition
from odradek.metadata_cache import MetadataCache
from odradek.records import DecodedBatch, DecodedRecord
from odradek.storage_client import StoragePool
from odradek.tools.launcher import Cluster as LaunchedCluster

LEADER, FOLLOWER = 100, 101


async def test_a_load_waits_for_the_high_watermark_to_reach_the_log_end(
    cluster_factory: Callable[..., LaunchedCluster],
) -> None:
    cluster = storage_clusters(cluster_factory)([LEADER, FOLLOWER])
    client = Client(cluster)
    topic = f"load-{uuid.uuid4().hex[:6]}"
    await client.create_topic(topic, assignment=[[LEADER, FOLLOWER]])
    assert (await client.produce(LEADER, topic, make_batch([b"a", b"b"]))).error_code == 0
    cache = MetadataCache()
    await cache.update(await client.metadata())
    pool = StoragePool(cache)
    seen: list[bytes | None] = []

    def apply(batch: DecodedBatch, record: DecodedRecord) -> None:
        seen.append(record.value)

    follower = cluster.nodes[FOLLOWER]
    follower.signal(signal.SIGSTOP)
    try:
        # acks=1: on the leader's log, above the high watermark the frozen follower holds.
        written = await client.produce(LEADER, topic, make_batch([b"c"]), acks=1)
        assert written.error_code == 0
        with pytest.raises(LoadError, match="below the log end"):
            await read_partition(pool, topic, 0, apply)
    finally:
        follower.signal(signal.SIGCONT)
    deadline = time.monotonic() + 30
    while True:
        seen.clear()
        try:
            assert await read_partition(pool, topic, 0, apply) == 3
            break
        except LoadError:
            assert time.monotonic() < deadline, "the follower never caught up"
            await asyncio.sleep(0.1)
    assert seen == [b"a", b"b", b"c"]
    await pool.close()
    await client.close()
