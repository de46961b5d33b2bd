"""The Produce lane of a connection: which queued requests go together in one storage
call per leader (take_run, merge_run, split_answers), and the lane's turns
(ProduceLane): arrival order, a run at a time, nothing overtaking a request that is
still being prepared, and no lane left taken by a cancelled request."""

from __future__ import annotations

import asyncio
import collections

from odradek.gateway.produce_lane import (
    ProduceLane,
    QueuedProduce,
    coalescable,
    merge_run,
    split_answers,
    take_run,
)
from odradek.rpc.v1 import storage_pb2


def _req(
    *entries: tuple[int, str, int, bytes],
    acks: int = -1,
    timeout_ms: int = 30_000,
    version: int = 9,
    txn: str | None = None,
    ready: bool = True,
) -> QueuedProduce:
    q = QueuedProduce(acks, timeout_ms, version, txn)
    for node, topic, partition, records in entries:
        q.add(node, storage_pb2.ProducePartition(topic=topic, partition=partition), records)
    q.ready = ready
    return q


def test_a_run_takes_the_ready_coalescable_requests_behind_the_first() -> None:
    a, b, c = _req(), _req(), _req()
    queue = collections.deque([a, b, c])
    assert take_run(queue) == [a, b, c]
    assert not queue


def test_a_run_stops_at_the_first_request_that_cannot_share_its_call() -> None:
    for other in (
        _req(acks=1),
        _req(timeout_ms=5_000),
        _req(version=10),
        _req(txn="t"),
        _req(ready=False),
    ):
        a, c = _req(), _req()
        queue = collections.deque([a, other, c])
        assert take_run(queue) == [a]
        assert list(queue) == [other, c]  # c never overtakes ``other``


def test_transactional_requests_go_alone() -> None:
    t1, t2 = _req(txn="t"), _req(txn="t")
    assert not coalescable(t1, t2)
    queue = collections.deque([t1, t2])
    assert take_run(queue) == [t1]
    assert take_run(queue) == [t2]


def test_nothing_goes_while_the_first_request_is_being_prepared() -> None:
    a, b = _req(ready=False), _req()
    queue = collections.deque([a, b])
    assert take_run(queue) == []
    assert list(queue) == [a, b]


def test_a_run_is_bounded_by_requests_and_by_bytes_after_the_first() -> None:
    queue = collections.deque(_req((1, "t", 0, b"x" * 10)) for _ in range(5))
    assert len(take_run(queue, max_requests=3)) == 3
    assert len(queue) == 2
    big = collections.deque(_req((1, "t", 0, b"x" * 100)) for _ in range(4))
    # The first always goes, whatever its size; then 250 bytes hold two more.
    assert len(take_run(big, max_bytes=250)) == 3


def test_merge_keeps_request_order_per_node_and_records_owners() -> None:
    a = _req((1, "t", 0, b"a0"), (2, "t", 1, b"a1"))
    b = _req((2, "t", 1, b"b1"), (1, "t", 0, b"b0"), (1, "u", 0, b"bu"))
    calls = merge_run([a, b])
    assert sorted(calls) == [1, 2]
    one = calls[1]
    assert [(p.topic, p.partition) for p in one.partitions] == [("t", 0), ("t", 0), ("u", 0)]
    assert one.records == [b"a0", b"b0", b"bu"]
    assert one.owners == [0, 1, 1]
    assert calls[2].records == [b"a1", b"b1"] and calls[2].owners == [0, 1]


def test_answers_go_back_to_the_request_that_sent_each_batch() -> None:
    a = _req((1, "t", 0, b"a0"))
    b = _req((1, "t", 0, b"b0"), (1, "t", 1, b"b1"))
    run = [a, b]
    call = merge_run(run)[1]
    answers = [
        storage_pb2.ProducePartitionResult(topic="t", partition=0, base_offset=7),
        storage_pb2.ProducePartitionResult(topic="t", partition=0, error_code=45),
        storage_pb2.ProducePartitionResult(topic="t", partition=1, base_offset=3),
    ]
    split_answers(run, 1, call, answers)
    assert [r.base_offset for r in a.answers[1]] == [7]
    assert [(r.error_code, r.base_offset) for r in b.answers[1]] == [(45, 0), (0, 3)]


async def _one(
    lane: ProduceLane, q: QueuedProduce, log: list[str], name: str, prepare: int = 0
) -> None:
    lane.enter(q)
    for _ in range(prepare):
        await asyncio.sleep(0)
    lane.ready(q)
    assert q.turn is not None
    run = await q.turn
    if run is not None:
        log.append(f"{name} sends {len(run)}")
        for _ in range(3):  # written to the data link a little later
            await asyncio.sleep(0)
        lane.passed()


async def test_requests_read_together_go_as_one_run_and_later_ones_as_the_next() -> None:
    lane = ProduceLane()
    log: list[str] = []
    reqs = [_req() for _ in range(6)]
    # Four handlers start together (one read from the socket), two a little later,
    # while the first run is being sent.
    tasks = [asyncio.create_task(_one(lane, q, log, str(i))) for i, q in enumerate(reqs[:4])]
    await asyncio.sleep(0)
    tasks += [
        asyncio.create_task(_one(lane, q, log, str(i), prepare=1))
        for i, q in enumerate(reqs[4:], 4)
    ]
    await asyncio.gather(*tasks)
    assert log == ["0 sends 4", "4 sends 2"]
    assert len(lane) == 0


async def test_a_cancelled_request_never_leaves_the_lane_taken() -> None:
    lane = ProduceLane()
    log: list[str] = []
    first, second = _req(), _req()
    doomed = asyncio.create_task(_one(lane, first, log, "first"))
    await asyncio.sleep(0)  # entered and ready; its run starts on the next turn
    doomed.cancel()
    later = asyncio.create_task(_one(lane, second, log, "second"))
    await asyncio.gather(doomed, return_exceptions=True)
    await asyncio.wait_for(later, 5)
    assert log == ["second sends 1"]


async def test_a_slow_preparation_holds_the_requests_behind_it() -> None:
    lane = ProduceLane()
    first, second = _req(ready=False), _req(ready=False)
    lane.enter(first)
    lane.enter(second)
    lane.ready(second)
    assert second.turn is not None and first.turn is not None
    assert not second.turn.done()  # may not overtake ``first``
    lane.ready(first)
    await asyncio.sleep(0)  # the run starts after the handlers scheduled with it
    assert first.turn.result() == [first, second]
    assert second.turn.result() is None


async def test_a_request_that_leaves_lets_the_next_one_go() -> None:
    lane = ProduceLane()
    gone, nxt = _req(ready=False), _req(ready=False)
    lane.enter(gone)
    lane.enter(nxt)
    lane.ready(nxt)
    lane.leave(gone)  # e.g. every partition failed before sending, or it was cancelled
    await asyncio.sleep(0)
    assert nxt.turn is not None and nxt.turn.result() == [nxt]
    lane.leave(nxt)  # no longer queued: a no-op
    lane.passed()
    assert len(lane) == 0
