"""Producer-id blocks: ids in order, prefetch before the block runs out, never an id twice.

Blocks come from the controller's real model (``ClusterModel.allocate_producer_ids``),
persisted and reloaded the way the controller does across restarts.
"""

from __future__ import annotations

import asyncio

import pytest
from helpers.waiting import wait_until_async

from odradek.controller.cluster_state import NodeInfo, NodeKind
from odradek.controller.model import ClusterModel
from odradek.producer_id_blocks import ProducerIdBlocks, ProducerIdsUnavailable

GATEWAY = 0


class ModelController:
    """The controller's producer-id rule, with a persisted store and counters for tests."""

    def __init__(self, block_size: int = 10) -> None:
        self.block_size = block_size
        self.store: dict[str, object] = {}
        self.calls = 0
        self.delay = 0.0
        self.fail = False
        self.model = self._reload()
        self.incarnation = self.model.register_node(NodeInfo(GATEWAY, NodeKind.GATEWAY)).incarnation
        self._persist()

    def _reload(self) -> ClusterModel:
        model = ClusterModel(producer_id_block_size=self.block_size)
        model.load(self.store)
        return model

    def _persist(self) -> None:
        for key, value in self.model.take_changes().items():
            if value is None:
                self.store.pop(key, None)
            else:
                self.store[key] = value

    def restart(self) -> None:
        self.model = self._reload()

    async def fetch(self) -> tuple[int, int]:
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)  # the scenario: a slow controller
        if self.fail:
            raise ConnectionError("controller unreachable")
        first, count = self.model.allocate_producer_ids(GATEWAY, self.incarnation)
        self._persist()
        return first, count


async def test_ids_come_in_order_and_the_next_block_is_prefetched() -> None:
    controller = ModelController(block_size=10)
    blocks = ProducerIdBlocks(controller.fetch)
    ids = [await blocks.next_id(1.0) for _ in range(9)]
    assert ids == list(range(9))
    # 90% used: the next block is being fetched in the background (exactly once).
    await wait_until_async(
        lambda: controller.calls == 2 and blocks.remaining == 1 + 10, "the next block prefetched"
    )
    ids += [await blocks.next_id(1.0) for _ in range(11)]
    assert ids == list(range(20))
    await blocks.close()


async def test_concurrent_callers_share_one_fetch_and_get_distinct_ids() -> None:
    controller = ModelController(block_size=1000)
    controller.delay = 0.05
    blocks = ProducerIdBlocks(controller.fetch)
    ids = await asyncio.gather(*(blocks.next_id(2.0) for _ in range(50)))
    assert sorted(ids) == list(range(50))
    assert controller.calls == 1
    await blocks.close()


async def test_no_id_twice_across_gateway_and_controller_restarts() -> None:
    controller = ModelController(block_size=10)
    seen: list[int] = []
    for _ in range(3):
        blocks = ProducerIdBlocks(controller.fetch)  # a restarted gateway starts empty
        seen += [await blocks.next_id(1.0) for _ in range(15)]
        await blocks.close()
        controller.restart()  # the controller reloads its persisted high-water mark
    assert len(seen) == len(set(seen)) == 45


async def test_unavailable_controller_is_a_retriable_error_then_recovers() -> None:
    controller = ModelController(block_size=10)
    controller.fail = True
    blocks = ProducerIdBlocks(controller.fetch)
    with pytest.raises(ProducerIdsUnavailable):
        await blocks.next_id(1.0)
    assert ProducerIdsUnavailable.kafka_error == "COORDINATOR_LOAD_IN_PROGRESS"
    controller.fail = False
    assert await blocks.next_id(1.0) == 0
    await blocks.close()


async def test_a_slow_controller_times_out() -> None:
    controller = ModelController()
    controller.delay = 1.0
    blocks = ProducerIdBlocks(controller.fetch)
    with pytest.raises(ProducerIdsUnavailable):
        await blocks.next_id(0.05)
    await blocks.close()


async def test_a_block_below_ids_already_handed_out_is_refused() -> None:
    answers = [(100, 2), (50, 10), (102, 5)]

    async def fetch() -> tuple[int, int]:
        return answers.pop(0)

    blocks = ProducerIdBlocks(fetch, prefetch_ratio=1.0)
    assert [await blocks.next_id(1.0) for _ in range(2)] == [100, 101]
    # The next block overlaps 50..59 < 102: refused, the caller gets a retriable error.
    with pytest.raises(ProducerIdsUnavailable):
        await blocks.next_id(1.0)
    assert await blocks.next_id(1.0) == 102
    await blocks.close()
