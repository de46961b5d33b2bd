"""Large legacy conversions run off the gateway's event loop, one batch's decompression
is capped, and the loop keeps ticking while a conversion runs."""

from __future__ import annotations

import asyncio
import functools
import time

import pytest

from odradek.gateway.offload import OFFLOAD_MIN_BYTES, run_heavy
from odradek.records.compression import Compression
from odradek.records.convert import downconvert
from odradek.records.errors import CorruptRecordError
from odradek.records.record import BatchBuilder


def _tiny_records(n: int) -> bytes:
    b = BatchBuilder(compression=Compression.GZIP)
    for _ in range(n):
        b.append(1_700_000_000_000, None, b"")
    return b.build()


async def _ticks_while(work: asyncio.Future[object]) -> int:
    """How many times the loop ran another task (a 1 ms ticker) while ``work`` ran."""
    ticks = 0
    while not work.done():
        await asyncio.sleep(0.001)
        ticks += 1
    await work
    return ticks


async def test_a_large_down_conversion_leaves_the_loop_serving() -> None:
    raw = _tiny_records(30_000)
    assert len(raw) >= OFFLOAD_MIN_BYTES
    start = time.monotonic()
    work = asyncio.ensure_future(run_heavy(len(raw), functools.partial(downconvert, raw, 1)))
    ticks = await _ticks_while(work)
    took = time.monotonic() - start
    # Real work, so the ticks below mean something: ~0.2 s on the 2-core machine, where
    # 20 ticks of 1 ms need at least 0.02 s (0.2 was the bound, and Debian's faster
    # interpreter converted in 0.19 s).
    assert took > 0.05
    # Run on the loop, the conversion is one blocking call: the ticker runs once or twice.
    assert ticks >= 20, (ticks, took)


async def test_small_inputs_run_inline() -> None:
    seen: list[bool] = []
    loop_thread = asyncio.get_running_loop()
    await run_heavy(10, lambda: seen.append(asyncio.get_running_loop() is loop_thread))
    assert seen == [True]


def test_decompression_per_batch_is_capped() -> None:
    raw = _tiny_records(30_000)
    with pytest.raises(CorruptRecordError, match="exceeds the limit"):
        downconvert(raw, 1, max_output_size=64 * 1024)
