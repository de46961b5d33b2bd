"""The mirror process: clients for every cluster, the flows' topic sync, membership of
the instances' group (:mod:`odradek.mirror.group_membership`), one
:class:`~odradek.mirror.partition_mirror.PartitionMirror` task per source partition
assigned to this instance, the periodic commit of source positions, progress lines
and ``/metrics``.

Started by ``odradek mirror`` or ``python -m odradek.mirror --config FILE``; runs in the
foreground until SIGTERM/SIGINT, then drains: in-flight produces finish, positions are
committed, the instance leaves its group (the others take its partitions over), and
a restart resumes there.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import sys
import time

from odradek.config import Config, ConfigError
from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.metrics import MetricsServer
from odradek.mirror import checkpoints
from odradek.mirror import mirror_metrics as metrics
from odradek.mirror.group_membership import GroupMembership
from odradek.mirror.offset_store import OffsetStore, encode_metadata
from odradek.mirror.partition_mirror import PartitionMirror, Tuning
from odradek.mirror.settings import DEFAULTS, MirrorSettings, parse_settings
from odradek.mirror.topic_sync import WorkUnit, sync_topics
from odradek.protocol.api_keys import ApiKey

log = logging.getLogger(__name__)

__all__ = ["DEFAULTS", "MirrorService", "build"]


class MirrorService:
    name = "mirror"

    def __init__(self, settings: MirrorSettings) -> None:
        self.settings = settings
        self.clients = {alias: KafkaClient(cfg) for alias, cfg in settings.clusters.items()}
        self.target = self.clients[settings.target]
        self.store = OffsetStore(self.target, settings.group_id)
        self.tuning = Tuning(
            max_wait_ms=settings.int("fetch.max.wait.ms"),
            min_bytes=max(1, settings.int("fetch.min.bytes")),
            partition_max_bytes=settings.int("max.partition.fetch.bytes"),
            max_in_flight=max(1, settings.int("max.in.flight.requests.per.connection")),
            timeout_ms=settings.int("request.timeout.ms"),
        )
        host, _, port = settings.get("metrics.listener").rpartition(":")
        if settings.values.get("metrics.port"):  # the name every other service uses
            host, port = "0.0.0.0", settings.values["metrics.port"]
        self.metrics = MetricsServer(host or "127.0.0.1", int(port or 0))
        target_config = settings.clusters[settings.target]
        self.membership = GroupMembership(
            # client.id names the instance in the group's description (its member ids
            # start with it): which host and process copies which partitions.
            KafkaClient(
                dataclasses.replace(
                    target_config,
                    client_id=f"{target_config.client_id}-{socket.gethostname()}-{os.getpid()}",
                )
            ),
            settings.group_id,
            session_timeout_ms=settings.int("session.timeout.ms"),
            rebalance_timeout_ms=settings.int("rebalance.timeout.ms"),
            heartbeat_interval_ms=settings.int("heartbeat.interval.ms"),
            on_assigned=self._assigned,
            on_revoked=self._revoked,
        )
        self.units: dict[str, list[WorkUnit]] = {}  # by source alias: what its flow selects
        self.mirrors: dict[WorkUnit, PartitionMirror] = {}
        self.committed: dict[tuple[str, int], tuple[int, str]] = {}
        self._loaded = False
        self.exactly_once: bool | None = None  # decided once the target answers
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> dict[str, int]:
        port = await self.metrics.start()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._refresh_loop(), name="mirror-refresh"),
            loop.create_task(self._commit_loop(), name="mirror-commit"),
            loop.create_task(self._progress_loop(), name="mirror-progress"),
            loop.create_task(self._ready_when_joined(), name="mirror-ready"),
        ]
        if self.settings.bool("emit.checkpoints.enabled"):
            self._tasks.append(loop.create_task(self._checkpoint_loop(), name="mirror-checkpoints"))
        flows = ", ".join(f"{f.source}->{f.target}" for f in self.settings.flows)
        _say(f"mirroring {flows} ({self.settings.policy.kind} policy), metrics on :{port}")
        return {"metrics": port}

    async def stop(self) -> None:
        """Stop copying, commit where each partition got to, leave the group."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.membership.stop()
        await asyncio.gather(*(m.stop() for m in self.mirrors.values()))
        with contextlib.suppress(KafkaClientError, OSError):
            await self._commit()
        await self.membership.leave()
        for client in [*self.clients.values(), self.membership.client]:
            await client.close()
        await self.metrics.stop()

    # -- work --------------------------------------------------------------------------
    async def _refresh_loop(self) -> None:
        interval = self.settings.seconds("refresh.topics.interval.seconds")
        while True:
            await self.refresh()
            await asyncio.sleep(interval)

    async def refresh(self) -> None:
        """Topic sync for every flow, then start/stop partition tasks to match."""
        if not self._loaded:
            try:
                self.committed = await self.store.load()
                self._loaded = True
                self.exactly_once = self._decide_exactly_once()
            except (KafkaClientError, OSError) as exc:
                log.warning(
                    "target %s: cannot read committed positions: %s", self.settings.target, exc
                )
                return
        for flow in self.settings.flows:
            try:
                self.units[flow.source] = await sync_topics(
                    self.clients[flow.source],
                    self.target,
                    flow,
                    self.settings.policy,
                    sync_configs=self.settings.bool("sync.topic.configs.enabled"),
                )
            except (KafkaClientError, OSError) as exc:
                log.warning(
                    "%s->%s: topic sync failed (keeping the current work): %s",
                    flow.source,
                    flow.target,
                    exc,
                )
        counts: dict[str, int] = {}
        for units in self.units.values():
            for u in units:
                counts[u.target_topic] = max(counts.get(u.target_topic, 0), u.partition + 1)
        self.membership.subscribe(counts)
        self.membership.start()
        self.reconcile()

    async def _ready_when_joined(self) -> None:
        """/readyz: the target answered, the topics are synced and this instance has
        its share of the partitions (the group's first rebalance is done)."""
        await self.membership.joined.wait()
        self.metrics.ready = True

    def _decide_exactly_once(self) -> bool:
        """``exactly.once.support``: requested (the default) uses transactions when the
        target serves them; enabled requires them; disabled never uses them."""
        support = self.settings.get("exactly.once.support").lower()
        served = all(
            self.target.supports(api)
            for api in (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.TXN_OFFSET_COMMIT, ApiKey.END_TXN)
        )
        if support == "enabled" and not served:
            _say(
                f"exactly.once.support=enabled, but the target {self.settings.target} does not "
                "serve transactions; set exactly.once.support=requested to copy at least once"
            )
            os._exit(2)
        chosen = served and support != "disabled"
        _say("exactly once (transactions)" if chosen else "at least once (idempotent producer)")
        return chosen

    async def _assigned(self, partitions: set[tuple[str, int]]) -> None:
        """The group gave this instance ``partitions`` (target topic, partition)."""
        self.reconcile()

    async def _revoked(self, partitions: set[tuple[str, int]], lost: bool) -> None:
        """``partitions`` go to other instances: stop their copies; unless they were
        lost (this member was fenced), commit where each got to before the group hands
        them on, so the next owner resumes there."""
        units = [u for u in self.mirrors if u.target_tp in partitions]
        stopping = [self.mirrors.pop(u) for u in units]
        await asyncio.gather(
            *(
                m.stop(graceful=not lost, timeout=self.settings.int("session.timeout.ms") / 2000.0)
                for m in stopping
            )
        )
        if not lost:
            final = {
                u.target_tp: (m.acked, encode_metadata(u.source, m.target_next))
                for u, m in zip(units, stopping, strict=True)
                if m.acked is not None and not m.exactly_once
            }
            try:
                await self._commit_positions(final)
            except (KafkaClientError, OSError) as exc:
                log.warning("committing the positions of revoked partitions: %s", exc)
        for unit in units:
            metrics.forget(unit.source, unit.source_topic, unit.partition)
        self._count_assigned()

    def reconcile(self) -> None:
        """Copy the selected partitions the group assigned to this instance, no others."""
        assigned = self.membership.assigned
        wanted = {u for units in self.units.values() for u in units if u.target_tp in assigned}
        for unit in [u for u in self.mirrors if u not in wanted]:
            mirror = self.mirrors.pop(unit)
            asyncio.get_running_loop().create_task(mirror.stop())
            metrics.forget(unit.source, unit.source_topic, unit.partition)
        for unit in sorted(wanted - set(self.mirrors)):
            mirror = PartitionMirror(
                unit.source,
                # Its own source connection: a broker answers one connection's requests in
                # order, so a long-polling Fetch would hold up every other partition's.
                KafkaClient(self.settings.clusters[unit.source]),
                self.target,
                unit.source_tp,
                unit.target_tp,
                self.tuning,
                self.settings.group_id,
                f"{self.settings.group_id}-{unit.target_topic}-{unit.partition}"
                if self.exactly_once
                else None,
            )
            self.mirrors[unit] = mirror
            mirror.start()
        self._count_assigned()

    def _count_assigned(self) -> None:
        for alias in self.settings.sources:
            metrics.ASSIGNED.labels(alias).set(sum(1 for u in self.mirrors if u.source == alias))

    async def _commit_loop(self) -> None:
        interval = self.settings.int("offset.flush.interval.ms") / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                await self._commit()
            except (KafkaClientError, OSError) as exc:
                log.warning("committing source positions to %s: %s", self.settings.target, exc)

    def positions(self) -> dict[tuple[str, int], tuple[int, str]]:
        out = {}
        for unit, mirror in self.mirrors.items():
            if mirror.acked is not None and not mirror.exactly_once:
                out[unit.target_tp] = (
                    mirror.acked,
                    encode_metadata(unit.source, mirror.target_next),
                )
        return out

    async def _commit(self) -> None:
        current = self.positions()
        await self._commit_positions(
            {tp: v for tp, v in current.items() if self.committed.get(tp) != v}
        )

    async def _commit_positions(self, changed: dict[tuple[str, int], tuple[int, str]]) -> None:
        """OffsetCommit as the group member (generation and member id: a commit from an
        instance the group has moved past is refused, Kafka's ILLEGAL_GENERATION)."""
        if not changed or self.membership.generation < 0:
            return
        failed = await self.store.commit(
            changed,
            generation=self.membership.generation,
            member_id=self.membership.member_id,
        )
        for tp, value in changed.items():
            if tp not in failed:
                self.committed[tp] = value
        if failed:
            log.warning(
                "commit of %d positions failed: %s", len(failed), sorted(set(failed.values()))
            )

    async def _checkpoint_loop(self) -> None:
        interval = self.settings.seconds("emit.checkpoints.interval.seconds")
        sync = self.settings.bool("sync.group.offsets.enabled")
        while True:
            await asyncio.sleep(interval)
            for flow in self.settings.flows:
                try:
                    found = await checkpoints.translate_groups(
                        self.clients[flow.source], flow, self.mirrors
                    )
                    await checkpoints.emit(self.target, flow.source, found)
                    moved = await checkpoints.sync_group_offsets(self.target, found) if sync else 0
                    log.debug(
                        "%s: %d checkpoints, %d group offsets synced",
                        flow.source,
                        len(found),
                        moved,
                    )
                except (KafkaClientError, OSError) as exc:
                    log.warning(
                        "%s->%s: group offset checkpoints: %s", flow.source, flow.target, exc
                    )

    # -- progress ----------------------------------------------------------------------
    async def _progress_loop(self) -> None:
        interval = self.settings.seconds("progress.interval.seconds")
        last_bytes, last_time, quiet = 0, time.monotonic(), 0
        while True:
            await asyncio.sleep(interval)
            total_records = sum(m.records for m in self.mirrors.values())
            total_bytes = sum(m.bytes for m in self.mirrors.values())
            now = time.monotonic()
            rate = (total_bytes - last_bytes) / max(1e-6, now - last_time) / 1e6
            idle = total_bytes == last_bytes
            last_bytes, last_time = total_bytes, now
            quiet = quiet + 1 if idle else 0
            if idle and quiet % 12 != 1:
                continue  # idle: one line a minute (at the default interval), not one each time
            lag = sum(m.lag for m in self.mirrors.values())
            failing = sum(1 for m in self.mirrors.values() if m.errors)
            topics = len({u.target_topic for u in self.mirrors})
            _say(
                f"{topics} topics, {len(self.mirrors)} partitions: {total_records:,} records "
                f"({total_bytes / 1e6:,.1f} MB) mirrored, {rate:,.2f} MB/s, lag {lag:,} records"
                + (f", {failing} partitions retried after errors" if failing else "")
            )


def _say(line: str) -> None:
    print(f"odradek mirror: {line}", file=sys.stderr, flush=True)


def build(config: Config) -> MirrorService:
    try:
        settings = parse_settings(config.as_dict())
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return MirrorService(settings)
