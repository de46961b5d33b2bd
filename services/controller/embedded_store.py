"""The default metadata store: one process, one directory, no external server.

Layout of the directory (formats in :mod:`.journal`):

- ``.lock`` — ``fcntl.flock`` held while open, so two controllers cannot share a dir
  (it holds the owner's pid, for people; the kernel drops the lock when the process dies);
- ``snapshot.json`` — the key space at some revision (absent until the first one);
- ``journal.jsonl`` — one line per revision after the snapshot.

Every write is applied in memory only after its journal line is written and
fsync'd, so an acknowledged write survives ``kill -9`` and an unacknowledged one is
either wholly present or wholly absent (one line = one txn). Every ``snapshot_every``
entries the key space is written to a new snapshot atomically (temp file, fsync,
rename, directory fsync) and the journal is replaced by an empty one the same way; a
crash between the two leaves journal lines at or below the snapshot revision, which
replay skips. On open: load the snapshot, replay the journal, cut off a torn last
line. Leases live in memory (as a new etcd session would after a restart): keys that
were attached to a lease are deleted, at a new revision, when the store reopens.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from odradek.controller.journal import (
    JournalOp,
    decode_snapshot,
    encode_entry,
    encode_snapshot,
    scan_journal,
)
from odradek.controller.store import (
    CompactedError,
    Compare,
    Delete,
    EventType,
    KeyValue,
    LeaseNotFoundError,
    MetadataStore,
    Op,
    Put,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    TxnResult,
    Watch,
    WatchEvent,
    to_bytes,
)
from odradek.controller.uncancellable import uncancellable

log = logging.getLogger(__name__)

JOURNAL = "journal.jsonl"
SNAPSHOT = "snapshot.json"
LOCK = ".lock"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


@dataclass
class _Lease:
    ttl: float
    deadline: float
    keys: set[str] = field(default_factory=set)


@dataclass
class _Loaded:
    revision: int
    kvs: dict[str, KeyValue]
    journal_entries: int
    truncated_bytes: int


class _EmbeddedWatch(Watch):
    def __init__(self, store: EmbeddedStore, prefix: str, limit: int) -> None:
        self._store = store
        self.prefix = prefix
        self._limit = limit
        self._queue: collections.deque[WatchEvent] = collections.deque()
        self._wakeup = asyncio.Event()
        self._error: BaseException | None = None
        self._done = False

    def deliver(self, event: WatchEvent) -> None:
        if self._done or self._error is not None:
            return
        if len(self._queue) >= self._limit:
            self._error = CompactedError(
                f"watch on {self.prefix!r} fell behind by {self._limit} events"
            )
            self._queue.clear()
        else:
            self._queue.append(event)
        self._wakeup.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._wakeup.set()

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._error is not None:
                error, self._error = self._error, None
                self.cancel()
                raise error
            if self._done:
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()

    def cancel(self) -> None:
        if not self._done:
            self._done = True
            self._store._watches.discard(self)
            self._wakeup.set()


class EmbeddedStore(MetadataStore):
    """File-backed :class:`MetadataStore`; build with ``await EmbeddedStore.open(dir)``."""

    def __init__(
        self,
        directory: Path,
        lock_fd: int,
        loaded: _Loaded,
        *,
        snapshot_every: int,
        history: int,
        watch_queue: int,
        clock: Callable[[], float],
    ) -> None:
        self.directory = directory
        self._lock_fd = lock_fd
        self._journal_fd = -1
        self._journal_size = 0
        self._revision = loaded.revision
        self._kvs = loaded.kvs
        self._entries_since_snapshot = loaded.journal_entries
        self.snapshot_every = snapshot_every
        self._history: collections.deque[WatchEvent] = collections.deque(maxlen=history)
        self._history_floor = loaded.revision + 1  # every event at or above this is in history
        self._watch_queue = watch_queue
        self._watches: set[_EmbeddedWatch] = set()
        self._leases: dict[int, _Lease] = {}
        self._lease_wakeup = asyncio.Event()
        self._clock = clock
        self._write_lock = asyncio.Lock()
        self._closed = False
        self._failed: str | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        self.truncated_bytes = loaded.truncated_bytes

    # ------------------------------------------------------------------ opening

    @classmethod
    async def open(
        cls,
        directory: str | Path,
        *,
        snapshot_every: int = 1000,
        history: int = 10000,
        watch_queue: int = 10000,
        clock: Callable[[], float] = time.monotonic,
    ) -> EmbeddedStore:
        path = Path(directory)
        lock_fd, loaded = await asyncio.to_thread(cls._lock_and_load, path)
        store = cls(
            path,
            lock_fd,
            loaded,
            snapshot_every=max(1, snapshot_every),
            history=history,
            watch_queue=watch_queue,
            clock=clock,
        )
        try:
            store._journal_fd, store._journal_size = await asyncio.to_thread(store._open_journal)
            leased = [Delete(kv.key) for kv in store._kvs.values() if kv.lease]
            if leased:
                # Leases do not survive a restart: their keys go, like a new etcd session.
                async with store._write_lock:
                    await store._commit(leased)
        except BaseException:
            await store.close()
            raise
        store._expiry_task = asyncio.get_running_loop().create_task(
            store._expire_leases(), name="store-lease-expiry"
        )
        return store

    @staticmethod
    def _lock_and_load(path: Path) -> tuple[int, _Loaded]:
        path.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise StoreLockedError(f"metadata store {path} is in use by another process") from None
        try:
            os.ftruncate(lock_fd, 0)
            os.write(lock_fd, f"{os.getpid()}\n".encode())
            return lock_fd, EmbeddedStore._load(path)
        except BaseException:
            os.close(lock_fd)
            raise

    @staticmethod
    def _load(path: Path) -> _Loaded:
        for stale in (path / (SNAPSHOT + ".tmp"), path / (JOURNAL + ".tmp")):
            stale.unlink(missing_ok=True)
        revision = 0
        kvs: dict[str, KeyValue] = {}
        snapshot = path / SNAPSHOT
        if snapshot.exists():
            revision, rows = decode_snapshot(snapshot.read_bytes())
            kvs = {kv.key: kv for kv in rows}
        journal = path / JOURNAL
        data = journal.read_bytes() if journal.exists() else b""
        scan = scan_journal(data)
        truncated = len(data) - scan.good_length
        if truncated:
            log.warning("metadata journal %s: dropping a torn tail of %d bytes", journal, truncated)
            with open(journal, "r+b") as f:
                f.truncate(scan.good_length)
                f.flush()
                os.fsync(f.fileno())
        replayed = 0
        for entry_revision, ops in scan.entries:
            if entry_revision <= revision:
                continue
            if entry_revision != revision + 1:
                raise StoreError(
                    f"metadata journal {journal}: revision {entry_revision} follows {revision}"
                )
            revision = entry_revision
            for op in ops:
                _apply_op(kvs, revision, op)
            replayed += 1
        return _Loaded(revision, kvs, replayed, truncated)

    def _open_journal(self) -> tuple[int, int]:
        journal = self.directory / JOURNAL
        existed = journal.exists()
        fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if not existed:
            os.fsync(fd)
            _fsync_dir(self.directory)
        return fd, os.fstat(fd).st_size

    # ------------------------------------------------------------------ reads

    @property
    def revision(self) -> int:
        return self._revision

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("metadata store is closed")
        if self._failed is not None:
            raise StoreError(f"metadata store failed: {self._failed}")

    async def get(self, key: str) -> KeyValue | None:
        self._check_open()
        return self._kvs.get(key)

    async def range(self, prefix: str) -> list[KeyValue]:
        self._check_open()
        return [self._kvs[k] for k in sorted(self._kvs) if k.startswith(prefix)]

    # ------------------------------------------------------------------ writes

    async def put(self, key: str, value: bytes | str, lease: int = 0) -> int:
        return (await self.txn((), [Put.of(key, value, lease)])).revision

    async def delete(self, key: str, *, prefix: bool = False) -> int:
        return await uncancellable(self._delete(key, prefix))

    async def _delete(self, key: str, prefix: bool) -> int:
        async with self._write_lock:
            self._check_open()
            keys = self._matching(key, prefix)
            await self._commit([Delete(k) for k in keys])
            return len(keys)

    async def txn(
        self,
        compares: Sequence[Compare],
        on_success: Sequence[Op],
        on_failure: Sequence[Op] = (),
    ) -> TxnResult:
        return await uncancellable(self._txn(list(compares), list(on_success), list(on_failure)))

    async def _txn(
        self, compares: list[Compare], on_success: list[Op], on_failure: list[Op]
    ) -> TxnResult:
        async with self._write_lock:
            self._check_open()
            succeeded = all(c.evaluate(self._kvs.get(c.key)) for c in compares)
            revision = await self._commit(on_success if succeeded else on_failure)
            return TxnResult(succeeded, revision)

    def _matching(self, key: str, prefix: bool) -> list[str]:
        if not prefix:
            return [key] if key in self._kvs else []
        return sorted(k for k in self._kvs if k.startswith(key))

    def _resolve(self, ops: Sequence[Op]) -> list[JournalOp]:
        """Expand prefix deletes and drop no-op deletes, honouring earlier ops of the txn."""
        present: dict[str, bool] = {}
        out: list[JournalOp] = []
        for op in ops:
            if isinstance(op, Put):
                if op.lease and op.lease not in self._leases:
                    raise LeaseNotFoundError(f"lease {op.lease:x} not found")
                out.append(Put(op.key, to_bytes(op.value), op.lease))
                present[op.key] = True
                continue
            if op.prefix:
                keys = {k for k in self._kvs if k.startswith(op.key)}
                keys |= {k for k, here in present.items() if k.startswith(op.key)}
            else:
                keys = {op.key}
            for k in sorted(keys):
                if present.get(k, k in self._kvs):
                    out.append(Delete(k))
                    present[k] = False
        return out

    async def _commit(self, ops: Sequence[Op]) -> int:
        """Journal, fsync, then apply; the caller holds the write lock inside
        :func:`uncancellable`, so a write is never journaled without being applied."""
        resolved = self._resolve(ops)
        if not resolved:
            return self._revision
        revision = self._revision + 1
        line = encode_entry(revision, resolved)
        try:
            await asyncio.to_thread(self._append, line)
        except OSError as exc:
            await asyncio.to_thread(self._undo_partial_append)
            raise StoreError(f"metadata journal write failed: {exc}") from exc
        self._revision = revision
        for op in resolved:
            self._apply(revision, op)
        self._entries_since_snapshot += 1
        if self._entries_since_snapshot >= self.snapshot_every:
            try:
                await self._snapshot()
            except OSError as exc:  # the journal still holds everything; try again later
                log.warning("metadata snapshot failed (journal kept): %s", exc)
        return revision

    def _append(self, line: bytes) -> None:
        view = memoryview(line)
        while view:
            view = view[os.write(self._journal_fd, view) :]
        os.fdatasync(self._journal_fd)
        self._journal_size += len(line)

    def _undo_partial_append(self) -> None:
        try:
            os.ftruncate(self._journal_fd, self._journal_size)
            os.fsync(self._journal_fd)
        except OSError as exc:
            self._failed = f"cannot restore the journal after a failed write: {exc}"

    def _apply(self, revision: int, op: JournalOp) -> None:
        previous = self._kvs.get(op.key)
        if previous is not None and previous.lease:
            lease = self._leases.get(previous.lease)
            if lease is not None:
                lease.keys.discard(op.key)
        kv = _apply_op(self._kvs, revision, op)
        if isinstance(op, Put):
            assert kv is not None
            if op.lease:
                self._leases[op.lease].keys.add(op.key)
            event = WatchEvent(EventType.PUT, kv)
        else:
            event = WatchEvent(EventType.DELETE, KeyValue(op.key, b"", 0, revision, 0, 0))
        if len(self._history) == self._history.maxlen and self._history:
            self._history_floor = self._history[0].kv.mod_revision + 1
        self._history.append(event)
        for watch in list(self._watches):
            if op.key.startswith(watch.prefix):
                watch.deliver(event)

    async def _snapshot(self) -> None:
        data = encode_snapshot(self._revision, (self._kvs[k] for k in sorted(self._kvs)))
        await asyncio.to_thread(self._write_snapshot, data)
        self._entries_since_snapshot = 0

    def _write_snapshot(self, data: bytes) -> None:
        _write_atomically(self.directory / SNAPSHOT, data)
        _write_atomically(self.directory / JOURNAL, b"")
        old = self._journal_fd
        self._journal_fd, self._journal_size = self._open_journal()
        os.close(old)

    async def compact_now(self) -> None:
        """Write a snapshot and empty the journal now (tests, shutdown)."""
        await uncancellable(self._compact_now())

    async def _compact_now(self) -> None:
        async with self._write_lock:
            self._check_open()
            await self._snapshot()

    # ------------------------------------------------------------------ watches

    def watch(self, prefix: str, start_revision: int = 0) -> Watch:
        self._check_open()
        watch = _EmbeddedWatch(self, prefix, self._watch_queue)
        if 0 < start_revision <= self._revision:
            if start_revision < self._history_floor:
                watch.fail(
                    CompactedError(
                        f"revision {start_revision} is older than the watch history "
                        f"(from {self._history_floor})"
                    )
                )
                return watch
            for event in self._history:
                if event.kv.mod_revision >= start_revision and event.kv.key.startswith(prefix):
                    watch.deliver(event)
        self._watches.add(watch)
        return watch

    # ------------------------------------------------------------------ leases

    async def grant(self, ttl: float) -> int:
        self._check_open()
        if ttl <= 0:
            raise ValueError("lease TTL must be positive")
        lease_id = 0
        while lease_id == 0 or lease_id in self._leases:
            lease_id = random.getrandbits(63)
        self._leases[lease_id] = _Lease(ttl, self._clock() + ttl)
        self._lease_wakeup.set()
        return lease_id

    async def keepalive(self, lease: int) -> float:
        self._check_open()
        state = self._leases.get(lease)
        if state is None or state.deadline <= self._clock():
            raise LeaseNotFoundError(f"lease {lease:x} not found")
        state.deadline = self._clock() + state.ttl
        return state.ttl

    async def revoke(self, lease: int) -> None:
        self._check_open()
        await uncancellable(self._end_lease(lease, expired_only=False))

    async def _end_lease(self, lease: int, *, expired_only: bool) -> None:
        async with self._write_lock:
            state = self._leases.get(lease)
            if state is None or (expired_only and state.deadline > self._clock()):
                return  # gone already, or kept alive while we waited for the lock
            await self._commit([Delete(k) for k in sorted(state.keys)])
            self._leases.pop(lease, None)

    def lease_keys(self, lease: int) -> set[str]:
        state = self._leases.get(lease)
        return set(state.keys) if state else set()

    async def _expire_leases(self) -> None:
        while not self._closed:
            now = self._clock()
            due = [lid for lid, lease in self._leases.items() if lease.deadline <= now]
            for lid in due:
                try:
                    await uncancellable(self._end_lease(lid, expired_only=True))
                except StoreError as exc:
                    log.error("cannot expire lease %x: %s", lid, exc)
            self._lease_wakeup.clear()
            deadlines = [lease.deadline for lease in self._leases.values()]
            wait = min(deadlines) - self._clock() if deadlines else 3600.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lease_wakeup.wait(), max(0.005, min(wait, 3600.0)))

    # ------------------------------------------------------------------ closing

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        async with self._write_lock:
            for watch in list(self._watches):
                watch.cancel()
            if self._journal_fd >= 0:
                os.close(self._journal_fd)
                self._journal_fd = -1
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = -1


def _apply_op(kvs: dict[str, KeyValue], revision: int, op: JournalOp) -> KeyValue | None:
    """Apply one journaled op to a key map (shared by replay and live writes)."""
    if isinstance(op, Delete):
        kvs.pop(op.key, None)
        return None
    previous = kvs.get(op.key)
    if previous is None:
        kv = KeyValue(op.key, op.value, revision, revision, 1, op.lease)
    else:
        kv = KeyValue(
            op.key, op.value, previous.create_revision, revision, previous.version + 1, op.lease
        )
    kvs[op.key] = kv
    return kv
