"""The active controller: election, fenced persistence, snapshots, heartbeats.

One controller is active at a time. It claims ``<root>/controller`` under a store
lease (vanishing with the process, like ZooKeeper's ephemeral ``/controller``) and
bumps ``<root>/controller_epoch``; every write afterwards is a txn guarded by
``controller_epoch == mine``, so a controller that lost its lease cannot write
after a successor took over. Others wait as standbys for the claim to vanish.

Requests run one at a time under a lock: apply the rule to the model, persist the
dirty records in one fenced txn, publish the new ``ClusterMetadata`` version, then
answer. If a write fails or is fenced the controller steps down and discards its
model; it reloads from the store if it wins again. Watchers hold only the newest
snapshot, so a slow one skips versions and never holds the controller up.
Heartbeats are answered from memory; a timer marks nodes OFFLINE once they miss
``broker.session.timeout.ms``. Each live node also has a leased registration key
(``<root>/brokers/ids/<id>``, :mod:`.registrations`) that the active controller renews
while the node heartbeats; a key that vanishes (its lease ran out, e.g. while no
controller vouched for the node) fences the node too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from odradek.acl import AclBinding, AclFilter
from odradek.client_quotas import Entity, Ops, QuotaError
from odradek.config_catalog.controller import CONTROLLER_CONFIGS
from odradek.controller import metrics
from odradek.controller.cluster_state import NodeInfo, NodeState, PartitionState
from odradek.controller.errors import ControllerError, NotControllerError
from odradek.controller.model import (
    ClusterModel,
    ConfigChange,
    ElectionResult,
    ElectionType,
    ResourceType,
    Stats,
    TopicResult,
    TopicSpec,
)
from odradek.controller.registrations import NodeRegistrations
from odradek.controller.security_state import AclDeletion, ScramResult
from odradek.controller.session_expiry import until_session_expiry
from odradek.controller.snapshot import build_metadata
from odradek.controller.store import (
    CompactedError,
    Compare,
    Delete,
    EventType,
    LeaseNotFoundError,
    MetadataStore,
    Op,
    Put,
    StoreClosedError,
    StoreError,
)
from odradek.controller.uncancellable import uncancellable
from odradek.rpc.v1 import common_pb2
from odradek.sasl.scram import ScramCredential

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class ControllerSettings:
    node_id: int = CONTROLLER_CONFIGS.int("node.id")
    heartbeat_interval_ms: int = CONTROLLER_CONFIGS.int("broker.heartbeat.interval.ms")
    session_timeout_ms: int = CONTROLLER_CONFIGS.int("broker.session.timeout.ms")
    lease_ttl_ms: int = CONTROLLER_CONFIGS.int("controller.lease.ttl.ms")
    producer_id_block_size: int = CONTROLLER_CONFIGS.int("producer.id.block.size")
    root: str = "/odradek"
    static_configs: dict[str, str] = field(default_factory=dict)


@dataclass
class ConfigResult:
    type: ResourceType
    name: str
    error_code: int = 0
    error_message: str = ""


@dataclass
class PartitionCountChange:
    topic: str
    count: int
    assignments: list[list[int]] = field(default_factory=list)


@dataclass
class ConfigResourceChange:
    type: ResourceType
    name: str
    changes: list[ConfigChange]
    incremental: bool


class MetadataWatch:
    """One subscriber to metadata versions; keeps only the newest unseen snapshot."""

    def __init__(self, known_version: int) -> None:
        self.known_version = known_version
        self._latest: common_pb2.ClusterMetadata | None = None
        self._wakeup = asyncio.Event()
        self._closed = False

    def offer(self, snapshot: common_pb2.ClusterMetadata) -> None:
        self._latest = snapshot
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    async def next(self) -> common_pb2.ClusterMetadata | None:
        """The next newer snapshot, or None once the controller stopped being active."""
        while True:
            latest = self._latest
            if latest is not None and latest.version > self.known_version:
                self.known_version = latest.version
                return latest
            if self._closed:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()


class Controller:
    def __init__(
        self,
        store: MetadataStore,
        settings: ControllerSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.rng = rng or random.Random()
        root = settings.root.rstrip("/")
        self.key_controller = f"{root}/controller"
        self.key_epoch = f"{root}/controller_epoch"
        self.key_meta = f"{root}/meta/"
        self.key_brokers = f"{root}/brokers/ids/"
        self.registrations: NodeRegistrations | None = None
        self.active = False
        self.healthy = False
        self.epoch = 0
        self.model: ClusterModel | None = None
        self.snapshot: common_pb2.ClusterMetadata | None = None
        self.on_state_change: Callable[[], None] | None = None
        self._lock = asyncio.Lock()
        self._watches: set[MetadataWatch] = set()
        self._last_seen: dict[int, float] = {}
        self._lease = 0
        self._lost = asyncio.Event()
        self._lost_reason = ""
        self._settled = asyncio.Event()
        self._stopping = False
        self._run_task: asyncio.Task[None] | None = None
        self._lead_tasks: list[asyncio.Task[None]] = []
        self._last_holder = ""

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._run_task = asyncio.get_running_loop().create_task(
            self._run(), name="controller-election"
        )

    async def wait_settled(self, timeout: float) -> bool:
        """True once the first election attempt finished (active or healthy standby)."""
        try:
            await asyncio.wait_for(self._settled.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def stop(self) -> None:
        self._stopping = True
        if self._run_task is None:
            return
        if self.active:
            self._lose("stopping")
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._run_task), 5.0)
        self._run_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._run_task
        if self.active or self.model is not None:
            await self._step_down()

    def _notify(self) -> None:
        if self.on_state_change is not None:
            try:
                self.on_state_change()
            except Exception:  # a listener must not break the controller
                log.exception("controller state listener failed")

    async def _run(self) -> None:
        backoff = 0.05
        while not self._stopping:
            try:
                if await self._campaign():
                    backoff = 0.05
                    self._set_health(True)
                    await self._lost.wait()
                    await self._step_down()
                else:
                    self._set_health(True)
                    await self._wait_for_vacancy()
            except asyncio.CancelledError:
                raise
            except StoreClosedError:
                self._set_health(False)
                return
            except Exception as exc:
                log.error(
                    "controller election round failed: %s",
                    exc,
                    exc_info=not isinstance(exc, StoreError),
                )
                if self.active or self.model is not None:
                    await self._step_down()
                self._set_health(False)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _set_health(self, healthy: bool) -> None:
        self.healthy = healthy
        self._settled.set()
        self._notify()

    # ------------------------------------------------------------------ election

    async def _campaign(self) -> bool:
        ttl = self.settings.lease_ttl_ms / 1000.0
        lease = await self.store.grant(ttl)
        won = False
        try:
            current = await self.store.get(self.key_epoch)
            epoch = int(current.value) if current is not None else 0
            claim = json.dumps(
                {"controller_id": self.settings.node_id, "controller_epoch": epoch + 1}
            )
            result = await self.store.txn(
                [
                    Compare.missing(self.key_controller),
                    Compare.mod_revision_equals(
                        self.key_epoch, current.mod_revision if current else 0
                    ),
                ],
                [Put.of(self.key_controller, claim, lease), Put.of(self.key_epoch, str(epoch + 1))],
            )
            if not result.succeeded:
                return False
            won = True
            async with self._lock:
                self._lease = lease
                self.epoch = epoch + 1
                model = ClusterModel(
                    self.settings.static_configs,
                    producer_id_block_size=self.settings.producer_id_block_size,
                    rng=self.rng,
                )
                records = {
                    kv.key[len(self.key_meta) :]: json.loads(kv.value)
                    for kv in await self.store.range(self.key_meta)
                }
                model.load(records)
                if model.bootstrap():
                    log.info("new cluster %s", model.cluster_id)
                model.complete_reassignments()
                model.touch()  # the new controller epoch is a new version
                now = self.clock()
                self._last_seen = {n: now for n in model.nodes}  # one session of grace
                self._lost.clear()
                self.model = model
                self.active = True
                await self._commit(model, None)
                registrations = NodeRegistrations(
                    self.store,
                    self.key_brokers,
                    self._fence,
                    session_timeout_s=self.settings.session_timeout_ms / 1000.0,
                    clock=self.clock,
                )
                await registrations.load(model.nodes, self.epoch)
                self.registrations = registrations
            log.info(
                "node %d is the active controller (epoch %d, metadata version %d)",
                self.settings.node_id,
                self.epoch,
                model.metadata_version,
            )
            metrics.ACTIVE.set(1)
            self._lead_tasks = [
                asyncio.get_running_loop().create_task(self._guard(coro), name=name)
                for name, coro in (
                    ("controller-lease", self._keep_lease()),
                    ("controller-sessions", self._expire_sessions()),
                    ("controller-registrations", self._keep_registrations()),
                    ("controller-registration-watch", self._watch_registrations()),
                    ("controller-rebalance", self._rebalance_leaders()),
                )
            ]
            return True
        finally:
            if not won:
                with contextlib.suppress(StoreError):
                    await self.store.revoke(lease)

    async def _wait_for_vacancy(self) -> None:
        watch = self.store.watch(self.key_controller)
        try:
            holder = await self.store.get(self.key_controller)
            if holder is None:
                return
            who = holder.value.decode(errors="replace")
            if who != self._last_holder:
                self._last_holder = who
                log.info("standing by; active controller: %s", who)
            async with asyncio.timeout(self.settings.lease_ttl_ms / 1000.0):
                async for event in watch:
                    if event.type is EventType.DELETE:
                        return
        except (TimeoutError, CompactedError):
            return
        finally:
            watch.cancel()

    def _lose(self, reason: str) -> None:
        """Stop serving at once; the election loop finishes stepping down."""
        if self.active:
            level = logging.INFO if self._stopping else logging.WARNING
            log.log(level, "controller %d stepping down: %s", self.settings.node_id, reason)
        self.active = False
        self._lost_reason = reason
        self._lost.set()

    async def _step_down(self) -> None:
        self.active = False
        current = asyncio.current_task()
        for task in self._lead_tasks:
            if task is not current:
                task.cancel()
        for task in self._lead_tasks:
            if task is not current:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._lead_tasks = []
        for watch in self._watches:
            watch.close()
        self._watches.clear()
        self.model = None
        self.snapshot = None
        if self.registrations is not None:
            self.registrations.clear()  # not revoked: a successor may adopt them
            self.registrations = None
        metrics.clear()
        lease, self._lease = self._lease, 0
        if lease:
            with contextlib.suppress(StoreError):
                await self.store.revoke(lease)
        self._notify()

    async def _guard(self, coro: Awaitable[None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except NotControllerError:
            pass
        except Exception as exc:
            log.exception("controller task failed")
            self._lose(f"internal task failed: {exc!r}")

    async def _keep_lease(self) -> None:
        interval = self.settings.lease_ttl_ms / 3000.0
        while self.active:
            await asyncio.sleep(interval)
            try:
                await self.store.keepalive(self._lease)
            except (LeaseNotFoundError, StoreError) as exc:
                self._lose(f"lost the controller lease: {exc}")
                return

    async def _expire_sessions(self) -> None:
        """Fence the nodes whose heartbeats stopped for ``broker.session.timeout.ms``.

        Sleeps until the earliest session can run out rather than waking every
        heartbeat interval: a heartbeat only moves a deadline later, and a node seen
        for the first time gets a whole session, so no deadline passes unseen while
        it sleeps (at most one session)."""
        session = self.settings.session_timeout_ms / 1000.0
        wait = 0.0
        while self.active:
            await asyncio.sleep(wait)
            model = self.model
            if model is None:
                return
            now = self.clock()
            if any(self._expired(model, n, now, session) for n in model.nodes):
                fenced = await self._mutate(lambda m: self._fence_expired(m, session))
                await self._unvouch(fenced)
                now = self.clock()
            live = [n for n, info in model.nodes.items() if info.state is not NodeState.OFFLINE]
            wait = until_session_expiry(self._last_seen, live, now, session)

    def _expired(self, model: ClusterModel, node_id: int, now: float, session: float) -> bool:
        node = model.nodes[node_id]
        seen = self._last_seen.setdefault(node_id, now)
        return node.state is not NodeState.OFFLINE and now - seen > session

    def _fence_expired(self, model: ClusterModel, session: float) -> list[int]:
        now = self.clock()
        fenced = []
        for node_id in sorted(model.nodes):
            if self._expired(model, node_id, now, session):
                log.warning(
                    "node %d missed heartbeats for %.1fs: marking it OFFLINE",
                    node_id,
                    now - self._last_seen[node_id],
                )
                if model.node_offline(node_id):
                    fenced.append(node_id)
        return fenced

    # ------------------------------------------------------------------ registrations

    def _fence(self) -> Compare:
        """The guard of every write: the controller epoch is still ours."""
        return Compare.value_equals(self.key_epoch, str(self.epoch))

    async def _vouch(self, node: NodeInfo) -> None:
        """Write the node's leased registration key (under the lock, like model writes)."""
        async with self._lock:
            registrations = self.registrations
            if not self.active or registrations is None:
                raise NotControllerError()
            try:
                await registrations.register(node, self.epoch)
            except NotControllerError:
                self._lose("fenced: a newer controller epoch exists")
                raise
            except StoreError as exc:
                self._lose(f"metadata store write failed: {exc}")
                raise NotControllerError(
                    "The metadata store write failed; controller stepping down"
                ) from exc

    async def _unvouch(self, node_ids: Iterable[int]) -> None:
        registrations = self.registrations
        if registrations is not None:
            for node_id in node_ids:
                await registrations.remove(node_id)

    async def _keep_registrations(self) -> None:
        session = self.settings.session_timeout_ms / 1000.0
        interval = max(0.02, min(self.settings.heartbeat_interval_ms / 1000.0, session / 4))
        while self.active:
            await asyncio.sleep(interval)
            registrations = self.registrations
            if registrations is None:
                return
            try:
                await registrations.renew()
            except StoreError as exc:  # the controller lease decides whether we lead
                log.warning("cannot renew node registrations: %s", exc)

    async def _watch_registrations(self) -> None:
        while self.active:
            registrations = self.registrations
            if registrations is None:
                return
            try:
                async for node_id in registrations.vanished():
                    model = self.model
                    if model is None or node_id not in model.nodes:
                        continue
                    log.warning("registration of node %d expired: marking it OFFLINE", node_id)

                    def offline(m: ClusterModel, node: int = node_id) -> bool:
                        return m.node_offline(node)

                    await self._mutate(offline)
            except CompactedError:
                registrations.resync()
            except StoreError as exc:
                log.warning("watching node registrations failed: %s", exc)
                await asyncio.sleep(0.5)

    async def _rebalance_leaders(self) -> None:
        model = self.model
        if model is None or (model.config("auto.leader.rebalance.enable") or "").lower() != "true":
            return
        interval = max(1, model.config_int("leader.imbalance.check.interval.seconds"))
        while self.active:
            await asyncio.sleep(interval)
            moved = await self._mutate(lambda m: m.rebalance_preferred_leaders())
            if moved:
                log.info("moved %d leaderships back to their preferred replicas", moved)

    # ------------------------------------------------------------------ commit and publish

    def _require(self) -> ClusterModel:
        if not self.active or self.model is None:
            raise NotControllerError()
        return self.model

    async def _mutate(self, fn: Callable[[ClusterModel], T]) -> T:
        """Apply, persist, publish; runs to completion even if the caller is cancelled."""
        return await uncancellable(self._mutate_now(fn))

    async def _mutate_now(self, fn: Callable[[ClusterModel], T]) -> T:
        async with self._lock:
            model = self._require()
            before = dataclasses.replace(model.stats)
            try:
                result = fn(model)
            except ControllerError:
                if model.has_changes:
                    await self._commit(model, before)
                raise
            except Exception as exc:
                self._lose(f"internal error: {exc!r}")
                raise
            await self._commit(model, before)
            return result

    async def _commit(self, model: ClusterModel, before: Stats | None) -> None:
        changes = model.take_changes()
        if not changes:
            return
        ops: list[Op] = []
        for key, value in changes.items():
            if value is None:
                ops.append(Delete(self.key_meta + key))
            else:
                ops.append(Put.of(self.key_meta + key, json.dumps(value, separators=(",", ":"))))
        try:
            result = await self.store.txn([self._fence()], ops)
        except StoreError as exc:
            self._lose(f"metadata store write failed: {exc}")
            raise NotControllerError(
                "The metadata store write failed; controller stepping down"
            ) from exc
        if not result.succeeded:
            self._lose("fenced: a newer controller epoch exists")
            raise NotControllerError("Fenced by a newer controller")
        if before is not None:
            after = model.stats
            metrics.count(
                Stats(
                    after.leader_elections - before.leader_elections,
                    after.isr_shrinks - before.isr_shrinks,
                    after.isr_expands - before.isr_expands,
                )
            )
        if model is self.model:
            self._publish(model)

    def _publish(self, model: ClusterModel) -> None:
        snapshot = build_metadata(model, self.settings.node_id, self.epoch)
        if self.snapshot is not None and snapshot.version <= self.snapshot.version:
            return
        self.snapshot = snapshot
        for watch in self._watches:
            watch.offer(snapshot)
        metrics.observe(model)

    # ------------------------------------------------------------------ nodes

    async def register_node(self, node: NodeInfo, *, session: int = 0) -> NodeInfo:
        """Register ``node``; ``session`` (its current incarnation) updates its endpoints in place."""

        def register(model: ClusterModel) -> NodeInfo:
            registered = model.register_node(node, session=session)
            self._last_seen[node.node_id] = self.clock()
            return registered

        registered = await self._mutate(register)
        if not session or registered.incarnation != session:
            await uncancellable(self._vouch(registered))
        return registered

    def heartbeat(self, node_id: int, incarnation: int) -> bool:
        """Record a heartbeat; returns ``shutdown_ready``. Raises STALE_BROKER_EPOCH."""
        model = self._require()
        model.check_session(node_id, incarnation)
        self._last_seen[node_id] = self.clock()
        if self.registrations is not None:
            self.registrations.seen(node_id)
        return model.shutdown_ready(node_id)

    async def shutdown_node(self, node_id: int, incarnation: int) -> list[tuple[str, int]]:
        return await self._mutate(lambda m: m.begin_shutdown(node_id, incarnation))

    # ------------------------------------------------------------------ metadata

    def metadata(self) -> common_pb2.ClusterMetadata:
        self._require()
        assert self.snapshot is not None
        return self.snapshot

    def watch(self, known_version: int = 0) -> MetadataWatch:
        self._require()
        snapshot = self.snapshot
        assert snapshot is not None
        # A version from another history (a wiped store) must not silence the stream.
        watch = MetadataWatch(known_version if known_version <= snapshot.version else 0)
        watch.offer(snapshot)
        self._watches.add(watch)
        return watch

    def unwatch(self, watch: MetadataWatch) -> None:
        self._watches.discard(watch)

    # ------------------------------------------------------------------ topics

    async def create_topics(
        self, specs: Sequence[TopicSpec], *, validate_only: bool = False, internal: bool = False
    ) -> list[TopicResult]:
        counts = Counter(spec.name for spec in specs)

        def create(model: ClusterModel) -> list[TopicResult]:
            return [
                TopicResult.duplicate(
                    spec.name,
                    "Create topics request contains multiple entries for the following "
                    f"topics: {spec.name}",
                )
                if counts[spec.name] > 1
                else TopicResult.outcome(
                    spec.name,
                    partial(
                        model.create_topic, spec, internal=internal, validate_only=validate_only
                    ),
                )
                for spec in specs
            ]

        return await self._mutate(create)

    async def delete_topics(
        self, names: Iterable[str] = (), topic_ids: Iterable[bytes] = ()
    ) -> list[TopicResult]:
        names, topic_ids = list(names), list(topic_ids)

        def delete(model: ClusterModel) -> list[TopicResult]:
            results = [
                TopicResult.outcome(name, partial(model.delete_topic, name=name)) for name in names
            ]
            for topic_id in topic_ids:
                try:
                    results.append(model.delete_topic(topic_id=topic_id))
                except ControllerError as exc:
                    failed = TopicResult.failed("", exc)
                    failed.topic_id = topic_id
                    results.append(failed)
            return results

        return await self._mutate(delete)

    async def create_partitions(
        self, changes: Sequence[PartitionCountChange], *, validate_only: bool = False
    ) -> list[TopicResult]:
        counts = Counter(c.topic for c in changes)

        def grow(model: ClusterModel) -> list[TopicResult]:
            return [
                TopicResult.duplicate(change.topic, "Duplicate topic in request.")
                if counts[change.topic] > 1
                else TopicResult.outcome(
                    change.topic,
                    partial(
                        model.create_partitions,
                        change.topic,
                        change.count,
                        change.assignments,
                        validate_only=validate_only,
                    ),
                )
                for change in changes
            ]

        return await self._mutate(grow)

    async def alter_configs(
        self, resources: Sequence[ConfigResourceChange], *, validate_only: bool = False
    ) -> list[ConfigResult]:
        def alter(model: ClusterModel) -> list[ConfigResult]:
            results = []
            for res in resources:
                try:
                    model.alter_configs(
                        res.type,
                        res.name,
                        res.changes,
                        incremental=res.incremental,
                        validate_only=validate_only,
                    )
                    results.append(ConfigResult(res.type, res.name))
                except ControllerError as exc:
                    results.append(ConfigResult(res.type, res.name, int(exc.code), exc.message))
            return results

        return await self._mutate(alter)

    # ------------------------------------------------------------------ SCRAM credentials and ACLs

    async def alter_scram(
        self,
        upsertions: Sequence[tuple[str, ScramCredential]],
        deletions: Sequence[tuple[str, int]],
    ) -> list[ScramResult]:
        return await self._mutate(lambda m: m.security.alter_scram(upsertions, deletions))

    async def alter_acls(
        self, creations: Sequence[AclBinding], deletions: Sequence[AclFilter]
    ) -> tuple[list[tuple[int, str]], list[AclDeletion]]:
        return await self._mutate(
            lambda m: (m.security.create_acls(creations), m.security.delete_acls(deletions))
        )

    async def alter_client_quotas(
        self, alterations: Sequence[tuple[Entity, Ops]], validate_only: bool
    ) -> list[tuple[Entity, QuotaError | None]]:
        return await self._mutate(lambda m: m.client_quotas.alter(alterations, validate_only))

    # ------------------------------------------------------------------ producer ids and partitions

    async def allocate_producer_ids(self, node_id: int, incarnation: int) -> tuple[int, int]:
        return await self._mutate(lambda m: m.allocate_producer_ids(node_id, incarnation))

    async def alter_partition(
        self,
        node_id: int,
        incarnation: int,
        topic: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Sequence[int],
    ) -> PartitionState:
        def alter(model: ClusterModel) -> PartitionState:
            return model.alter_partition(
                node_id, incarnation, topic, partition, leader_epoch, partition_epoch, new_isr
            ).copy()

        return await self._mutate(alter)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        model = self.model
        if model is None:
            return None
        t = model.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition].copy()

    async def elect_leaders(
        self, election: ElectionType, partitions: Sequence[tuple[str, int]] | None
    ) -> list[ElectionResult]:
        return await self._mutate(lambda m: m.elect_leaders(election, partitions))

    # ------------------------------------------------------------------ reassignments, log dirs

    async def alter_partition_reassignments(
        self,
        requests: Sequence[tuple[str, int, list[int] | None]],
        *,
        allow_replication_factor_change: bool = True,
    ) -> list[tuple[int, str]]:
        """(error code, message) per requested (topic, partition, target or None to cancel)."""

        def alter(model: ClusterModel) -> list[tuple[int, str]]:
            results: list[tuple[int, str]] = []
            for topic, partition, target in requests:
                try:
                    model.alter_partition_reassignment(
                        topic,
                        partition,
                        target,
                        allow_replication_factor_change=allow_replication_factor_change,
                    )
                    results.append((0, ""))
                except ControllerError as exc:
                    results.append((int(exc.code), exc.message))
            return results

        results = await self._mutate(alter)
        done = sum(1 for code, _ in results if not code)
        log.info("altered %d of %d partition reassignment(s)", done, len(results))
        return results

    def partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> list[tuple[str, PartitionState]]:
        return self._require().partition_reassignments(partitions)

    async def report_offline_replicas(
        self, node_id: int, incarnation: int, partitions: Sequence[tuple[str, int]]
    ) -> int:
        return await self._mutate(
            lambda m: m.report_offline_replicas(node_id, incarnation, partitions)
        )
