"""Where a follower truncates, from the leader's (epoch, end offset) answer (KIP-101/KIP-279/KIP-320).

Never by high watermark: a follower's high watermark lags the leader's by a round
trip, so truncating to it after a restart throws away records the leader had already
acknowledged (KIP-101, scenario 1), and keeping everything below a stale HW lets two
replicas hold different records at one offset (KIP-101, scenario 2; both are told in
docs/architecture.md, Replication). Instead the follower asks the leader
where the follower's latest epoch ends in the leader's log (OffsetForLeaderEpoch, or
the ``diverging_epoch`` a Fetch answers with) and compares with its own epoch cache,
as Kafka's ``AbstractFetcherThread.getOffsetTruncationState`` does:

* the leader knows our epoch: keep ``min(our end of that epoch, leader's end, our LEO)``;
* the leader answers a lower epoch we also have an end for, but ours differs: cut at
  the end of our largest epoch <= the leader's and ask again (not finished);
* we have no epoch <= the leader's: everything of ours is newer, cut at the leader's end.

Pure: callers pass the follower's ``end_offset_for`` lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class TruncationState(NamedTuple):
    offset: int
    completed: bool


def truncation_state(
    leader_epoch: int,
    leader_end_offset: int,
    follower_end_offset_for: Callable[[int], tuple[int, int]],
    follower_log_end_offset: int,
) -> TruncationState:
    """The offset to truncate to and whether the follower may start fetching after it."""
    if leader_end_offset == UNDEFINED_OFFSET:
        # The leader knows no epoch at or below the one we asked for (only possible when
        # we asked with an undefined epoch): nothing to compare against, keep the log.
        return TruncationState(follower_log_end_offset, True)
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationState(min(leader_end_offset, follower_log_end_offset), True)
    follower_epoch, follower_end = follower_end_offset_for(leader_epoch)
    if follower_epoch == UNDEFINED_EPOCH or follower_end == UNDEFINED_OFFSET:
        return TruncationState(min(leader_end_offset, follower_log_end_offset), True)
    if follower_epoch != leader_epoch:
        return TruncationState(min(follower_end, follower_log_end_offset), False)
    return TruncationState(min(follower_end, leader_end_offset, follower_log_end_offset), True)
