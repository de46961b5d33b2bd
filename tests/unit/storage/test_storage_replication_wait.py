"""acks=-1 waits on a real partition (no network): each is answered when the high
watermark reaches it, and a high watermark advance wakes only the waits it reached.

Issue 18: with thousands of one-record acks=all requests in flight, every advance used
to wake every waiting request, so the leader's work grew with the square of the
backlog and a backlog, once built, never drained.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_storage_partition import Clock, batch, make, state

from odradek.protocol.errors import ErrorCode
from odradek.storage.notify import OffsetWaiters
from odradek.storage.partition import Partition
from odradek.storage.replication_wait import await_replication


def _count_checks(p: Partition) -> list[int]:
    """Count ``replication_status`` calls (a counting wrapper, same answers)."""
    calls = [0]
    real = p.replication_status

    def counting(required: int, epoch: int) -> tuple[bool, ErrorCode]:
        calls[0] += 1
        return real(required, epoch)

    p.replication_status = counting  # type: ignore[method-assign]
    return calls


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_advance_wakes_only_the_waits_it_reached(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1, 2], replicas=[1, 2]))
    n = 300
    required = [p.append_as_leader(batch(1), -1).last_offset + 1 for _ in range(n)]
    checks = _count_checks(p)
    waits = [
        asyncio.ensure_future(await_replication([(p, r, p.leader_epoch)], 30_000)) for r in required
    ]
    await _settle()
    for r in required:  # the follower catches up one batch per fetch
        p.update_follower_fetch_state(2, r, 0, clock())
        await _settle()
    assert all(w.done() for w in waits)
    assert [w.result() for w in waits] == [[ErrorCode.NONE]] * n
    # Each wait is checked when it starts and once when the HW reaches it; waking every
    # wait on every advance made this about n * n / 2.
    assert checks[0] <= 3 * n, checks[0]


async def test_leadership_and_isr_changes_wake_every_wait(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path, clock, min_isr=2)
    p.make_leader(state(1, 0, [1, 2], replicas=[1, 2]))
    first = p.append_as_leader(batch(1), -1).last_offset + 1
    wait = asyncio.ensure_future(await_replication([(p, first, 0)], 30_000))
    await _settle()
    assert not wait.done()
    # The ISR shrinks to the leader alone: the HW reaches the wait with too small an ISR.
    clock.now += 2000
    p.pending_isr = (1,)
    assert p.adopt_isr(state(1, 0, [1], replicas=[1, 2], pepoch=1))
    await _settle()
    assert wait.done() and wait.result() == [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]

    p.make_leader(state(1, 1, [1, 2], replicas=[1, 2], pepoch=2))
    second = p.append_as_leader(batch(1), -1).last_offset + 1
    wait = asyncio.ensure_future(await_replication([(p, second, 1)], 30_000))
    await _settle()
    assert not wait.done()
    p.make_follower(state(2, 2, [2], replicas=[1, 2], pepoch=3))
    await _settle()
    assert wait.done() and wait.result() == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


async def test_a_timed_out_wait_is_withdrawn(tmp_path: Path) -> None:
    clock = Clock()
    p = make(tmp_path, clock)
    p.make_leader(state(1, 0, [1, 2], replicas=[1, 2]))
    required = p.append_as_leader(batch(1), -1).last_offset + 1
    assert await await_replication([(p, required, 0)], 10) == [ErrorCode.REQUEST_TIMED_OUT]
    p.update_follower_fetch_state(2, required, 0, clock())  # reaches a withdrawn wait
    assert len(p.replication_waiters) == 0


async def test_offset_waiters_wake_in_offset_order() -> None:
    waiters = OffsetWaiters()
    events = {offset: asyncio.Event() for offset in (5, 1, 9, 3)}
    registered = {offset: waiters.add(offset, event) for offset, event in events.items()}
    registered[3].active = False  # withdrawn: never set
    waiters.wake_up_to(4)
    assert {o for o, e in events.items() if e.is_set()} == {1}
    waiters.wake_up_to(5)
    assert {o for o, e in events.items() if e.is_set()} == {1, 5}
    waiters.wake_all()
    assert {o for o, e in events.items() if e.is_set()} == {1, 5, 9}
    assert len(waiters) == 0
