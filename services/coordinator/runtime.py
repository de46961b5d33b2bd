"""The group coordinator's shards on the shared runtime (:mod:`odradek.shard_runtime`):
one asyncio task per owned shard runs every operation on its :class:`GroupShard`;
group metadata writes go to the offset store in batches, in order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from odradek.coordinator.consumer_groups import TopicView
from odradek.coordinator.shard import GroupConfig, GroupShard, StoreWrite
from odradek.shard_runtime import AsyncScheduler, ShardStatus
from odradek.shard_runtime import ShardRuntime as _Runtime

__all__ = ["AsyncScheduler", "ShardRuntime", "ShardStatus"]

StoreGroups = Callable[[int, list[StoreWrite]], Awaitable[int]]


class ShardRuntime(_Runtime[GroupShard, StoreWrite]):
    def __init__(
        self,
        shard: int,
        epoch: int,
        config: GroupConfig,
        store: StoreGroups,
        on_rebalance: Callable[[int], None] | None = None,
        topics: TopicView = dict,
    ) -> None:
        seen = [0]

        def count_rebalances(state: GroupShard) -> None:
            if on_rebalance is not None and state.stats.rebalances != seen[0]:
                on_rebalance(state.stats.rebalances - seen[0])
                seen[0] = state.stats.rebalances

        super().__init__(
            shard,
            epoch,
            lambda scheduler, on_write: GroupShard(shard, config, scheduler, on_write, topics),
            store,
            after_op=count_rebalances,
            name="coordinator-shard",
        )
