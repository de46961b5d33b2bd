"""How late the event loop runs what is due: a probe for benchmarks (issue 14).

A task sleeps ``interval`` again and again; the overshoot of each sleep is how long a
callback due then waited for the loop. On a machine shared with other processes the
overshoot mixes two things: the loop busy with other callbacks (ours to fix) and the
process not scheduled at all (the machine's load). So the probe also takes the loop
thread's CPU time over the same sleep (``time.thread_time``): a stall whose CPU time
is close to its overshoot was the loop working; one with little CPU was the machine.

Enabled by ``ODRADEK_LOOP_LAG_PROBE_MS`` (the interval in ms; unset or 0: off), for
benchmarks only: at 1 ms the probe wakes the loop a thousand times a second. The two
histograms are Prometheus series of the service's ``/metrics``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from prometheus_client import Histogram

from odradek.metric_tallies import HistogramTally

ENV = "ODRADEK_LOOP_LAG_PROBE_MS"
# A file to append the loop thread's stacks to while it stalls (StallSampler).
STACKS_ENV = "ODRADEK_LOOP_STALL_STACKS"
STALL_S = 0.005
# Frames of the loop itself and of what started it: below them, a callback runs.
_LOOP = ("run_until_complete", "run_forever", "run", "_run_once", "select", "poll")
BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)

LAG = Histogram(
    "odradek_event_loop_lag_seconds",
    "How much later than due the loop lag probe's sleeps ended (ODRADEK_LOOP_LAG_PROBE_MS).",
    buckets=BUCKETS,
)
LAG_CPU = Histogram(
    "odradek_event_loop_lag_cpu_seconds",
    "CPU time of the event loop's thread over each of the probe's sleeps whose end was "
    "late by 1 ms or more: near the lag when the loop was busy, near 0 when the process "
    "was not scheduled.",
    buckets=BUCKETS,
)
GC_PAUSE = Histogram(
    "odradek_gc_pause_seconds",
    "CPU time of each run of the cyclic garbage collector (it stops the thread that "
    "allocated), by the oldest generation it collected (while the loop lag probe runs).",
    ["generation"],
    buckets=BUCKETS,
)


def interval_from_env() -> float:
    """The probe's interval in seconds from :data:`ENV`; 0 when off."""
    try:
        return max(0.0, float(os.environ.get(ENV, "0") or 0) / 1000.0)
    except ValueError:
        return 0.0


class StallSampler:
    """A thread that writes down what the loop's thread runs while the loop is stalled
    by its own work: each millisecond past ``threshold_s`` since the probe's last
    wake-up, if the loop's thread has been on the CPU for most of that time, its Python
    stack goes to ``path`` as ``unix-time<TAB>busy-ms<TAB>frame;frame;...`` (outermost
    first, from the loop's callback down). CPython lets another thread take the GIL
    every ``sys.getswitchinterval()`` (5 ms), so a callback running longer is seen.

    A sample is written only if the loop's thread computed for most of the millisecond
    before it: a thread that was busy for 5 ms and then waited for a CPU (a loaded
    machine) stays past the threshold while it waits, and its stack then names whatever
    it happened to stop in (in bench hostile, a system call of the timeout sweep, a
    dozen samples in a row with no CPU time added).

    A loop stalled with its thread off the CPU and *not* waiting for one (state ``S``
    or ``D`` in ``/proc``: blocked in a system call, a log line's write held by the
    kernel's dirty-page throttling, say) is written down too, as
    ``unix-time<TAB>blocked-ms <state><TAB>stack``: neither the loop's work nor the
    machine's load, and invisible to the probe's CPU histogram.

    What a sample can name depends on when the loop's thread lets go of the GIL.
    uvloop runs libuv without it and takes it back for each I/O callback (a read, an
    accept, a close), so this thread usually gets it between two of them, well before
    the 5 ms switch interval would make a callback let go, and the loop's thread is
    then in no callback: the sample says :data:`BETWEEN_CALLBACKS`
    (it used to name ``run (runners.py:...)``, which read as time spent in uvloop's C
    code). It means the stall was many callbacks, none holding the GIL for the 5 ms
    switch interval, not where the time went; a callback or a batch of ready handles
    holding it longer is named. For the split of many short callbacks, profile the
    process from outside (``perf record -g -p PID``, ``py-spy record --native``;
    docs/security.md, "Hostile clients")."""

    def __init__(self, path: str, threshold_s: float) -> None:
        self.path = path
        self.threshold_s = threshold_s
        self._loop_thread = threading.get_ident()
        self._stat = f"/proc/self/task/{threading.get_native_id()}/stat"
        self.beat_at = time.perf_counter()
        self.beat_cpu = time.thread_time()
        self.stopped = False

    def beat(self) -> None:
        """The probe woke up on time or late: a new interval starts (loop thread)."""
        self.beat_at, self.beat_cpu = time.perf_counter(), time.thread_time()

    def start(self) -> None:
        threading.Thread(target=self._run, name="loop-stall-sampler", daemon=True).start()

    def _run(self) -> None:
        cpu_clock = time.pthread_getcpuclockid(self._loop_thread)
        clock = time.perf_counter
        with open(self.path, "a", buffering=1) as out:
            last_wall, last_cpu = clock(), time.clock_gettime(cpu_clock)
            while not self.stopped:
                time.sleep(0.001)
                wall, cpu = clock(), time.clock_gettime(cpu_clock)
                computing = cpu - last_cpu >= (wall - last_wall) / 2
                last_wall, last_cpu = wall, cpu
                stalled = wall - self.beat_at
                if stalled < self.threshold_s:
                    continue  # on time
                if not computing:
                    state = self._state()
                    frame = sys._current_frames().get(self._loop_thread)
                    if (
                        state in ("S", "D")
                        and frame is not None
                        and frame.f_code.co_name not in _LOOP
                    ):
                        # (in the loop's own frame: waiting for events, not in a callback)
                        stack = _collapse(frame)
                        out.write(f"{time.time():.3f}\t{stalled * 1000:.1f} {state}\t{stack}\n")
                    continue  # not on a CPU now: blocked (written), or waiting for one
                busy = cpu - self.beat_cpu
                frame = sys._current_frames().get(self._loop_thread)
                if busy < self.threshold_s or frame is None:
                    continue  # not scheduled (the machine's load), not the loop's work
                out.write(f"{time.time():.3f}\t{busy * 1000:.1f}\t{_collapse(frame)}\n")

    def _state(self) -> str:
        """The loop thread's scheduler state (``R`` running or waiting for a CPU, ``S``
        sleeping, ``D`` uninterruptible), from /proc; "" where there is none."""
        try:
            with open(self._stat, "rb") as stat:
                return stat.read().rsplit(b")", 1)[1].split()[0].decode()
        except (OSError, IndexError):
            return ""


# What a sample says when the loop's thread was between callbacks (StallSampler).
BETWEEN_CALLBACKS = "(between callbacks)"


def _collapse(frame: FrameType | None) -> str:
    """``func (file:line);...`` from the loop's callback down to ``frame``;
    :data:`BETWEEN_CALLBACKS` when ``frame`` is the loop's own (see StallSampler)."""
    if frame is not None and frame.f_code.co_name in _LOOP:
        return BETWEEN_CALLBACKS
    names: list[str] = []
    while frame is not None:
        code = frame.f_code
        if code.co_name in _LOOP and names:
            break  # the loop itself and what started it
        names.append(f"{code.co_name} ({os.path.basename(code.co_filename)}:{frame.f_lineno})")
        frame = frame.f_back
    return ";".join(reversed(names))


async def probe(interval_s: float, sampler: StallSampler | None = None) -> None:
    """Sleep ``interval_s`` forever, recording each overshoot (cancel to stop)."""
    lag = HistogramTally(LAG)
    cpu = HistogramTally(LAG_CPU)
    clock, thread_time = time.perf_counter, time.thread_time
    try:
        while True:
            if sampler is not None:
                sampler.beat()
            wall0, cpu0 = clock(), thread_time()
            await asyncio.sleep(interval_s)
            late = clock() - wall0 - interval_s
            lag.observe(late)
            if late >= 0.001:
                cpu.observe(thread_time() - cpu0)
    finally:
        if sampler is not None:
            sampler.stopped = True


def _gc_timer() -> Callable[[str, dict[str, int]], None]:
    """A ``gc.callbacks`` entry that times each collection (the collector runs inside
    whatever allocation crossed its threshold: a pause of the loop no sampler names)."""
    # Histograms, not tallies: the collector may run in any thread (gRPC's, a heartbeat's).
    children = [GC_PAUSE.labels(str(generation)) for generation in range(3)]
    started = [0.0]
    clock = time.thread_time  # its CPU time: a collection's cost, whatever the machine's load

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = clock()
        else:
            children[info["generation"]].observe(clock() - started[0])

    return on_gc


def start_from_env() -> asyncio.Task[None] | None:
    """Start the probe (and the collector's timer) when :data:`ENV` asks for it."""
    interval = interval_from_env()
    if interval <= 0:
        return None
    gc.callbacks.append(_gc_timer())
    sampler = None
    if os.environ.get(STACKS_ENV):
        sampler = StallSampler(os.environ[STACKS_ENV], STALL_S)
        sampler.start()
    return asyncio.get_running_loop().create_task(probe(interval, sampler))
