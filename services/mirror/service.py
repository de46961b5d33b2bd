"""The mirror process: clients for every cluster, the flows' topic sync, one
:class:`~odradek.mirror.partition_mirror.PartitionMirror` task per assigned source
partition, the periodic commit of source positions, progress lines and ``/metrics``.

Started by ``odradek mirror`` or ``python -m odradek.mirror --config FILE``; runs in the
foreground until SIGTERM/SIGINT, then drains: in-flight produces finish, positions are
committed, and a restart resumes there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time

from odradek.config import Config, ConfigError
from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.metrics import MetricsServer
from odradek.mirror import checkpoints
from odradek.mirror import mirror_metrics as metrics
from odradek.mirror.offset_store import OffsetStore, decode_metadata, encode_metadata
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
            partition_max_bytes=settings.int("max.partition.fetch.bytes"),
            max_in_flight=max(1, settings.int("max.in.flight.requests.per.connection")),
            timeout_ms=settings.int("request.timeout.ms"),
        )
        host, _, port = settings.get("metrics.listener").rpartition(":")
        if settings.values.get("metrics.port"):  # the name every other service uses
            host, port = "0.0.0.0", settings.values["metrics.port"]
        self.metrics = MetricsServer(host or "127.0.0.1", int(port or 0))
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
        ]
        if self.settings.bool("emit.checkpoints.enabled"):
            self._tasks.append(loop.create_task(self._checkpoint_loop(), name="mirror-checkpoints"))
        flows = ", ".join(f"{f.source}->{f.target}" for f in self.settings.flows)
        _say(f"mirroring {flows} ({self.settings.policy.kind} policy), metrics on :{port}")
        return {"metrics": port}

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await asyncio.gather(*(m.stop() for m in self.mirrors.values()))
        with contextlib.suppress(KafkaClientError, OSError):
            await self._commit()
        for client in self.clients.values():
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
        self.reconcile({u for units in self.units.values() for u in units})
        self.metrics.ready = True  # /readyz: the target answered and the work is running

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

    def reconcile(self, wanted: set[WorkUnit]) -> None:
        for unit in [u for u in self.mirrors if u not in wanted]:
            mirror = self.mirrors.pop(unit)
            asyncio.get_running_loop().create_task(mirror.stop())
            metrics.forget(unit.source, unit.source_topic, unit.partition)
        for unit in sorted(wanted - set(self.mirrors)):
            start, target_offset = None, -1
            if unit.target_tp in self.committed:
                offset, meta = self.committed[unit.target_tp]
                source, target_offset = decode_metadata(meta)
                if source == unit.source:
                    start = offset
            mirror = PartitionMirror(
                unit.source,
                # Its own source connection: a broker answers one connection's requests in
                # order, so a long-polling Fetch would hold up every other partition's.
                KafkaClient(self.settings.clusters[unit.source]),
                self.target,
                unit.source_tp,
                unit.target_tp,
                start,
                self.tuning,
                (
                    f"{self.settings.group_id}-{unit.target_topic}-{unit.partition}",
                    self.settings.group_id,
                )
                if self.exactly_once
                else None,
            )
            if start is not None and target_offset >= 0:
                mirror.syncs.append((start, target_offset, 0))
            self.mirrors[unit] = mirror
            mirror.start()
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
        changed = {tp: v for tp, v in current.items() if self.committed.get(tp) != v}
        if not changed:
            return
        failed = await self.store.commit(changed)
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
