"""One asyncio task per owned shard: the only code that touches the shard's state.

Kafka's coordinator runtime model (``CoordinatorRuntime``), shared by the group
coordinator and the transaction coordinator: every operation on a shard (a request, a
timer firing, a write completing) is queued and run to completion by the shard's task,
one at a time, so the shard's state (a sans-io object, ``S``) needs no locks.
Long-polls (JoinGroup, SyncGroup, a write that must be durable before the answer)
register a callback and wait outside the task.

Lifecycle: ``LOADING`` (reading the shard's state; requests get
COORDINATOR_LOAD_IN_PROGRESS) -> ``ACTIVE`` -> ``CLOSED`` (the shard moved away or the
service stops; everyone waiting gets NOT_COORDINATOR). Writes the state asks for (``W``,
anything with a ``done(error)`` callback) are batched per shard and stored in order by
one writer task; ``done`` runs as an operation of the shard's task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from enum import Enum
from typing import Generic, Protocol, TypeVar

from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")


class ShardWrite(Protocol):
    """Something a shard's state wants stored; ``done(error)`` is told the outcome."""

    @property
    def done(self) -> Callable[[int], None]: ...


class ShardState(Protocol):
    def unload(self) -> None:
        """The shard closes: answer whoever waits (NOT_COORDINATOR), drop timers."""
        ...


S = TypeVar("S", bound=ShardState)
W = TypeVar("W", bound=ShardWrite)

# Bound on queued operations per shard; callers wait for room (backpressure).
QUEUE_LIMIT = 10_000
MAX_WRITES_PER_BATCH = 500


class ShardStatus(Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class AsyncScheduler:
    """Wall-clock time (group timestamps are persisted) and loop timers whose actions
    run as operations of the shard's task. A timer re-armed or cancelled after it
    fired but before its operation ran does nothing."""

    def __init__(self, enqueue: Callable[[Callable[[], None]], None]) -> None:
        self._enqueue = enqueue
        self._timers: dict[Hashable, tuple[int, asyncio.TimerHandle | None]] = {}
        self._seq = 0

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None]) -> None:
        self.cancel(key)
        self._seq += 1
        seq = self._seq
        loop = asyncio.get_running_loop()
        handle = loop.call_later(max(0, delay_ms) / 1000.0, self._fire, key, seq, action)
        self._timers[key] = (seq, handle)

    def cancel(self, key: Hashable) -> None:
        entry = self._timers.pop(key, None)
        if entry is not None and entry[1] is not None:
            entry[1].cancel()

    def cancel_all(self) -> None:
        for _, handle in self._timers.values():
            if handle is not None:
                handle.cancel()
        self._timers.clear()

    def _fire(self, key: Hashable, seq: int, action: Callable[[], None]) -> None:
        entry = self._timers.get(key)
        if entry is None or entry[0] != seq:
            return
        self._timers[key] = (seq, None)

        def run() -> None:
            current = self._timers.get(key)
            if current is None or current[0] != seq:
                return
            del self._timers[key]
            action()

        self._enqueue(run)


class ShardRuntime(Generic[S, W]):
    """``make_state(scheduler, on_write)`` builds the shard's state; ``store(epoch,
    writes)`` makes a batch of its writes durable (0 or a Kafka error code);
    ``after_op(state)`` runs after every operation (metrics)."""

    def __init__(
        self,
        shard: int,
        epoch: int,
        make_state: Callable[[AsyncScheduler, Callable[[W], None]], S],
        store: Callable[[int, list[W]], Awaitable[int]],
        *,
        after_op: Callable[[S], None] | None = None,
        name: str = "shard",
    ) -> None:
        self.shard_id = shard
        self.epoch = epoch
        self.status = ShardStatus.LOADING
        self._queue: asyncio.Queue[Callable[[], None]] = asyncio.Queue(QUEUE_LIMIT)
        self.scheduler = AsyncScheduler(self._enqueue_nowait)
        self._writes: list[W] = []
        self._write_ready = asyncio.Event()
        self.shard: S = make_state(self.scheduler, self._on_write)
        self._store = store
        self._after_op = after_op
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"{name}-{shard}")
        self._writer = loop.create_task(self._write_loop(), name=f"{name}-writer-{shard}")
        self._loader: asyncio.Task[None] | None = None

    def submit(self, op: Callable[[S], None]) -> None:
        """Run ``op(state)`` on the shard's task later (from outside it: a marker sent,
        a background job's result); dropped unless the shard is active by then."""

        def run() -> None:
            if self.status is ShardStatus.ACTIVE:
                op(self.shard)

        self._enqueue_nowait(run)

    # -- the shard's task -------------------------------------------------------------------
    def _enqueue_nowait(self, op: Callable[[], None]) -> None:
        try:
            self._queue.put_nowait(op)
        except asyncio.QueueFull:
            # Timers and write completions must not be lost: run them from a task that
            # waits for room.
            asyncio.get_running_loop().create_task(self._queue.put(op))

    async def _run(self) -> None:
        while True:
            op = await self._queue.get()
            try:
                op()
            except Exception:  # one bad operation must not take the shard down
                log.exception("shard %d: operation failed", self.shard_id)
            if self._after_op is not None:
                try:
                    self._after_op(self.shard)
                except Exception:
                    log.exception("shard %d: after-operation hook failed", self.shard_id)

    async def call(self, fn: Callable[[S], T], not_ready: Callable[[int], T]) -> T:
        """Run ``fn(shard)`` on the shard's task; ``not_ready(error)`` answers instead
        when the shard is loading or closed by the time the operation runs."""
        if self.status is not ShardStatus.ACTIVE:
            return not_ready(self._not_ready_error())
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def op() -> None:
            if future.done():
                return
            if self.status is not ShardStatus.ACTIVE:
                future.set_result(not_ready(self._not_ready_error()))
                return
            try:
                future.set_result(fn(self.shard))
            except Exception as exc:
                future.set_exception(exc)

        await self._queue.put(op)
        return await future

    async def long_poll(
        self,
        fn: Callable[[S, Callable[[T], None]], None],
        not_ready: Callable[[int], T],
    ) -> T:
        """Like :meth:`call` for operations that answer through a callback later."""
        if self.status is not ShardStatus.ACTIVE:
            return not_ready(self._not_ready_error())
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def respond(result: T) -> None:
            if not future.done():
                future.set_result(result)

        def op() -> None:
            if self.status is not ShardStatus.ACTIVE:
                respond(not_ready(self._not_ready_error()))
                return
            try:
                fn(self.shard, respond)
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)

        await self._queue.put(op)
        return await future

    def _not_ready_error(self) -> int:
        if self.status is ShardStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    # -- persistence ------------------------------------------------------------------------
    def _on_write(self, write: W) -> None:
        self._writes.append(write)
        self._write_ready.set()

    async def _write_loop(self) -> None:
        while True:
            await self._write_ready.wait()
            self._write_ready.clear()
            while self._writes:
                batch = self._writes[:MAX_WRITES_PER_BATCH]
                del self._writes[:MAX_WRITES_PER_BATCH]
                try:
                    error = await self._store(self.epoch, batch)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("shard %d: storing failed: %s", self.shard_id, exc)
                    error = ErrorCode.COORDINATOR_NOT_AVAILABLE

                def complete(batch: list[W] = batch, error: int = error) -> None:
                    for write in batch:
                        write.done(error)

                await self._queue.put(complete)

    # -- loading and closing ----------------------------------------------------------------
    def start_loading(self, load: Callable[[], Awaitable[Callable[[S], None]]]) -> None:
        """``load()`` fetches the shard's stored state and returns how to apply it;
        it is retried until it succeeds or the shard closes."""

        async def run() -> None:
            backoff = 0.05
            while self.status is ShardStatus.LOADING:
                try:
                    apply = await load()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.info("shard %d: load not ready yet: %s", self.shard_id, exc)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
                    continue
                await self._queue.put(self._activate_op(apply, done := self._new_future()))
                await done
                log.info("shard %d (epoch %d) loaded", self.shard_id, self.epoch)
                return

        self._loader = asyncio.get_running_loop().create_task(run(), name=f"load-{self.shard_id}")

    def _new_future(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()

    def _activate_op(
        self, apply: Callable[[S], None], done: asyncio.Future[None]
    ) -> Callable[[], None]:
        def op() -> None:
            if self.status is ShardStatus.LOADING:
                apply(self.shard)
                self.status = ShardStatus.ACTIVE
            done.set_result(None)

        return op

    async def close(self) -> None:
        """Answer everyone waiting with NOT_COORDINATOR and stop the tasks."""
        if self.status is ShardStatus.CLOSED:
            return
        self.status = ShardStatus.CLOSED
        if self._loader is not None:
            self._loader.cancel()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def op() -> None:
            self.shard.unload()
            self.scheduler.cancel_all()
            done.set_result(None)

        try:
            await self._queue.put(op)
            await asyncio.wait_for(done, 5.0)
        except (TimeoutError, asyncio.CancelledError):
            pass
        # Pending writes are abandoned: the new owner reloads from what is durable.
        for write in self._writes:
            with contextlib.suppress(Exception):
                write.done(ErrorCode.NOT_COORDINATOR)
        self._writes.clear()
        for task in (self._task, self._writer, self._loader):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self.scheduler.cancel_all()
