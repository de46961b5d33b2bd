"""Replication throttles: Kafka's ReplicationQuotaManager for this storage node.

Three byte-rate bounds, each a per-broker dynamic config (``AlterConfigs`` on
``BROKER <id>``, or the cluster default):

* ``leader.replication.throttled.rate`` — bytes/s this node, as leader, sends to
  followers of throttled replicas;
* ``follower.replication.throttled.rate`` — bytes/s this node, as follower, fetches
  for throttled replicas;
* ``replica.alter.log.dirs.io.max.bytes.per.second`` — bytes/s this node copies
  between its own log directories (AlterReplicaLogDirs).

Which replicas are throttled comes from the topic configs
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
in Kafka's syntax, ``partition:broker,...`` or ``*``; on broker B only the entries
naming B count (Kafka's ``TopicConfigHandler.parseThrottledPartitions``). As in
Kafka, a replica already in the ISR is never throttled, so a throttle slows catching
up (a reassignment) and never the replication that acks=all waits for.

Kafka decides "quota exceeded" from a rate measured over ``replication.quota.window.num``
one-second windows; here a token bucket with a one-second burst keeps the same bound
(the long-run rate never exceeds the setting) without Kafka's initial burst of a whole
measurement window. Pure, with an injectable clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

LONG_MAX = (1 << 63) - 1
BURST_S = 1.0

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def throttled_partitions(value: str | None, node_id: int) -> frozenset[int] | None:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on
    ``node_id``: None for ``*`` (all), else the partition ids of entries naming it.
    Malformed entries are skipped (the controller validates the list on write)."""
    text = (value or "").strip()
    if text == "*":
        return None
    out: set[int] = set()
    for item in text.split(","):
        partition, sep, broker = item.strip().partition(":")
        if not sep:
            continue
        try:
            if int(broker) == node_id:
                out.add(int(partition))
        except ValueError:
            continue
    return frozenset(out)


def is_throttled(value: str | None, node_id: int, partition: int) -> bool:
    partitions = throttled_partitions(value, node_id)
    return partitions is None or partition in partitions


class ReplicationQuota:
    """One byte-rate bound: ``record`` what was sent, ask ``exceeded`` before sending more."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.bound = math.inf  # bytes/s
        self._paid_until = 0.0  # when the bytes recorded so far are "paid for" at the bound

    def set_bound(self, rate: float) -> None:
        bound = math.inf if rate <= 0 or rate >= LONG_MAX else float(rate)
        if bound != self.bound:
            self.bound = bound
            self._paid_until = min(self._paid_until, self.clock())

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.bound)

    def record(self, nbytes: int) -> None:
        if nbytes <= 0 or self.unlimited:
            return
        now = self.clock()
        self._paid_until = max(self._paid_until, now - BURST_S) + nbytes / self.bound

    def exceeded(self) -> bool:
        return not self.unlimited and self._paid_until > self.clock()

    def delay(self) -> float:
        """Seconds until :meth:`exceeded` turns false (0 when it is false)."""
        if self.unlimited:
            return 0.0
        return max(0.0, self._paid_until - self.clock())


class ReplicationQuotas:
    """The node's three throttles, re-bounded from its broker configs on every metadata."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.leader = ReplicationQuota(clock=clock)
        self.follower = ReplicationQuota(clock=clock)
        self.alter_log_dirs = ReplicationQuota(clock=clock)

    def configure(self, broker_configs: Mapping[str, str]) -> None:
        for quota, name in (
            (self.leader, LEADER_RATE),
            (self.follower, FOLLOWER_RATE),
            (self.alter_log_dirs, ALTER_LOG_DIRS_RATE),
        ):
            try:
                quota.set_bound(float(broker_configs.get(name, LONG_MAX)))
            except ValueError:
                quota.set_bound(LONG_MAX)
