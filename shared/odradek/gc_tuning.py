"""The cyclic garbage collector's settings for a serving process (issue 18).

A service allocates a few dozen container objects per request (the decoded request,
its task and futures, the response), nearly all freed by reference counting at once;
the cyclic collector only has to find the rare cycle. With CPython's defaults it ran a
young collection every 700 allocations and, every hundred of those, a full one that
walked every object of the process: the modules, classes, protobuf descriptors and
configuration built at start-up (tens of thousands of objects, alive until exit) as
well as what requests hold. Profiled in a gateway serving 2,000 one-record acks=all
Produce requests a second, the collector was a quarter of its CPU, and each full
collection stopped the event loop for tens to hundreds of milliseconds: the tail of
the produce-to-consume latency.

So, once a service has started:

* :func:`gc.freeze` moves everything alive after start-up into the permanent
  generation, which no collection walks (CPython's ``gc`` documentation recommends
  it for long-running processes); cycles made of start-up objects that die later are
  never collected, a bounded cost next to walking them all on every full collection;
* the young generation's threshold goes from 700 to :data:`YOUNG_THRESHOLD`
  allocations, and each older generation is collected after :data:`OLDER_THRESHOLD`
  collections of the one below instead of 10: a short-lived object is freed by its
  reference count before any collection sees it, so fewer collections mostly means
  fewer walks over the objects in-flight requests keep alive. Garbage cycles wait a
  little longer (at most that many allocations) to be freed.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
OLDER_THRESHOLD = 20


def tune_after_start() -> None:
    """Collect once, freeze what survives (start-up state) and raise the thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
