"""The metadata store interface the controller persists through, modelled on etcd v3.

One global ``revision`` counts every committed write; each key remembers the revision
that created it, the one that last modified it and how many times it was written
(``version``; 0 means absent), exactly as etcd reports them, so the etcd backend is a
thin adapter and the embedded backend (:mod:`.embedded_store`) behaves the same.

- ``txn(compares, on_success, on_failure)`` applies one branch atomically under one
  new revision; the controller fences a stale controller by comparing the
  ``controller_epoch`` key's value in every write.
- Leases play the role of ZooKeeper's ephemeral nodes: keys put with a lease vanish
  (as deletions at a new revision) when the lease expires or is revoked.
- ``watch(prefix, start_revision)`` yields events in revision order; a watcher that
  falls too far behind, or asks for history the store no longer holds, gets
  :class:`CompactedError` and must re-read with ``range`` and watch again.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TypeAlias


class StoreError(Exception):
    """Any failure of the metadata store (the controller steps down on these)."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class StoreClosedError(StoreError):
    pass


class StoreLockedError(StoreError):
    """Another process holds this store's directory."""


class StoreCorruptError(StoreError):
    """Persisted state fails its checksums somewhere other than a torn tail."""


class LeaseNotFoundError(StoreError):
    """The lease expired, was revoked, or never existed (etcd: lease not found)."""


class CompactedError(StoreError):
    """The requested watch history is gone, or the watcher fell too far behind."""


def to_bytes(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0


class EventType(enum.Enum):
    PUT = "put"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A change; for DELETE ``kv`` carries the key, an empty value and the deleting revision."""

    type: EventType
    kv: KeyValue


class CompareTarget(enum.Enum):
    VALUE = "value"
    VERSION = "version"
    CREATE_REVISION = "create_revision"
    MOD_REVISION = "mod_revision"
    LEASE = "lease"


class CompareOp(enum.Enum):
    EQUAL = "=="
    NOT_EQUAL = "!="
    GREATER = ">"
    LESS = "<"


@dataclass(frozen=True, slots=True)
class Compare:
    """One txn guard, evaluated as etcd does: a missing key has version, revisions and
    lease 0, and any VALUE comparison on a missing key is false."""

    key: str
    target: CompareTarget
    op: CompareOp
    operand: bytes | int

    @classmethod
    def value_equals(cls, key: str, value: bytes | str) -> Compare:
        return cls(key, CompareTarget.VALUE, CompareOp.EQUAL, to_bytes(value))

    @classmethod
    def mod_revision_equals(cls, key: str, revision: int) -> Compare:
        return cls(key, CompareTarget.MOD_REVISION, CompareOp.EQUAL, revision)

    @classmethod
    def exists(cls, key: str) -> Compare:
        return cls(key, CompareTarget.VERSION, CompareOp.GREATER, 0)

    @classmethod
    def missing(cls, key: str) -> Compare:
        return cls(key, CompareTarget.VERSION, CompareOp.EQUAL, 0)

    def evaluate(self, kv: KeyValue | None) -> bool:
        actual: bytes | int
        if self.target is CompareTarget.VALUE:
            if kv is None:
                return False
            actual = kv.value
        elif kv is None:
            actual = 0
        else:
            actual = getattr(kv, self.target.value)
        operand = self.operand
        if isinstance(actual, bytes) != isinstance(operand, bytes):
            return False
        if self.op is CompareOp.EQUAL:
            return actual == operand
        if self.op is CompareOp.NOT_EQUAL:
            return actual != operand
        if self.op is CompareOp.GREATER:
            return actual > operand  # type: ignore[operator]
        return actual < operand  # type: ignore[operator]


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    value: bytes
    lease: int = 0

    @classmethod
    def of(cls, key: str, value: bytes | str, lease: int = 0) -> Put:
        return cls(key, to_bytes(value), lease)


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    prefix: bool = False


Op: TypeAlias = Put | Delete


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool
    revision: int  # the store revision after the txn (unchanged if it wrote nothing)


class Watch(abc.ABC):
    """An async iterator of events; ``cancel()`` ends it."""

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return self

    @abc.abstractmethod
    async def __anext__(self) -> WatchEvent: ...

    @abc.abstractmethod
    def cancel(self) -> None: ...


class MetadataStore(abc.ABC):
    """The operations the controller needs from etcd; every method is a coroutine."""

    @property
    @abc.abstractmethod
    def revision(self) -> int:
        """The latest committed revision this client knows of."""

    @abc.abstractmethod
    async def get(self, key: str) -> KeyValue | None: ...

    @abc.abstractmethod
    async def range(self, prefix: str) -> list[KeyValue]:
        """Every key starting with ``prefix``, sorted by key."""

    @abc.abstractmethod
    async def put(self, key: str, value: bytes | str, lease: int = 0) -> int:
        """Write one key; returns the new revision."""

    @abc.abstractmethod
    async def delete(self, key: str, *, prefix: bool = False) -> int:
        """Delete one key (or every key under a prefix); returns how many were deleted."""

    @abc.abstractmethod
    async def txn(
        self,
        compares: Sequence[Compare],
        on_success: Sequence[Op],
        on_failure: Sequence[Op] = (),
    ) -> TxnResult: ...

    @abc.abstractmethod
    def watch(self, prefix: str, start_revision: int = 0) -> Watch:
        """Events for keys under ``prefix`` with revision >= ``start_revision``
        (0: only changes after now)."""

    @abc.abstractmethod
    async def grant(self, ttl: float) -> int:
        """A new lease of ``ttl`` seconds; returns its id."""

    @abc.abstractmethod
    async def keepalive(self, lease: int) -> float:
        """Renew a lease; returns its TTL. Raises :class:`LeaseNotFoundError` once expired."""

    @abc.abstractmethod
    async def revoke(self, lease: int) -> None:
        """End a lease now, deleting its keys (unknown leases are ignored)."""

    @abc.abstractmethod
    async def close(self) -> None: ...
