"""A long-poll Fetch parks on the leader without reading the log while there is
nothing new, and reads once when woken (odradek.storage.fetch, issue 18): a leader
parks each follower's fetch and each consumer's once per replicated record, and the
read that found nothing built an answer only to throw it away. Two storage nodes in
this process on real logs and gRPC (test_storage_epoch_scenarios), the follower
fetching from the leader; the leader partition's reads are counted by a wrapper that
gives the same answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.waiting import wait_until_async
from test_storage_epoch_scenarios import TOPIC, Controller, Node, hw_is, values

from odradek.rpc.v1 import storage_pb2
from odradek.storage.partition import Partition

A, B = 1, 2


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Node, Node, Controller]]:
    a, b = Node(A, tmp_path), Node(B, tmp_path)
    await a.start()
    await b.start()
    ctl = Controller({A: a, B: b})
    yield a, b, ctl
    for n in (a, b):
        await n.stop()


def _count_consumer_reads(part: Partition) -> list[int]:
    """Count the reads for consumers (bounded by the high watermark; a follower's read
    goes to the log end and is not counted: its rounds expire every 100 ms here)."""
    calls = [0]
    real = part.read

    def counting(fetch_offset: int, max_bytes: int, **kwargs: object) -> bytes:
        if kwargs.get("max_offset") is not None:
            calls[0] += 1
        return real(fetch_offset, max_bytes, **kwargs)  # type: ignore[arg-type]

    part.read = counting  # type: ignore[method-assign]
    return calls


def _consumer_fetch(offset: int, wait_ms: int) -> storage_pb2.FetchRequest:
    return storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            storage_pb2.FetchPartition(
                topic=TOPIC,
                partition=0,
                fetch_offset=offset,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
            )
        ],
    )


async def test_a_parked_long_poll_reads_once_when_woken(
    pair: tuple[Node, Node, Controller],
) -> None:
    a, b, ctl = pair
    ctl.publish(leader=A, epoch=0, isr=[A, B])
    assert (await a.produce(b"m0", acks=-1)).error_code == 0
    await wait_until_async(lambda: hw_is(b, 1), "B's high watermark at 1")
    part = a.node.replicas.get(TOPIC, 0)
    assert part is not None
    reads = _count_consumer_reads(part)
    poll = asyncio.ensure_future(a.node.handlers.fetch.fetch_split(_consumer_fetch(1, 10_000)))
    await asyncio.sleep(0.3)
    assert not poll.done()
    assert reads[0] == 0  # parked at the high watermark: nothing read
    assert (await a.produce(b"m1", acks=-1)).error_code == 0
    response, records = await asyncio.wait_for(poll, 10)
    assert response.partitions[0].high_watermark == 2
    assert values(bytes(records[0])) == [b"m1"]
    assert reads[0] == 1  # once, when the high watermark moved

    # A poll that times out still answers, with the partition's state.
    reads[0] = 0
    response, records = await a.node.handlers.fetch.fetch_split(_consumer_fetch(2, 200))
    assert records == [b""] and response.partitions[0].high_watermark == 2
    assert response.partitions[0].error_code == 0
    assert reads[0] == 1
