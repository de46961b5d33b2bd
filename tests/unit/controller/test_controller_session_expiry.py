"""The controller looks for expired node sessions only when one can have run out
(services/controller/session_expiry.py), not every heartbeat interval."""

from __future__ import annotations

from odradek.controller.session_expiry import EXPIRY_SLACK_S, MIN_WAIT_S, until_session_expiry


def test_sleeps_until_the_earliest_live_session_runs_out() -> None:
    seen = {100: 10.0, 101: 12.0, 0: 11.0}
    wait = until_session_expiry(seen, [100, 101, 0], now=13.0, session=6.0)
    assert wait == 3.0 + EXPIRY_SLACK_S  # node 100, seen at 10, runs out at 16


def test_offline_nodes_do_not_count() -> None:
    seen = {100: 1.0, 101: 12.0}
    assert until_session_expiry(seen, [101], now=13.0, session=6.0) == 5.0 + EXPIRY_SLACK_S


def test_a_node_not_seen_yet_and_no_nodes_wait_one_session_at_most() -> None:
    assert until_session_expiry({}, [100], now=5.0, session=6.0) == 6.0 + EXPIRY_SLACK_S
    assert until_session_expiry({}, [], now=5.0, session=6.0) == 6.0 + EXPIRY_SLACK_S
    # a clock that went back (a stale last_seen in the future) still waits one session
    assert until_session_expiry({100: 50.0}, [100], now=5.0, session=6.0) == 6.0 + EXPIRY_SLACK_S


def test_an_already_expired_session_is_not_polled_in_a_tight_loop() -> None:
    assert until_session_expiry({100: 0.0}, [100], now=100.0, session=6.0) == MIN_WAIT_S
