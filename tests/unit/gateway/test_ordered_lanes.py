"""OrderedLanes: one request of a kind per connection at a time, in arrival order.

Produce and OffsetCommit rely on this to keep a connection's pipelined writes in the
order the client sent them while other APIs of the connection run freely.
"""

from __future__ import annotations

import asyncio

from odradek.gateway.ordered_lanes import OrderedLanes
from odradek.protocol.api_keys import ApiKey


async def _request(
    lanes: OrderedLanes, key: int, name: str, log: list[str], release: asyncio.Event
) -> None:
    async with lanes.lane(key):
        log.append(f"start {name}")
        await release.wait()
        log.append(f"end {name}")


async def test_one_lane_runs_its_requests_one_at_a_time_in_arrival_order() -> None:
    lanes = OrderedLanes()
    log: list[str] = []
    gates = {n: asyncio.Event() for n in ("a", "b", "c")}
    tasks = [asyncio.create_task(_request(lanes, ApiKey.PRODUCE, n, log, gates[n])) for n in gates]
    await asyncio.sleep(0)
    assert log == ["start a"]
    # Released out of order, they still finish in arrival order, never overlapping.
    gates["c"].set()
    gates["b"].set()
    await asyncio.sleep(0)
    assert log == ["start a"]
    gates["a"].set()
    await asyncio.gather(*tasks)
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assert len(lanes) == 0


async def test_lanes_of_different_apis_do_not_wait_for_each_other() -> None:
    lanes = OrderedLanes()
    log: list[str] = []
    produce_gate, commit_gate = asyncio.Event(), asyncio.Event()
    produce = asyncio.create_task(_request(lanes, ApiKey.PRODUCE, "p", log, produce_gate))
    commit = asyncio.create_task(_request(lanes, ApiKey.OFFSET_COMMIT, "c", log, commit_gate))
    await asyncio.sleep(0)
    assert sorted(log) == ["start c", "start p"]
    assert len(lanes) == 2
    commit_gate.set()
    await commit
    assert log[-1] == "end c" and "end p" not in log
    produce_gate.set()
    await produce
    assert len(lanes) == 0


async def test_a_cancelled_waiter_leaves_the_lane_to_the_next_one() -> None:
    lanes = OrderedLanes()
    log: list[str] = []
    gates = {n: asyncio.Event() for n in ("a", "b", "c")}
    tasks = {
        n: asyncio.create_task(_request(lanes, ApiKey.OFFSET_COMMIT, n, log, gates[n]))
        for n in gates
    }
    await asyncio.sleep(0)
    tasks["b"].cancel()  # its connection went away while it waited
    gates["c"].set()
    gates["a"].set()
    await asyncio.gather(tasks["a"], tasks["c"])
    assert tasks["b"].cancelled()
    assert log == ["start a", "end a", "start c", "end c"]
    assert len(lanes) == 0


async def test_a_failing_request_releases_its_lane() -> None:
    lanes = OrderedLanes()
    try:
        async with lanes.lane(ApiKey.PRODUCE):
            raise RuntimeError("storage node gone")
    except RuntimeError:
        pass
    assert len(lanes) == 0
    async with asyncio.timeout(1.0), lanes.lane(ApiKey.PRODUCE):
        assert len(lanes) == 1
