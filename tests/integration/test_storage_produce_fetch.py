"""The storage node's data paths against real processes: one controller, one storage node.

Produce/Fetch/ListOffsets/DeleteRecords over gRPC with batches built by kafka-python,
including idempotent producers, long polls and restarts (kill -9 and clean).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
from helpers.waiting import wait_until_async
from test_storage_harness import (
    Client,
    Cluster,
    batch_offsets,
    decode,
    make_batch,
    retry,
    storage_clusters,
)

from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import common_pb2, controller_pb2, storage_pb2
from odradek.tools.launcher import Cluster as LaunchedCluster

NODE = 100


@pytest.fixture(scope="module")
def rf1(module_cluster_factory: Callable[..., LaunchedCluster]) -> Cluster:
    return storage_clusters(module_cluster_factory)([NODE])


@pytest.fixture
async def client(rf1: Cluster) -> AsyncIterator[Client]:
    c = Client(rf1)
    yield c
    await c.close()


async def test_produce_fetch_round_trip_assigns_offsets(client: Client) -> None:
    await client.create_topic("rt")
    bases = []
    for i in range(3):
        result = await client.produce(NODE, "rt", make_batch([b"a%d" % i, b"b%d" % i]), acks=1)
        assert result.error_code == 0, result
        assert result.log_start_offset == 0 and result.log_append_time == -1
        bases.append(result.base_offset)
    assert bases == [0, 2, 4]
    fetched = await client.fetch(NODE, "rt", 0)
    assert fetched.error_code == 0
    assert (fetched.high_watermark, fetched.last_stable_offset, fetched.log_start_offset) == (
        6,
        6,
        0,
    )
    assert fetched.current_leader_epoch == 0
    assert decode(fetched.records) == [
        (0, b"a0"),
        (1, b"b0"),
        (2, b"a1"),
        (3, b"b1"),
        (4, b"a2"),
        (5, b"b2"),
    ]
    # An offset inside a batch returns that whole batch (the client skips below its offset).
    inside = await client.fetch(NODE, "rt", 3)
    assert batch_offsets(inside.records)[0] == (2, 3)


async def test_acks_zero_one_all_and_invalid(client: Client) -> None:
    await client.create_topic("acks")
    for acks in (0, 1, -1):
        result = await client.produce(NODE, "acks", make_batch([b"x"]), acks=acks)
        assert result.error_code == 0
    assert (await client.list_offset(NODE, "acks", -1)).offset == 3
    bad = await client.produce(NODE, "acks", make_batch([b"x"]), acks=2)
    assert bad.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert (await client.list_offset(NODE, "acks", -1)).offset == 3


async def test_long_poll_wakes_on_append_and_returns_by_max_wait(client: Client) -> None:
    await client.create_topic("poll")
    # Nothing arrives: back by max_wait_ms, empty, no error.
    start = time.monotonic()
    empty = await client.fetch(NODE, "poll", 0, max_wait_ms=400)
    elapsed = time.monotonic() - start
    assert empty.error_code == 0 and empty.records == b""
    assert 0.35 <= elapsed < 5.0, elapsed  # generous above: a loaded 2-core machine

    # A produce wakes a waiting fetch long before max_wait_ms.
    start = time.monotonic()
    waiting = asyncio.ensure_future(client.fetch(NODE, "poll", 0, max_wait_ms=10_000))
    await asyncio.sleep(0.3)  # the scenario: a window in which the empty fetch must stay parked
    assert not waiting.done()
    await client.produce(NODE, "poll", make_batch([b"wake"]), acks=1)
    fetched = await asyncio.wait_for(waiting, 5)
    elapsed = time.monotonic() - start
    assert decode(fetched.records) == [(0, b"wake")]
    assert 0.25 <= elapsed < 8.0, elapsed  # woken, not timed out at max_wait_ms (10 s)


async def test_min_bytes(client: Client) -> None:
    await client.create_topic("minb")
    await client.produce(NODE, "minb", make_batch([b"small"]), acks=1)
    # Fewer bytes than min_bytes: the fetch waits the whole max_wait_ms, then returns what it has.
    start = time.monotonic()
    fetched = await client.fetch(NODE, "minb", 0, max_wait_ms=400, min_bytes=10_000)
    assert time.monotonic() - start >= 0.35
    assert decode(fetched.records) == [(0, b"small")]
    # Enough data arriving completes it early.
    start = time.monotonic()
    waiting = asyncio.ensure_future(
        client.fetch(NODE, "minb", 0, max_wait_ms=10_000, min_bytes=10_000)
    )
    await asyncio.sleep(0.2)  # the scenario: a window in which the fetch must stay parked
    assert not waiting.done()
    await client.produce(NODE, "minb", make_batch([b"x" * 20_000]), acks=1)
    fetched = await asyncio.wait_for(waiting, 5)
    assert len(fetched.records) >= 10_000
    assert time.monotonic() - start < 8.0  # completed early, not at max_wait_ms (10 s)


async def test_byte_limits_return_the_first_batch_whole(client: Client) -> None:
    await client.create_topic("limits", partitions=2)
    big = make_batch([b"y" * 5000])
    for index in (0, 1):
        await client.produce(NODE, "limits", big, index=index, acks=1)
        await client.produce(NODE, "limits", make_batch([b"z"]), index=index, acks=1)
    # partition_max_bytes below the first batch: that batch comes whole, nothing after it.
    one = await client.fetch(NODE, "limits", 0, partition_max_bytes=100)
    assert batch_offsets(one.records) == [(0, 0)]
    assert len(one.records) > 5000
    # A total max_bytes spent by the first partition leaves nothing for the second.
    response = await client.node(NODE).Fetch(
        storage_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=100,
            partitions=[
                storage_pb2.FetchPartition(
                    topic="limits",
                    partition=i,
                    fetch_offset=0,
                    partition_max_bytes=1 << 20,
                    current_leader_epoch=-1,
                )
                for i in (0, 1)
            ],
        )
    )
    first, second = response.partitions
    assert batch_offsets(first.records) == [(0, 0)]
    assert second.error_code == 0 and second.records == b"" and second.high_watermark == 2


async def test_offset_out_of_range_carries_the_offsets(client: Client) -> None:
    await client.create_topic("oor")
    await client.produce(NODE, "oor", make_batch([b"a", b"b"]), acks=1)
    at_end = await client.fetch(NODE, "oor", 2)
    assert at_end.error_code == 0 and at_end.records == b""
    past = await client.fetch(NODE, "oor", 3, max_wait_ms=5000)
    assert past.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (past.high_watermark, past.last_stable_offset, past.log_start_offset) == (2, 2, 0)
    unknown = await client.fetch(NODE, "no-such-topic", 0)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert unknown.high_watermark == -1


async def test_bad_produces_are_refused_with_kafka_errors(client: Client) -> None:
    await client.create_topic("bad", configs={"max.message.bytes": "2000"})
    too_big = await client.produce(NODE, "bad", make_batch([b"q" * 5000]), acks=1)
    assert too_big.error_code == ErrorCode.MESSAGE_TOO_LARGE, too_big
    corrupt = bytearray(make_batch([b"hello"]))
    corrupt[-1] ^= 0xFF
    result = await client.produce(NODE, "bad", bytes(corrupt), acks=1)
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE, result
    garbage = await client.produce(NODE, "bad", b"\x00" * 70, acks=1)
    assert garbage.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), garbage
    unknown = await client.produce(NODE, "no-such-topic", make_batch([b"x"]), acks=1)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await client.list_offset(NODE, "bad", -1)).offset == 0  # nothing was appended

    # A config change applies to the open log.
    await client.alter_topic_configs("bad", {"max.message.bytes": "100000"})

    async def accepted() -> bool:
        r = await client.produce(NODE, "bad", make_batch([b"q" * 5000]), acks=1)
        return r.error_code == 0

    await wait_until_async(accepted, "the max.message.bytes change to apply", timeout=10)


async def test_idempotent_producer_sequences(client: Client) -> None:
    await client.create_topic("idem")
    pid = 4242

    def b(seq: int, epoch: int = 0, n: int = 2) -> bytes:
        return make_batch(
            [b"s%d" % (seq + i) for i in range(n)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )

    offsets = []
    for seq in range(0, 12, 2):
        result = await client.produce(NODE, "idem", b(seq))
        assert result.error_code == 0
        offsets.append(result.base_offset)
    # A retried duplicate of any of the last 5 batches answers its original offset, appends nothing.
    for i, seq in enumerate(range(2, 12, 2)):
        dup = await client.produce(NODE, "idem", b(seq))
        assert (dup.error_code, dup.base_offset) == (0, offsets[i + 1])
    assert (await client.list_offset(NODE, "idem", -1)).offset == 12
    # A gap in the sequence.
    gap = await client.produce(NODE, "idem", b(20))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # A new epoch starts at 0; the old epoch is then fenced.
    bumped = await client.produce(NODE, "idem", b(0, epoch=1))
    assert bumped.error_code == 0 and bumped.base_offset == 12
    fenced = await client.produce(NODE, "idem", b(12, epoch=0))
    assert fenced.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    described = await client.node(NODE).DescribeProducers(
        storage_pb2.DescribeProducersRequest(
            partitions=[common_pb2.TopicPartition(topic="idem", partition=0)]
        )
    )
    producers = described.partitions[0].producers
    assert [(p.producer_id, p.producer_epoch, p.last_sequence) for p in producers] == [(pid, 1, 1)]
    values = [v for _, v in await client.read_all(NODE, "idem")]
    assert values == [b"s%d" % i for i in range(12)] + [b"s0", b"s1"]


async def test_list_offsets(client: Client) -> None:
    # Timestamps from 1970 are older than any time-based retention: without
    # retention.ms=-1 the retention check (every second in tests, tests/helpers/
    # clusters.py) could delete them mid-test (the log start then jumped to 6).
    await client.create_topic("lo", configs={"retention.ms": "-1"})
    # Timestamps: batch k holds records at 1000*k and 1000*k + 1.
    for k in (1, 2, 3):
        await client.produce(NODE, "lo", make_batch([b"a", b"b"], timestamp=1000 * k), acks=1)
    latest = await client.list_offset(NODE, "lo", -1)
    assert (latest.error_code, latest.offset, latest.timestamp, latest.leader_epoch) == (
        0,
        6,
        -1,
        0,
    )
    earliest = await client.list_offset(NODE, "lo", -2)
    assert (earliest.offset, earliest.leader_epoch) == (0, 0)
    max_ts = await client.list_offset(NODE, "lo", -3)
    assert (max_ts.offset, max_ts.timestamp) == (5, 3001)
    by_time = await client.list_offset(NODE, "lo", 1500)
    assert (by_time.offset, by_time.timestamp, by_time.leader_epoch) == (2, 2000, 0)
    exact = await client.list_offset(NODE, "lo", 2001)
    assert (exact.offset, exact.timestamp) == (3, 2001)
    first = await client.list_offset(NODE, "lo", 0)
    assert (first.offset, first.timestamp) == (0, 1000)
    none = await client.list_offset(NODE, "lo", 10_000)
    assert (none.error_code, none.offset, none.timestamp) == (0, -1, -1)
    fenced = await client.list_offset(NODE, "lo", -1, current_leader_epoch=5)
    assert fenced.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_delete_records(client: Client) -> None:
    await client.create_topic("del")
    for _ in range(3):
        await client.produce(NODE, "del", make_batch([b"a", b"b"]), acks=1)

    async def delete(offset: int) -> storage_pb2.DeleteRecordsPartitionResult:
        response = await client.node(NODE).DeleteRecords(
            storage_pb2.DeleteRecordsRequest(
                timeout_ms=5000,
                partitions=[
                    storage_pb2.DeleteRecordsPartition(topic="del", partition=0, offset=offset)
                ],
            )
        )
        return response.partitions[0]

    result = await delete(3)
    assert (result.error_code, result.low_watermark) == (0, 3)
    assert (await client.list_offset(NODE, "del", -2)).offset == 3
    gone = await client.fetch(NODE, "del", 1)
    assert gone.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and gone.log_start_offset == 3
    assert [o for o, _ in decode((await client.fetch(NODE, "del", 3)).records) if o >= 3] == [
        3,
        4,
        5,
    ]
    above = await delete(7)
    assert above.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    to_hw = await delete(-1)
    assert (to_hw.error_code, to_hw.low_watermark) == (0, 6)


async def test_data_and_producer_state_survive_kill_9(rf1: Cluster, client: Client) -> None:
    await client.create_topic("crash")
    pid = 777
    expected = []
    for seq in range(0, 10, 2):
        values = [b"c%d" % seq, b"c%d" % (seq + 1)]
        expected += values
        batch = make_batch(values, producer_id=pid, producer_epoch=0, base_sequence=seq)
        assert (await client.produce(NODE, "crash", batch, acks=1)).error_code == 0
    last = make_batch([b"c8", b"c9"], producer_id=pid, producer_epoch=0, base_sequence=8)
    rf1.restart(NODE)  # kill -9, then start again on the same log dir
    await client.wait_hosted(NODE, "crash", 0, leader=True)
    assert [v for _, v in await retry(lambda: client.read_all(NODE, "crash"))] == expected
    dup = await client.produce(NODE, "crash", last)
    assert (dup.error_code, dup.base_offset) == (0, 8)
    gap = await client.produce(
        NODE, "crash", make_batch([b"x"], producer_id=pid, producer_epoch=0, base_sequence=20)
    )
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = await client.produce(
        NODE, "crash", make_batch([b"c10"], producer_id=pid, producer_epoch=0, base_sequence=10)
    )
    assert (nxt.error_code, nxt.base_offset) == (0, 10)


async def test_producer_state_survives_a_clean_restart(rf1: Cluster, client: Client) -> None:
    await client.create_topic("clean")
    pid = 778
    first = make_batch([b"a"], producer_id=pid, producer_epoch=3, base_sequence=0)
    assert (await client.produce(NODE, "clean", first)).error_code == 0
    await asyncio.to_thread(rf1.nodes[NODE].terminate)
    rf1.nodes[NODE].start()
    rf1.nodes[NODE].wait_ready()
    await client.wait_hosted(NODE, "clean", 0, leader=True)
    dup = await client.produce(NODE, "clean", first)
    assert (dup.error_code, dup.base_offset) == (0, 0)
    old = await client.produce(
        NODE, "clean", make_batch([b"b"], producer_id=pid, producer_epoch=2, base_sequence=1)
    )
    assert old.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


async def test_deleted_topic_is_removed_from_the_node(rf1: Cluster, client: Client) -> None:
    await client.create_topic("doomed")
    assert (await client.produce(NODE, "doomed", make_batch([b"x"]), acks=1)).error_code == 0
    response = await client.controller.DeleteTopics(
        controller_pb2.DeleteTopicsRequest(names=["doomed"])
    )
    assert response.results[0].error_code == 0

    async def gone() -> bool:
        state = await client.describe(NODE, "doomed")
        return state.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    await wait_until_async(gone, "the node dropping the deleted topic", timeout=10)
    assert not (rf1.root / f"storage-{NODE}" / "doomed-0").exists()
    result = await client.produce(NODE, "doomed", make_batch([b"y"]), acks=1)
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Recreated under the same name: a new topic id and an empty log.
    await client.create_topic("doomed")
    assert (await client.list_offset(NODE, "doomed", -1)).offset == 0
