"""The etcd backend of :class:`~odradek.controller.store.MetadataStore` (etcd v3 API).

A thin adapter over the ``etcd3aio`` asyncio client: every method is one etcd RPC
(``Range``, ``Put``, ``DeleteRange``, ``Txn``, ``LeaseGrant``/``KeepAlive``/``Revoke``,
``Watch``), so revisions, versions, compares and lease behaviour are etcd's own —
the embedded store imitates them, and the shared contract tests hold both to them.

- Writes are sent once (no client-side retry): a write that times out may or may not
  have been applied, and the controller steps down on any :class:`StoreError` and
  reloads from the store, which is the only safe answer to that ambiguity.
- Leases are whole seconds in etcd; a TTL is rounded up (and etcd itself may raise
  it to its minimum, 1.5 x its election timeout). Leases live in etcd, not in this
  process: a killed controller's lease runs out after its TTL, which is what lets a
  standby take over.
- ``watch(prefix, 0)`` starts at the revision after the newest one this client has
  seen, so nothing this client wrote after calling ``watch`` can be missed even though
  the server creates the watch a round trip later. A watch that loses its stream
  reopens it from the revision after the last event it delivered; one whose history
  was compacted away raises :class:`CompactedError`.

``metadata.store=etcd://host:port[,host:port...]`` selects it (see :mod:`.store_url`).
With ``metadata.store.tls.ca`` (and ``.cert``/``.key`` for etcd's
``--client-cert-auth``) the client speaks TLS (:class:`EtcdTls`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import logging
import math
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from etcd3aio import Etcd3Client, EtcdError, prefix_range_end
from etcd3aio._protobuf import (
    Compare as PbCompare,
)
from etcd3aio._protobuf import (
    DeleteRangeRequest,
    PutRequest,
    RequestOp,
    WatchCreateRequest,
    WatchRequest,
    WatchStub,
)

from odradek.config import ConfigError
from odradek.controller.store import (
    CompactedError,
    Compare,
    CompareOp,
    CompareTarget,
    EventType,
    KeyValue,
    LeaseNotFoundError,
    MetadataStore,
    Op,
    Put,
    StoreClosedError,
    StoreError,
    TxnResult,
    Watch,
    WatchEvent,
    to_bytes,
)

log = logging.getLogger(__name__)

_TARGETS = {
    CompareTarget.VALUE: PbCompare.VALUE,
    CompareTarget.VERSION: PbCompare.VERSION,
    CompareTarget.CREATE_REVISION: PbCompare.CREATE,
    CompareTarget.MOD_REVISION: PbCompare.MOD,
    CompareTarget.LEASE: PbCompare.LEASE,
}
_RESULTS = {
    CompareOp.EQUAL: PbCompare.EQUAL,
    CompareOp.NOT_EQUAL: PbCompare.NOT_EQUAL,
    CompareOp.GREATER: PbCompare.GREATER,
    CompareOp.LESS: PbCompare.LESS,
}
_FIELDS = {
    CompareTarget.VALUE: "value",
    CompareTarget.VERSION: "version",
    CompareTarget.CREATE_REVISION: "create_revision",
    CompareTarget.MOD_REVISION: "mod_revision",
    CompareTarget.LEASE: "lease",
}
_PB_DELETE = 1  # mvccpb.Event.EventType.DELETE
_TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
_WATCH_BACKOFF_MIN = 0.05
_WATCH_BACKOFF_MAX = 1.0


def _key(key: str) -> bytes:
    return key.encode("utf-8")


def _range_of(prefix: str) -> tuple[bytes, bytes]:
    """etcd's (key, range_end) for "every key starting with prefix" ("" = all keys)."""
    if not prefix:
        return b"\x00", b"\x00"
    raw = _key(prefix)
    return raw, prefix_range_end(raw)


def _kv(pb: Any) -> KeyValue:
    return KeyValue(
        key=bytes(pb.key).decode("utf-8"),
        value=bytes(pb.value),
        create_revision=int(pb.create_revision),
        mod_revision=int(pb.mod_revision),
        version=int(pb.version),
        lease=int(pb.lease),
    )


def _compare(c: Compare) -> Any:
    pb = PbCompare(key=_key(c.key), target=_TARGETS[c.target], result=_RESULTS[c.op])
    operand = c.operand
    if c.target is CompareTarget.VALUE:
        if not isinstance(operand, bytes):
            raise ValueError(f"a value compare needs bytes, got {operand!r}")
        pb.value = operand
    else:
        if not isinstance(operand, int):
            raise ValueError(f"a {c.target.value} compare needs an int, got {operand!r}")
        setattr(pb, _FIELDS[c.target], operand)
    return pb


def _request_op(op: Op) -> Any:
    if isinstance(op, Put):
        return RequestOp(
            request_put=PutRequest(key=_key(op.key), value=to_bytes(op.value), lease=op.lease)
        )
    if op.prefix:
        key, end = _range_of(op.key)
        return RequestOp(request_delete_range=DeleteRangeRequest(key=key, range_end=end))
    return RequestOp(request_delete_range=DeleteRangeRequest(key=_key(op.key)))


def _lease_missing(exc: BaseException) -> bool:
    details = ""
    if isinstance(exc, grpc.aio.AioRpcError):
        if exc.code() is not grpc.StatusCode.NOT_FOUND:
            return False
        details = exc.details() or ""
    elif isinstance(exc, EtcdError) and isinstance(exc.__cause__, grpc.aio.AioRpcError):
        return _lease_missing(exc.__cause__)
    return "lease not found" in details


async def _resolve_endpoints(endpoints: Sequence[str], patience: float) -> list[str]:
    """``host:port`` -> ``a.b.c.d:port``: etcd3aio dials with gRPC's ``ipv4:`` scheme,
    which takes IP literals only, while compose and Kubernetes name etcd by DNS.
    Names that do not resolve yet (a container still starting) are retried."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    out: list[str] = []
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        try:
            ipaddress.IPv4Address(host)
            out.append(f"{host}:{port}")
            continue
        except ValueError:
            pass
        while True:
            try:
                infos = await loop.getaddrinfo(host, int(port), family=socket.AF_INET)
                out.append(f"{infos[0][4][0]}:{port}")
                break
            except OSError as exc:
                if loop.time() >= deadline:
                    raise StoreError(f"cannot resolve etcd endpoint {endpoint}: {exc}") from exc
                await asyncio.sleep(0.5)
    return out


@dataclass(frozen=True)
class EtcdTls:
    """TLS to etcd: the CA of its server certificate, and a client certificate and key
    when etcd runs with ``--client-cert-auth`` (PEM bytes)."""

    ca: bytes
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str | None = None  # None: the endpoint's host name, as dialled

    @classmethod
    def from_settings(cls, get: Callable[[str], str | None]) -> EtcdTls | None:
        """``metadata.store.tls.{ca,cert,key,server.name}``; None when ``ca`` is unset."""
        files = {n: (get(f"metadata.store.tls.{n}") or "").strip() for n in ("ca", "cert", "key")}
        if not files["ca"]:
            if files["cert"] or files["key"]:
                raise ConfigError("metadata.store.tls.cert/key need metadata.store.tls.ca")
            return None
        if bool(files["cert"]) != bool(files["key"]):
            raise ConfigError("metadata.store.tls.cert and metadata.store.tls.key go together")
        data: dict[str, bytes | None] = {}
        for name, path in files.items():
            try:
                data[name] = Path(path).read_bytes() if path else None
            except OSError as exc:
                raise ConfigError(f"metadata.store.tls.{name}={path}: {exc}") from None
        ca = data["ca"]
        assert ca is not None
        server_name = (get("metadata.store.tls.server.name") or "").strip() or None
        return cls(ca, data["cert"], data["key"], server_name)


def _server_name(endpoints: Sequence[str], tls: EtcdTls) -> str | None:
    """What etcd's certificate is checked against: endpoints are dialled by address
    (:func:`_resolve_endpoints`), so a host name given in the URL is kept here."""
    if tls.server_name:
        return tls.server_name
    host = endpoints[0].rpartition(":")[0].strip("[]") if endpoints else ""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        return host or None


class EtcdStore(MetadataStore):
    """``await EtcdStore.connect(["127.0.0.1:2379"])``; see the module docstring."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        timeout: float,
        tls: EtcdTls | None = None,
        server_name: str | None = None,
    ) -> None:
        self.endpoints = list(endpoints)
        self.timeout = timeout
        if tls is None:
            self._client = Etcd3Client(self.endpoints, rpc_max_attempts=1)
        else:
            self._client = Etcd3Client(
                self.endpoints,
                rpc_max_attempts=1,
                tls_server_name=server_name,
                ca_cert=tls.ca,
                cert_key=tls.key,
                cert_chain=tls.cert,
            )
        self._revision = 0
        self._closed = False
        self._watches: set[_EtcdWatch] = set()

    @classmethod
    async def connect(
        cls,
        endpoints: Sequence[str],
        *,
        timeout: float = 5.0,
        wait: float = 0.0,
        tls: EtcdTls | None = None,
    ) -> EtcdStore:
        """Open a client; with ``wait`` > 0, retry until etcd answers or ``wait`` passes.

        With ``wait=0`` an unreachable etcd is not an error here: the first operation
        fails with :class:`StoreError` and the caller retries (the controller's
        election loop backs off and tries again).
        """
        loop = asyncio.get_running_loop()
        store = cls(
            await _resolve_endpoints(endpoints, max(wait, 30.0)),
            timeout=timeout,
            tls=tls,
            server_name=_server_name(endpoints, tls) if tls else None,
        )
        await store._client.connect()
        deadline = loop.time() + wait
        while True:
            try:
                await store.get("\x00odradek-probe")  # learns the current revision
                break
            except StoreError:
                if loop.time() >= deadline:
                    if wait > 0:
                        await store.close()
                        raise
                    break
                await asyncio.sleep(0.1)
        return store

    # ------------------------------------------------------------------ plumbing

    @property
    def revision(self) -> int:
        return self._revision

    def _seen(self, header: Any) -> None:
        revision = int(header.revision)
        if revision > self._revision:
            self._revision = revision

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("metadata store is closed")

    @property
    def _kv_service(self) -> Any:
        self._check_open()
        return self._client.kv

    @property
    def _lease_service(self) -> Any:
        self._check_open()
        return self._client.lease

    def _error(self, what: str, exc: BaseException) -> StoreError:
        if _lease_missing(exc):
            return LeaseNotFoundError(f"etcd {what}: lease not found")
        if isinstance(exc, grpc.aio.AioRpcError):
            return StoreError(f"etcd {what} failed: {exc.code().name} {exc.details() or ''}")
        if isinstance(exc, TimeoutError):
            return StoreError(f"etcd {what} timed out after {self.timeout:.1f}s")
        return StoreError(f"etcd {what} failed: {exc}")

    # ------------------------------------------------------------------ reads

    async def get(self, key: str) -> KeyValue | None:
        kv = self._kv_service
        try:
            response = await kv.get(_key(key), timeout=self.timeout)
        except (EtcdError, grpc.aio.AioRpcError, TimeoutError) as exc:
            raise self._error("get", exc) from exc
        self._seen(response.header)
        return _kv(response.kvs[0]) if response.kvs else None

    async def range(self, prefix: str) -> list[KeyValue]:
        kv = self._kv_service
        key, end = _range_of(prefix)
        try:
            response = await kv.get(key, range_end=end, timeout=self.timeout)
        except (EtcdError, grpc.aio.AioRpcError, TimeoutError) as exc:
            raise self._error("range", exc) from exc
        self._seen(response.header)
        return [_kv(pb) for pb in response.kvs]  # etcd answers in key order

    # ------------------------------------------------------------------ writes

    async def put(self, key: str, value: bytes | str, lease: int = 0) -> int:
        kv = self._kv_service
        try:
            response = await kv.put(_key(key), to_bytes(value), lease=lease, timeout=self.timeout)
        except (EtcdError, grpc.aio.AioRpcError, TimeoutError) as exc:
            raise self._error("put", exc) from exc
        self._seen(response.header)
        return int(response.header.revision)

    async def delete(self, key: str, *, prefix: bool = False) -> int:
        kv = self._kv_service
        if prefix:
            start, end = _range_of(key)
        else:
            start, end = _key(key), None
        try:
            response = await kv.delete(start, range_end=end, timeout=self.timeout)
        except (EtcdError, grpc.aio.AioRpcError, TimeoutError) as exc:
            raise self._error("delete", exc) from exc
        self._seen(response.header)
        return int(response.deleted)

    async def txn(
        self,
        compares: Sequence[Compare],
        on_success: Sequence[Op],
        on_failure: Sequence[Op] = (),
    ) -> TxnResult:
        kv = self._kv_service
        try:
            response = await kv.txn(
                [_compare(c) for c in compares],
                [_request_op(op) for op in on_success],
                [_request_op(op) for op in on_failure],
                timeout=self.timeout,
            )
        except (EtcdError, grpc.aio.AioRpcError, TimeoutError) as exc:
            raise self._error("txn", exc) from exc
        self._seen(response.header)
        return TxnResult(bool(response.succeeded), int(response.header.revision))

    # ------------------------------------------------------------------ leases

    async def grant(self, ttl: float) -> int:
        if ttl <= 0:
            raise ValueError("lease TTL must be positive")
        lease = self._lease_service
        try:
            response = await lease.grant(max(1, math.ceil(ttl)), timeout=self.timeout)
        except (EtcdError, grpc.aio.AioRpcError, TimeoutError) as exc:
            raise self._error("lease grant", exc) from exc
        if response.error:
            raise StoreError(f"etcd lease grant failed: {response.error}")
        self._seen(response.header)
        return int(response.ID)

    async def keepalive(self, lease: int) -> float:
        """One round of etcd's LeaseKeepAlive stream (like ``etcdctl lease keep-alive --once``)."""
        call = self._lease_service.keep_alive(lease)
        try:
            async with asyncio.timeout(self.timeout):
                response = await call.read()
        except (grpc.aio.AioRpcError, TimeoutError) as exc:
            raise self._error("lease keepalive", exc) from exc
        finally:
            call.cancel()
        if response is grpc.aio.EOF:
            raise StoreError("etcd closed the lease keepalive stream")
        if response.TTL <= 0:
            raise LeaseNotFoundError(f"lease {lease:x} not found")
        self._seen(response.header)
        return float(response.TTL)

    async def revoke(self, lease: int) -> None:
        service = self._lease_service
        try:
            response = await service.revoke(lease, timeout=self.timeout)
        except (EtcdError, grpc.aio.AioRpcError, TimeoutError) as exc:
            if _lease_missing(exc):
                return
            raise self._error("lease revoke", exc) from exc
        self._seen(response.header)

    # ------------------------------------------------------------------ watches

    def watch(self, prefix: str, start_revision: int = 0) -> Watch:
        self._check_open()
        channel = self._client._channel
        assert channel is not None
        start = start_revision if start_revision > 0 else self._revision + 1
        watch = _EtcdWatch(self, WatchStub(channel), prefix, start)
        self._watches.add(watch)
        return watch

    # ------------------------------------------------------------------ closing

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watch in list(self._watches):
            watch.cancel()
        with contextlib.suppress(Exception):
            await self._client.close()


class _EtcdWatch(Watch):
    """One etcd watch stream over a key prefix, reopened on transient failures."""

    def __init__(self, store: EtcdStore, stub: Any, prefix: str, start_revision: int) -> None:
        self._store = store
        self._stub = stub
        self.prefix = prefix
        self._next_revision = start_revision
        self._call: Any = None
        self._pending: collections.deque[WatchEvent] = collections.deque()
        self._done = False
        self._backoff = _WATCH_BACKOFF_MIN

    async def _open(self) -> Any:
        key, end = _range_of(self.prefix)
        call = self._stub.Watch()
        self._call = call
        await call.write(
            WatchRequest(
                create_request=WatchCreateRequest(
                    key=key, range_end=end, start_revision=self._next_revision
                )
            )
        )
        return call

    async def _reopen_later(self) -> None:
        self._drop_call()
        await asyncio.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, _WATCH_BACKOFF_MAX)

    def _drop_call(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call.cancel()

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._done:
                raise StopAsyncIteration
            try:
                call = self._call if self._call is not None else await self._open()
                response = await call.read()
            except grpc.aio.AioRpcError as exc:
                if self._done:
                    raise StopAsyncIteration from None
                if exc.code() in _TRANSIENT and not self._store._closed:
                    log.debug("etcd watch on %r interrupted (%s); reopening", self.prefix, exc)
                    await self._reopen_later()
                    continue
                self.cancel()
                raise self._store._error("watch", exc) from exc
            if response is grpc.aio.EOF:
                if self._done:
                    raise StopAsyncIteration
                await self._reopen_later()
                continue
            self._backoff = _WATCH_BACKOFF_MIN
            if response.compact_revision > 0:
                self.cancel()
                raise CompactedError(
                    f"etcd history before revision {response.compact_revision} was compacted "
                    f"(watch on {self.prefix!r} from {self._next_revision})"
                )
            if response.canceled:
                self.cancel()
                raise StoreError(f"etcd cancelled the watch: {response.cancel_reason}")
            self._store._seen(response.header)
            for event in response.events:
                kv = event.kv
                revision = int(kv.mod_revision)
                if event.type == _PB_DELETE:
                    out = KeyValue(bytes(kv.key).decode("utf-8"), b"", 0, revision, 0, 0)
                    self._pending.append(WatchEvent(EventType.DELETE, out))
                else:
                    self._pending.append(WatchEvent(EventType.PUT, _kv(kv)))
                self._next_revision = max(self._next_revision, revision + 1)

    def cancel(self) -> None:
        if not self._done:
            self._done = True
            self._store._watches.discard(self)
            self._drop_call()
