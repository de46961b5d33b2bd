"""Waiting for a condition instead of sleeping for a guessed time.

A test that sleeps a fixed time before asserting is either slow (the sleep is long)
or flaky (the machine was slower than the guess). These poll a check until it holds
and, when it never does, fail naming what was awaited and what the check last saw.
One synchronous version (threads, subprocesses, real clients) and one for asyncio
tests; both return the check's truthy result, so a wait can also fetch a value.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

T = TypeVar("T")

DEFAULT_TIMEOUT = 15.0
DEFAULT_INTERVAL = 0.05


def _timed_out(what: str, timeout: float, last: object, error: BaseException | None) -> str:
    message = f"timed out after {timeout:g}s waiting for {what}; the check last returned {last!r}"
    if error is not None:
        message += f" (last error: {error!r})"
    return message


def wait_until(
    check: Callable[[], T],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = DEFAULT_INTERVAL,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``check`` until it returns something truthy, and return that.

    Exceptions of the types in ``ignoring`` count as "not yet" (a service still
    starting); any other exception fails at once. Raises AssertionError after
    ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    error: BaseException | None = None
    while True:
        try:
            result = check()
        except ignoring as exc:
            error = exc
        else:
            if result:
                return result
            last = result
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout, last, error))
        time.sleep(interval)


async def wait_until_async(
    check: Callable[[], Awaitable[T]] | Callable[[], T],
    what: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = DEFAULT_INTERVAL,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """:func:`wait_until` for asyncio tests: ``check`` may be sync or a coroutine
    function, and the wait yields to the event loop between tries."""
    deadline = time.monotonic() + timeout
    last: object = None
    error: BaseException | None = None
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
        except ignoring as exc:
            error = exc
        else:
            if result:
                return cast(T, result)
            last = result
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(what, timeout, last, error))
        await asyncio.sleep(interval)
