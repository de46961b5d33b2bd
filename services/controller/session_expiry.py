"""When the controller next needs to look for expired node sessions.

Kafka's controller fences a broker whose heartbeats stopped for
``broker.session.timeout.ms`` (``BrokerHeartbeatManager``). Checking on every
heartbeat interval wakes an idle controller several times a second for nothing; the
next look is due only when the earliest live session can have run out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# Past the deadline: a session expires once strictly older than the timeout.
EXPIRY_SLACK_S = 0.005
# Never sooner: a session left expired (a node the model would not fence) is not polled
# in a tight loop.
MIN_WAIT_S = 0.05


def until_session_expiry(
    last_seen: Mapping[int, float], live: Iterable[int], now: float, session: float
) -> float:
    """Seconds from ``now`` until the earliest of ``live``'s sessions runs out.

    A node not seen yet counts as seen ``now`` (it gets a whole session), so the
    answer never exceeds one session: a node that registers while the caller sleeps
    cannot expire before it wakes."""
    deadlines = [last_seen.get(node, now) + session for node in live]
    earliest = min(deadlines, default=now + session)
    return max(MIN_WAIT_S, min(earliest - now, session) + EXPIRY_SLACK_S)
