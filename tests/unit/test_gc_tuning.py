"""The service shell's garbage-collector settings (odradek.gc_tuning, issue 18)."""

from __future__ import annotations

import asyncio
import gc
import signal
import weakref
from collections.abc import Iterator

import pytest

from odradek import service
from odradek.gc_tuning import OLDER_THRESHOLD, YOUNG_THRESHOLD, tune_after_start


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


class _Idle:
    """A service that stops itself (SIGTERM, as the launcher sends) once started."""

    name = "idle"

    def __init__(self) -> None:
        self.stopped = False

    async def start(self) -> dict[str, int]:
        asyncio.get_running_loop().call_soon(signal.raise_signal, signal.SIGTERM)
        return {}

    async def stop(self) -> None:
        self.stopped = True


def test_served_process_freezes_start_up_state(restored_gc: None) -> None:
    gc.unfreeze()
    idle = _Idle()
    frozen_while_serving: list[int] = []
    real_stop = idle.stop

    async def stop() -> None:
        frozen_while_serving.append(gc.get_freeze_count())
        await real_stop()

    idle.stop = stop  # type: ignore[method-assign]
    asyncio.run(service._serve(lambda: idle, None))
    assert idle.stopped
    # Everything alive at start-up (here: the whole test process) left the collected
    # generations; without the tuning nothing is frozen.
    assert frozen_while_serving and frozen_while_serving[0] > 1000
    assert gc.get_threshold() == (YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_cycles_made_after_start_are_still_collected(restored_gc: None) -> None:
    tune_after_start()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_start_up_objects_are_not_walked(restored_gc: None) -> None:
    early = _Node()
    tune_after_start()
    # A frozen object is in no generation: gc.get_objects() lists only collected ones.
    assert not any(o is early for o in gc.get_objects())
    late = _Node()
    assert any(o is late for o in gc.get_objects())
