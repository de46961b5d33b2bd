"""Follower truncation by leader epoch (KIP-101/KIP-279), never by high watermark.

The leader and follower logs are modelled as the epoch of each offset; their epoch
caches are real :class:`LeaderEpochCache` objects built from those logs, and the
truncation loop runs exactly as the fetcher does (ask, cut, ask again until done).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from odradek.log.leader_epoch import LeaderEpochCache
from odradek.storage.truncation import TruncationState, truncation_state


def cache_of(
    epochs_by_offset: list[int], extra: Sequence[tuple[int, int]] = ()
) -> LeaderEpochCache:
    cache = LeaderEpochCache(None)
    for offset, epoch in enumerate(epochs_by_offset):
        if cache.latest_epoch is None or epoch > cache.latest_epoch:
            cache.assign(epoch, offset)
    for epoch, start in extra:
        cache.assign(epoch, start)
    return cache


def converge(
    leader: list[int], follower: list[int], leader_extra: Sequence[tuple[int, int]] = ()
) -> int:
    """Run the fetcher's truncation loop; return the follower's final log end offset."""
    leader_cache = cache_of(leader, leader_extra)
    log = list(follower)
    for _ in range(20):
        cache = cache_of(log)
        if cache.latest_epoch is None:
            return len(log)
        epoch, end = leader_cache.end_offset_for(cache.latest_epoch, len(leader))
        state = truncation_state(
            epoch, end, lambda e, c=cache, n=len(log): c.end_offset_for(e, n), len(log)
        )
        del log[state.offset :]
        if state.completed:
            return len(log)
    raise AssertionError("truncation did not converge")


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_same_epoch_keeps_everything_the_leader_has() -> None:
    # Seed 3.5.1: B restarts with both messages of epoch 0; A (leader) ends epoch 0 at 2.
    assert converge(leader=[0, 0], follower=[0, 0]) == 2


def test_follower_ahead_in_the_same_epoch_is_cut_to_the_leader_end() -> None:
    assert converge(leader=[0, 0], follower=[0, 0, 0]) == 2


def test_seed_3_4_divergence_is_removed() -> None:
    # Seed 3.5.2: A holds m0 m1 (epoch 0); B lost m1, became leader in epoch 1 and
    # wrote a different m1. A must drop its m1 and take B's.
    assert converge(leader=[0, 1], follower=[0, 0]) == 1


def test_seed_3_3_no_loss_after_failover() -> None:
    # Seed 3.5.1 second half: B led epoch 1 from offset 2 with both messages; A returns.
    assert converge(leader=[0, 0, 1], follower=[0, 0]) == 2


def test_follower_with_an_epoch_the_leader_never_saw() -> None:
    # The follower led epoch 1 briefly (writes nobody got); the leader is in epoch 2.
    assert converge(leader=[0, 0, 2, 2], follower=[0, 0, 1, 1, 1]) == 2


def test_empty_epoch_entry_left_by_a_former_leader() -> None:
    # Became leader in epoch 1 at offset 2 but wrote nothing; the new leader knows no epoch 1.
    leader_cache = cache_of([0, 0, 2])
    follower = cache_of([0, 0], extra=[(1, 2)])
    epoch, end = leader_cache.end_offset_for(1, 3)
    assert (epoch, end) == (0, 2)
    state = truncation_state(epoch, end, lambda e: follower.end_offset_for(e, 2), 2)
    assert state == TruncationState(2, True)


def test_undefined_answer_keeps_the_log() -> None:
    assert truncation_state(-1, -1, lambda e: (-1, -1), 7) == TruncationState(7, True)


def test_leader_epoch_lower_than_all_of_ours() -> None:
    # Our epochs all start above what the leader answers: cut at the leader's end.
    assert truncation_state(3, 10, lambda e: (-1, -1), 15) == TruncationState(10, True)


@pytest.mark.parametrize("seed", range(200))
def test_random_histories_converge_to_the_common_prefix(seed: int) -> None:
    """Random leader changes: the follower ends at the longest prefix it shares with the leader.

    Histories follow Kafka's rules: a replica's log is a prefix of the log of the
    leader of some epoch plus its own writes while it led; epochs grow along a log.
    """
    rng = random.Random(seed)
    base = [0] * rng.randint(0, 5)
    epoch = 0
    # Both start from a shared prefix, then each gets suffixes from later epochs.
    shared = list(base)
    for _ in range(rng.randint(0, 3)):
        epoch += 1
        shared += [epoch] * rng.randint(1, 4)
    follower = list(shared[: rng.randint(0, len(shared))])
    leader = list(shared[: rng.randint(len(follower) // 2, len(shared))])
    # The follower may have led some epochs nobody else saw.
    for _ in range(rng.randint(0, 2)):
        epoch += 1
        follower += [epoch] * rng.randint(1, 3)
    # Then the leader leads newer epochs and writes.
    for _ in range(rng.randint(0, 2)):
        epoch += 1
        leader += [epoch] * rng.randint(0, 3)
    epoch += 1
    extra = [(epoch, len(leader))]  # the current leader's epoch, possibly still empty
    result = converge(leader, follower, extra)
    assert result == common_prefix(leader, follower), (leader, follower, result)
