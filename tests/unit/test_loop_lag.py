"""The loop lag probe (odradek.loop_lag): a callback that holds the loop shows up as
lag, with the loop thread's CPU time when it computed and without when it slept; the
stall sampler names the callback."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from odradek import loop_lag
from odradek.metric_tallies import flush_tallies


def _over(name: str, bound: str, labels: dict[str, str] | None = None) -> float:
    """Observations of histogram ``name`` above ``bound``."""
    flush_tallies()
    total = REGISTRY.get_sample_value(f"{name}_count", labels or {}) or 0.0
    under = REGISTRY.get_sample_value(f"{name}_bucket", {**(labels or {}), "le": bound}) or 0.0
    return total - under


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def test_probe_tells_a_busy_loop_from_a_sleeping_one() -> None:
    # Stalls of 200 ms against a 100 ms bound: on a loaded machine the probe also sees
    # the process waiting for a CPU (more lag), never more CPU time than it used.
    lag, cpu = loop_lag.LAG.describe()[0].name, loop_lag.LAG_CPU.describe()[0].name
    lag_before, cpu_before = _over(lag, "0.1"), _over(cpu, "0.1")
    task = asyncio.get_running_loop().create_task(loop_lag.probe(0.001))
    try:
        await asyncio.sleep(0.01)
        time.sleep(0.2)  # noqa: ASYNC251  (the point: the loop held, its thread off the CPU)
        await asyncio.sleep(0.01)
        assert _over(lag, "0.1") >= lag_before + 1
        assert _over(cpu, "0.1") == cpu_before
        lag_before = _over(lag, "0.1")
        _spin(0.2)  # the loop held by a computing callback
        await asyncio.sleep(0.01)
        assert _over(lag, "0.1") >= lag_before + 1
        assert _over(cpu, "0.1") == cpu_before + 1
    finally:
        task.cancel()


@contextlib.asynccontextmanager
async def _sampling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Path]:
    """The probe with the stall sampler on, writing to the file it yields; stopped (and
    the probe's GC callbacks removed) after the block."""
    stacks = tmp_path / "stacks.txt"
    monkeypatch.setenv(loop_lag.ENV, "1")
    monkeypatch.setenv(loop_lag.STACKS_ENV, str(stacks))
    callbacks = list(gc.callbacks)
    task = loop_lag.start_from_env()
    assert task is not None
    try:
        await asyncio.sleep(0.01)
        yield stacks
    finally:
        task.cancel()
        gc.callbacks[:] = callbacks
    await asyncio.sleep(0.01)  # (the sampler stops with the probe)


async def test_stall_sampler_names_the_computing_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sampling(tmp_path, monkeypatch) as stacks:
        _spin(0.1)
        await asyncio.sleep(0.01)
        gc.collect()
    lines = stacks.read_text().splitlines()
    callbacks_seen = [line.split("\t")[2].rsplit(";", 1)[-1] for line in lines]
    assert any(frame.startswith("_spin (test_loop_lag.py:") for frame in callbacks_seen)
    assert len(stacks.read_text().splitlines()) == len(lines)
    gc_runs = loop_lag.GC_PAUSE.describe()[0].name + "_count"
    assert REGISTRY.get_sample_value(gc_runs, {"generation": "2"})


def _blocked(seconds: float) -> None:
    time.sleep(seconds)  # the loop's thread blocked in a system call, off the CPU


async def test_stall_sampler_tells_computing_from_blocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A callback that computes past the threshold, then blocks in a system call: the
    # computing is written down as busy; the blocking as blocked (state S), not as a
    # busy sample a millisecond naming wherever the thread stopped (116 of them before:
    # the thread's CPU time since the probe's last wake-up stayed past the threshold).
    async with _sampling(tmp_path, monkeypatch) as stacks:
        _spin(0.03)
        _blocked(0.15)
        await asyncio.sleep(0.01)
    samples = [line.split("\t") for line in stacks.read_text().splitlines()]
    busy = [stack.rsplit(";", 1)[-1] for _t, ms, stack in samples if not ms.endswith(" S")]
    blocked = [stack.rsplit(";", 1)[-1] for _t, ms, stack in samples if ms.endswith(" S")]
    assert any(frame.startswith("_spin (") for frame in busy), samples
    # (one sample may straddle the moment the computing stopped)
    assert sum(frame.startswith("_blocked (") for frame in busy) <= 1, samples
    assert sum(frame.startswith("_blocked (") for frame in blocked) >= 10, samples


def test_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(loop_lag.ENV, raising=False)
    assert loop_lag.interval_from_env() == 0.0
    monkeypatch.setenv(loop_lag.ENV, "2")
    assert loop_lag.interval_from_env() == 0.002
    monkeypatch.setenv(loop_lag.ENV, "soon")
    assert loop_lag.interval_from_env() == 0.0


def run() -> str:
    """Named as the loop's own frame is (asyncio.Runner.run): the innermost frame a
    sample sees when the loop's thread let go of the GIL between uvloop's I/O callbacks."""
    return loop_lag._collapse(sys._getframe())


def _in_a_callback() -> str:
    return loop_lag._collapse(sys._getframe())


def test_a_sample_between_callbacks_says_so() -> None:
    # bench hostile's stall samples were mostly "run (runners.py:118)", read as time in
    # uvloop's C code; it is a moment between two callbacks (StallSampler docstring).
    assert run() == loop_lag.BETWEEN_CALLBACKS
    assert _in_a_callback().rsplit(";", 1)[-1].startswith("_in_a_callback (test_loop_lag.py:")
