"""How tests drive kafka-python group consumers.

kafka-python 3.0.12 can stall for tens of seconds when a ``poll()`` times out while its
JoinGroup/SyncGroup is in flight: under load the SyncGroup answer arrives, then the
client's IO thread idles in ``select()`` while the next ``poll()`` waits for a task the
loop never runs (py-spy: MainThread in ``NetworkSelector.run`` -> ``Event.wait``, the
``kafka-io`` thread in ``EpollSelector.select``). The broker saw the member go silent and
expired it after the session timeout. A poll long enough for a whole join avoids it, as
an application's poll loop does; ``poll`` still returns as soon as records arrive.
"""

from __future__ import annotations

JOIN_POLL_MS = 3000
