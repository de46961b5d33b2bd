"""The shard runtime on a real event loop: timers as shard operations, long-polls,
batched metadata writes, loading and closing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from helpers.waiting import wait_until_async

from odradek.coordinator.group import GroupState, JoinResult, SyncResult
from odradek.coordinator.runtime import AsyncScheduler, ShardRuntime, ShardStatus
from odradek.coordinator.shard import GroupConfig, GroupShard, JoinRequest, StoreWrite, SyncRequest
from odradek.protocol.errors import ErrorCode as E


async def test_timer_rearmed_after_firing_does_not_run_the_stale_action() -> None:
    queued: list[Callable[[], None]] = []
    scheduler = AsyncScheduler(queued.append)
    ran: list[str] = []
    scheduler.schedule("k", 0, lambda: ran.append("first"))
    await wait_until_async(lambda: queued, "the timer firing")
    assert len(queued) == 1 and ran == []  # fired: its operation waits in the queue
    scheduler.schedule("k", 10_000, lambda: ran.append("second"))  # a heartbeat re-arms
    queued.pop()()
    assert ran == []
    scheduler.schedule("c", 0, lambda: ran.append("cancelled"))
    scheduler.cancel("c")
    scheduler.schedule("ok", 0, lambda: ran.append("ok"))
    await wait_until_async(lambda: queued, "the timer firing")
    await asyncio.sleep(0)  # one more loop turn: a cancelled timer that fired would be queued
    for op in queued:
        op()
    assert ran == ["ok"]
    scheduler.cancel_all()


def _join(group: str, member: str = "") -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member,
        protocol_type="consumer",
        protocols=[("range", b"m")],
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        client_id="c",
    )


async def test_runtime_serves_after_loading_and_batches_writes() -> None:
    stored: list[list[StoreWrite]] = []

    async def store(epoch: int, writes: list[StoreWrite]) -> int:
        stored.append(list(writes))
        return 0

    runtime = ShardRuntime(3, 7, GroupConfig(initial_rebalance_delay_ms=0), store)
    not_ready = await runtime.call(lambda s: s.list_groups(), lambda e: e)
    assert not_ready == E.COORDINATOR_LOAD_IN_PROGRESS

    async def load() -> Callable[[GroupShard], None]:
        return lambda shard: shard.note_offsets("from-the-log")

    runtime.start_loading(load)
    await wait_until_async(lambda: runtime.status is ShardStatus.ACTIVE, "the shard to load")
    assert await runtime.call(lambda s: s.list_groups(), lambda e: e) == [
        ("from-the-log", "", "Empty", "classic")
    ]

    def join(req: JoinRequest) -> Any:
        return runtime.long_poll(
            lambda s, respond: s.join_group(req, respond), lambda e: JoinResult(e)
        )

    first: JoinResult = await join(_join("g"))
    assert first.error == E.MEMBER_ID_REQUIRED
    joined: JoinResult = await join(_join("g", first.member_id))
    assert joined.error == E.NONE and joined.generation_id == 1
    synced: SyncResult = await runtime.long_poll(
        lambda s, respond: s.sync_group(
            SyncRequest("g", 1, joined.member_id, {joined.member_id: b"a"}), respond
        ),
        lambda e: SyncResult(e),
    )
    assert synced.assignment == b"a"
    assert [[w.group_id for w in batch] for batch in stored] == [["g"]]
    group = runtime.shard.group("g")
    assert group is not None and group.state is GroupState.STABLE
    # A member of another group waits in JoinGroup while the shard moves away.
    runtime.shard.config.initial_rebalance_delay_ms = 60_000
    pending = asyncio.ensure_future(
        runtime.long_poll(
            lambda s, respond: s.join_group(
                JoinRequest(
                    group_id="h",
                    member_id="",
                    protocol_type="consumer",
                    protocols=[("range", b"")],
                    session_timeout_ms=10_000,
                    rebalance_timeout_ms=10_000,
                    require_known_member_id=False,
                ),
                respond,
            ),
            lambda e: JoinResult(e),
        )
    )
    await wait_until_async(lambda: runtime.shard.group("h"), "the join reaching the shard")
    assert not pending.done()
    await runtime.close()
    result = await asyncio.wait_for(pending, 5)
    assert result.error == E.NOT_COORDINATOR
    assert await runtime.call(lambda s: s.list_groups(), lambda e: e) == E.NOT_COORDINATOR
