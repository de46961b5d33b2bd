"""A follower's fetch round, once per replicated record, skips two lookups whose answer
is known (issue 18, branch ``storlat25``): the leader answers the KIP-320 divergence
check of a follower in its latest epoch from the log end, without the epoch cache's
lock and search (Kafka's LeaderEpochFileCache.endOffsetFor answers the latest epoch
with the log end too), and the follower moves its log start only when the leader's
is past it, without the I/O-guarded call every round. What they decide is unchanged:
a DeleteRecords on the leader still moves the follower's log start, and a follower
fetching in an older epoch still goes through the cache (test_storage_epoch_scenarios).

A real leader and follower (test_storage_fetcher_rounds's pair: real logs, the
leader's Fetch handler and data link server, the follower's ReplicaFetcherManager).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_storage_fetcher_rounds import _append, _Pair, _until, pair  # noqa: F401

from odradek.log.leader_epoch import LeaderEpochCache
from odradek.storage.partition import Partition


def _counted(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> Callable[[], int]:
    calls = [0]
    method = getattr(cls, name)

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return method(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counting)
    return lambda: calls[0]


async def test_a_round_in_the_latest_epoch_skips_the_epoch_search_and_the_log_start_call(
    pair: _Pair,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searches = _counted(monkeypatch, LeaderEpochCache, "end_offset_for")
    log_starts = _counted(monkeypatch, Partition, "follow_leader_log_start")
    records = 30
    for n in range(records):
        _append(pair.leader, b"%d" % n)
        await _until(lambda n=n: pair.follower.log_end_offset == n + 1, "the follower's append")
        await _until(lambda n=n: pair.leader.high_watermark == n + 1, "the high watermark")
    assert pair.follower.read(0, 1 << 20, max_offset=None, min_one_message=True) == (
        pair.leader.read(0, 1 << 20, max_offset=None, min_one_message=True)
    )
    # One of each per round (30 or more) before; none now.
    assert searches() == 0
    assert log_starts() == 0
    # A DeleteRecords on the leader: the follower's next round moves its log start.
    assert pair.leader.delete_records_before(10) == 10
    _append(pair.leader, b"after")
    await _until(lambda: pair.follower.log_start_offset == 10, "the follower's log start")
    assert log_starts() >= 1
