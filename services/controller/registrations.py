"""Node registrations as leased keys: ``<root>/brokers/ids/<node id>``.

The role ZooKeeper's ephemeral ``/brokers/ids/N`` played in the seed. Nodes talk to
the controller, not to the store, so the active controller holds each node's lease on
its behalf: it writes the key under a lease of ``broker.session.timeout.ms`` when the
node registers and renews the lease only while the node heartbeats. A node that stops
heartbeating, or whose vouching controller dies, loses its key when the lease runs
out; the active controller watches the prefix and fences a node whose key vanished.

A new active controller adopts the registrations it finds (their leases are still
running if its predecessor handed over cleanly) and re-creates, for one session of
grace, the key of every node the cluster model holds as live but whose key expired
while no controller was vouching for it. Every write is fenced by the controller
epoch, so a deposed controller cannot re-create keys.

Key value (JSON): ``{"node_id", "kind", "incarnation", "host", "grpc_port", "controller_epoch"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from odradek.controller.cluster_state import NodeInfo, NodeState
from odradek.controller.errors import NotControllerError
from odradek.controller.store import (
    Compare,
    Delete,
    EventType,
    LeaseNotFoundError,
    MetadataStore,
    Put,
    StoreError,
)

log = logging.getLogger(__name__)


@dataclass
class _Session:
    lease: int
    incarnation: int
    revision: int  # the revision that wrote the key under this lease
    seen: float  # the last heartbeat
    renewed: float  # the heartbeat time the lease was last renewed for


class NodeRegistrations:
    def __init__(
        self,
        store: MetadataStore,
        prefix: str,
        fence: Callable[[], Compare],
        *,
        session_timeout_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.fence = fence
        self.ttl = session_timeout_s
        self.clock = clock
        self.sessions: dict[int, _Session] = {}
        self._loaded_revision = 0

    def key(self, node_id: int) -> str:
        return f"{self.prefix}{node_id}"

    def _value(self, node: NodeInfo, epoch: int) -> str:
        return json.dumps(
            {
                "node_id": node.node_id,
                "kind": int(node.kind),
                "incarnation": node.incarnation,
                "host": node.host,
                "grpc_port": node.grpc_port,
                "controller_epoch": epoch,
            },
            separators=(",", ":"),
        )

    async def load(self, nodes: Mapping[int, NodeInfo], epoch: int) -> None:
        """Adopt the live registrations in the store; give the missing ones a new lease."""
        self.sessions.clear()
        found = {kv.key: kv for kv in await self.store.range(self.prefix)}
        now = self.clock()
        stale: list[str] = []
        for key, kv in found.items():
            try:
                node_id = int(key[len(self.prefix) :])
                incarnation = int(json.loads(kv.value)["incarnation"])
            except (ValueError, KeyError, TypeError):
                stale.append(key)
                continue
            node = nodes.get(node_id)
            if (
                node is None
                or node.state is NodeState.OFFLINE
                or node.incarnation != incarnation
                or not kv.lease
            ):
                stale.append(key)
                continue
            try:
                await self.store.keepalive(kv.lease)
            except LeaseNotFoundError:
                continue  # expired between the read and now: re-created below
            self.sessions[node_id] = _Session(kv.lease, incarnation, kv.mod_revision, now, now)
        if stale:
            await self._write([Delete(k) for k in stale])
        adopted = len(self.sessions)
        for node_id, node in sorted(nodes.items()):
            if node.state is not NodeState.OFFLINE and node_id not in self.sessions:
                await self.register(node, epoch)
        self._loaded_revision = self.store.revision
        log.info(
            "node registrations: %d adopted, %d re-created for one session, %d stale removed",
            adopted,
            len(self.sessions) - adopted,
            len(stale),
        )

    async def _write(self, ops: list[Put | Delete]) -> int:
        result = await self.store.txn([self.fence()], ops)
        if not result.succeeded:
            raise NotControllerError("Fenced by a newer controller")
        return result.revision

    async def register(self, node: NodeInfo, epoch: int) -> None:
        """(Re)write the node's key under a fresh lease; the previous lease is revoked."""
        lease = await self.store.grant(self.ttl)
        try:
            revision = await self._write(
                [Put.of(self.key(node.node_id), self._value(node, epoch), lease)]
            )
        except BaseException:
            with contextlib.suppress(StoreError):
                await self.store.revoke(lease)
            raise
        now = self.clock()
        old = self.sessions.get(node.node_id)
        self.sessions[node.node_id] = _Session(lease, node.incarnation, revision, now, now)
        if old is not None and old.lease != lease:
            with contextlib.suppress(StoreError):
                await self.store.revoke(old.lease)

    async def remove(self, node_id: int) -> None:
        """The node is fenced: its key and lease go now (not a session later)."""
        session = self.sessions.pop(node_id, None)
        if session is not None:
            with contextlib.suppress(StoreError):
                await self.store.revoke(session.lease)

    def seen(self, node_id: int) -> None:
        session = self.sessions.get(node_id)
        if session is not None:
            session.seen = self.clock()

    async def renew(self) -> None:
        """Renew the lease of every node that heartbeated since its last renewal."""
        due = [(n, s) for n, s in self.sessions.items() if s.seen > s.renewed]
        if not due:
            return
        results = await asyncio.gather(
            *(self.store.keepalive(s.lease) for _, s in due), return_exceptions=True
        )
        for (node_id, session), result in zip(due, results, strict=True):
            if isinstance(result, LeaseNotFoundError):
                log.warning("registration lease of node %d ran out", node_id)
            elif isinstance(result, BaseException):
                raise result
            else:
                session.renewed = session.seen

    async def vanished(self) -> AsyncIterator[int]:
        """Node ids whose registration key disappeared while we held their session."""
        watch = self.store.watch(self.prefix, self._loaded_revision + 1)
        try:
            async for event in watch:
                if event.type is not EventType.DELETE:
                    continue
                try:
                    node_id = int(event.kv.key[len(self.prefix) :])
                except ValueError:
                    continue
                session = self.sessions.get(node_id)
                if session is None or event.kv.mod_revision <= session.revision:
                    continue
                if await self.store.get(self.key(node_id)) is None:
                    self.sessions.pop(node_id, None)
                    yield node_id
        finally:
            watch.cancel()

    def resync(self) -> None:
        """The watch history is gone: watch again from now (missed deletions are caught
        by the heartbeat timer a session later)."""
        self._loaded_revision = self.store.revision

    def clear(self) -> None:
        """Step down: stop vouching; the leases run out unless a successor adopts them."""
        self.sessions.clear()
