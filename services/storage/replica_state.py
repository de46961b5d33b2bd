"""The leader's view of one follower replica (Kafka's ``Replica``/``ReplicaState``).

The leader learns a follower's log end offset from the offset the follower fetches at
(a fetch at offset N proves the follower holds everything below N, as in Kafka's
``Partition.updateFollowerFetchState``). ``last_caught_up_time_ms`` drives ISR shrinking: it is the last time the follower
was known to have reached the leader's log end offset, computed as Kafka does so a
follower that keeps pace with a busy leader is never considered lagging:

* a fetch at or past the leader's current LEO: caught up now;
* a fetch at or past the LEO the leader had at the follower's *previous* fetch: it was
  caught up at the time of that previous fetch.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerState:
    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def reset(self, now_ms: int, *, in_sync: bool, new_leader: bool) -> None:
        """On becoming leader (or a new leader epoch): ISR members get a fresh lag clock."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if new_leader:
            self.log_end_offset = UNKNOWN_OFFSET
            self.log_start_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (
            self.log_end_offset == leader_log_end_offset
            or now_ms - self.last_caught_up_time_ms <= max_lag_ms
        )

    def is_out_of_sync(self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """Kafka's isFollowerOutOfSync: behind the LEO and not caught up for max_lag_ms."""
        return (
            self.log_end_offset != leader_log_end_offset
            and now_ms - self.last_caught_up_time_ms > max_lag_ms
        )
