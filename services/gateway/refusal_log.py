"""Connections the gateway refuses or cuts, logged at most once a second per reason.

Kafka's ``SocketServer`` logs each refused connection and each oversize frame
(``InvalidReceiveException``). A client reconnecting in a loop to send what is
refused (a frame over ``socket.request.max.bytes``, a connection over
``max.connections.per.ip``) made that a formatted log line, and a write to the log,
per attempt: thousands a second from a few clients. The first line of a reason in
each interval is written as before; the rest are counted and the count is added to
the next line written for that reason, so nothing is lost but the repetition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RefusalLog:
    """``log.info("closing <peer>: <detail>")``, rate-limited per ``reason``.

    ``reason`` must come from a fixed set (a setting's or an exception class's name):
    it keys the counters, so a detail with numbers in it belongs in ``detail``.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        # reason -> [when its last line was written, lines left out since]
        self._last: dict[str, list[float]] = {}

    def closing(
        self, peer: str, reason: str, detail: str | None = None, verb: str = "closing"
    ) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        now = self.clock()
        seen = self._last.get(reason)
        if seen is not None and now - seen[0] < self.interval_s:
            seen[1] += 1
            return
        left_out = int(seen[1]) if seen is not None else 0
        self._last[reason] = [now, 0]
        text = detail if detail is not None else reason
        if left_out:
            self.logger.info(
                "%s %s: %s (and %d more like it in the last %.0f s)",
                verb,
                peer,
                text,
                left_out,
                now - seen[0] if seen is not None else 0.0,
            )
        else:
            self.logger.info("%s %s: %s", verb, peer, text)
