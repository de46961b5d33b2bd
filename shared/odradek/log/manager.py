"""All partition logs of one storage node across its log directories (Kafka's LogManager).

Each log directory holds ``.lock`` (flock, one process), ``meta.properties``, the
node-level checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``,
``replication-offset-checkpoint``) and one ``<topic>-<partition>`` directory per log.

Crash behaviour: a clean :meth:`LogManager.shutdown` flushes every log, writes the
checkpoints and finally a ``.kafka_cleanshutdown`` marker; at startup the marker lets
logs skip recovery and is then removed, so a crash at any later point means full
recovery from the checkpointed recovery points. Deleted logs are renamed
``<topic>-<partition>.<uuid hex>-delete`` before removal, so a crash mid-delete never
resurrects them (leftovers are removed at the next start).

Periodic work uses Kafka's config names: ``log.retention.check.interval.ms``,
``log.flush.scheduler.interval.ms``, ``log.flush.offset.checkpoint.interval.ms``,
``log.flush.start.offset.checkpoint.interval.ms``, ``log.cleaner.backoff.ms``,
``log.cleaner.enable``, ``log.segment.delete.delay.ms`` (via each topic's
``file.delete.delay.ms``); :meth:`LogManager.periodic_jobs` lists them, the storage node
schedules them (the log layer does no asyncio).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.definition import ConfigDef
from odradek.config_catalog.storage import STORAGE_CONFIGS
from odradek.log.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    DirLock,
    MetaProperties,
    OffsetCheckpointFile,
    atomic_write_text,
    fsync_dir,
)
from odradek.log.cleaner import CleanResult, LogCleaner, cleanable_logs
from odradek.log.errors import KafkaStorageError
from odradek.log.log import PartitionLog, log_dir_name, parse_log_dir_name
from odradek.topic_config import LogConfig

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DELETE_DIR_SUFFIX = "-delete"
ROLL_FLUSH_CHECK_MS = 1000  # how often rolled segments are flushed (Kafka: at each roll)

# The node-level settings the manager reads (broker config or the storage node's own),
# with their catalog definitions; their defaults are the catalog's.
_SETTINGS: dict[str, ConfigDef] = {
    name: BROKER_CONFIGS[name] if name in BROKER_CONFIGS else STORAGE_CONFIGS[name]
    for name in (
        "log.retention.check.interval.ms",
        "log.flush.scheduler.interval.ms",
        "log.flush.offset.checkpoint.interval.ms",
        "log.flush.start.offset.checkpoint.interval.ms",
        "log.cleaner.backoff.ms",
        "log.cleaner.enable",
        "log.cleaner.dedupe.buffer.size",
        "producer.id.expiration.ms",
    )
}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    """Owns the log directories of a node and every partition log in them."""

    def __init__(
        self,
        log_dirs: list[Path],
        node_id: int,
        cluster_id: str,
        broker_defaults: Mapping[str, object] | None = None,
        *,
        topic_configs: Mapping[str, Mapping[str, object]] | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log directory is required")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.broker_defaults: dict[str, object] = dict(broker_defaults or {})
        self.clock_ms = clock_ms
        self._topic_overrides: dict[str, dict[str, object]] = {
            t: dict(c) for t, c in (topic_configs or {}).items()
        }
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._locks: list[DirLock] = []
        self._dirs_to_delete: list[Path] = []
        self._mutex = threading.Lock()
        self._jobs_idle = threading.Condition()
        self._running_jobs = 0
        self._cleaner = LogCleaner(self._ms("log.cleaner.dedupe.buffer.size"))
        self._shut_down = False
        try:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
                self._locks.append(DirLock(d))
                MetaProperties.ensure(d, node_id, cluster_id)
            for d in self.log_dirs:
                self._load_dir(d)
        except BaseException:
            for log in self._logs.values():
                with contextlib.suppress(Exception):
                    log.close_handles()
            for lock in self._locks:
                lock.release()
            raise

    # -- settings -----------------------------------------------------------------------
    def _setting(self, name: str) -> object:
        default = _SETTINGS[name].default
        value = self.broker_defaults.get(name, default)
        if isinstance(default, bool):
            return value if isinstance(value, bool) else str(value).strip().lower() == "true"
        return int(str(value))

    def _ms(self, name: str) -> int:
        return int(str(self._setting(name)))

    def log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_topic_configs(
            self._topic_overrides.get(topic, {}), self.broker_defaults
        )

    # -- loading ------------------------------------------------------------------------
    def _load_dir(self, d: Path) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = self._read_checkpoint(
            d, RECOVERY_POINT_CHECKPOINT, "recovering every log from 0"
        )
        starts = self._read_checkpoint(
            d, LOG_START_OFFSET_CHECKPOINT, "using each log's first segment"
        )
        hws = self._read_checkpoint(
            d, REPLICATION_OFFSET_CHECKPOINT, "high watermarks start at the log start"
        )
        self._cleaner_offsets.update(
            self._read_checkpoint(d, CLEANER_OFFSET_CHECKPOINT, "compaction starts over")
        )
        expiration = self._ms("producer.id.expiration.ms")
        for name in sorted(os.listdir(d)):
            path = d / name
            if not path.is_dir():
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                self._dirs_to_delete.append(path)
                continue
            if name.endswith(("-future", "-stray")):
                continue
            tp = parse_log_dir_name(name)
            if tp is None:
                continue
            if tp in self._logs:
                raise KafkaStorageError(
                    f"Duplicate log directories for {tp[0]}-{tp[1]} are found in both "
                    f"{self._dir_of[tp]} and {d}"
                )
            log = PartitionLog.open(
                path,
                tp[0],
                tp[1],
                self.log_config(tp[0]),
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                clean_shutdown=clean,
                high_watermark=hws.get(tp),
                clock_ms=self.clock_ms,
                producer_id_expiration_ms=expiration,
            )
            self._logs[tp] = log
            self._dir_of[tp] = d
        if clean:
            marker.unlink()
            fsync_dir(d)

    @staticmethod
    def _read_checkpoint(d: Path, name: str, fallback: str) -> dict[TopicPartition, int]:
        """A checkpoint's entries; a corrupt one is reported and ignored (as Kafka does)."""
        try:
            return OffsetCheckpointFile(d / name).read()
        except CheckpointError as exc:
            _log.warning("ignoring unreadable %s (%s): %s", d / name, exc, fallback)
            return {}

    # -- partitions ---------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        return list(self._logs.items())

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(list(self._logs))

    def _next_log_dir(self) -> Path:
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        return min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def create_log(
        self,
        topic: str,
        partition: int,
        topic_id: str | None = None,
        config: LogConfig | None = None,
        *,
        overrides: Mapping[str, object] | None = None,
    ) -> PartitionLog:
        """Get or create the log of a partition (Kafka's getOrCreateLog)."""
        with self._mutex:
            tp = (topic, partition)
            if overrides is not None:
                self._topic_overrides[topic] = dict(overrides)
            existing = self._logs.get(tp)
            if existing is not None:
                if topic_id is not None:
                    current = existing.topic_id
                    if current is not None and current != topic_id:
                        raise KafkaStorageError(
                            f"Tried to assign topic ID {topic_id} to log for {topic}-{partition}, "
                            f"but log already contained topic ID {current}"
                        )
                return existing
            d = self._next_log_dir()
            cfg = config if config is not None else self.log_config(topic)
            log = PartitionLog.open(
                d / log_dir_name(topic, partition),
                topic,
                partition,
                cfg,
                clock_ms=self.clock_ms,
                topic_id=topic_id,
                clean_shutdown=True,
                producer_id_expiration_ms=self._ms("producer.id.expiration.ms"),
            )
            self._logs[tp] = log
            self._dir_of[tp] = d
            return log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the partition's directory to ``...-delete``; files go asynchronously."""
        with self._mutex:
            tp = (topic, partition)
            log = self._logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
            self._cleaner_offsets.pop(tp, None)
        if log is None or d is None:
            return False
        log.close_handles()
        name = f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        if len(name) > 255:
            name = name[-255:]
        target = d / name
        os.replace(log.dir, target)
        fsync_dir(d)
        self._dirs_to_delete.append(target)
        return True

    def purge_deleted_logs(self) -> int:
        """Remove directories of deleted logs (Kafka's delete-logs task)."""
        with self._mutex:
            dirs, self._dirs_to_delete = self._dirs_to_delete, []
        for path in dirs:
            shutil.rmtree(path, ignore_errors=True)
        return len(dirs)

    def update_config(self, topic: str, config: LogConfig | Mapping[str, object]) -> None:
        """New topic configs (a LogConfig, or raw overrides) for every partition of ``topic``."""
        if isinstance(config, LogConfig):
            cfg = config
            self._topic_overrides[topic] = dict(config.overrides)
        else:
            self._topic_overrides[topic] = dict(config)
            cfg = self.log_config(topic)
        for (t, _p), log in self.logs():
            if t == topic:
                log.update_config(cfg)

    # -- periodic work ------------------------------------------------------------------
    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete segments beyond retention/log start; purge due ``.deleted`` files."""
        now = self.clock_ms() if now_ms is None else now_ms
        deleted = 0
        for tp, log in self.logs():
            if log.closed:
                continue
            try:
                deleted += log.delete_old_segments(now)
                log.purge_deleted(now)
                log.remove_expired_producers(now)
            except KafkaStorageError:
                if (tp in self._logs) and not log.closed:
                    raise
        self.purge_deleted_logs()
        return deleted

    def run_flush(self, now_ms: int | None = None) -> int:
        """Flush rolled segments (as Kafka does after each roll) and apply ``flush.ms``."""
        now = self.clock_ms() if now_ms is None else now_ms
        flushed = 0
        for _tp, log in self.logs():
            if log.closed:
                continue
            before = log.recovery_point
            log.flush_rolled_segments()
            log.maybe_flush_for_time(now)
            flushed += log.recovery_point != before
        return flushed

    def write_checkpoints(self) -> None:
        """Write every node-level offset checkpoint in every log directory."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.checkpoint_cleaner_offsets()

    def _by_dir(
        self, value: Callable[[PartitionLog], int]
    ) -> dict[Path, dict[TopicPartition, int]]:
        out: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for tp, log in self.logs():
            d = self._dir_of.get(tp)
            if d is not None:
                out[d][tp] = value(log)
        return out

    def checkpoint_recovery_points(self) -> None:
        for d, offsets in self._by_dir(lambda log: log.recovery_point).items():
            OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).write(offsets)

    def checkpoint_log_start_offsets(self) -> None:
        for d, offsets in self._by_dir(lambda log: log.log_start_offset).items():
            OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write(offsets)

    def checkpoint_high_watermarks(self) -> None:
        for d, offsets in self._by_dir(lambda log: log.high_watermark).items():
            OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).write(offsets)

    def checkpoint_cleaner_offsets(self) -> None:
        per_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for tp, offset in list(self._cleaner_offsets.items()):
            d = self._dir_of.get(tp)
            if d is not None:
                per_dir[d][tp] = offset
        for d, offsets in per_dir.items():
            OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).write(offsets)

    def cleaner_offset(self, topic: str, partition: int) -> int | None:
        return self._cleaner_offsets.get((topic, partition))

    def run_cleaner_once(self, now_ms: int | None = None) -> CleanResult | None:
        """Compact the dirtiest eligible log, then checkpoint its new clean offset."""
        if not self._setting("log.cleaner.enable"):
            return None
        now = self.clock_ms() if now_ms is None else now_ms
        candidates = cleanable_logs(self.logs(), self._cleaner_offsets, now)
        for cand in candidates:
            tp = (cand.log.topic, cand.log.partition)
            result = self._cleaner.clean(cand.log, self._cleaner_offsets.get(tp), now)
            if result.aborted:
                continue
            if tp in self._logs:
                self._cleaner_offsets[tp] = result.end_offset
                self.checkpoint_cleaner_offsets()
            return result
        return None

    def periodic_jobs(self) -> list[tuple[int, Callable[[], object]]]:
        """``(interval ms, job)`` for retention, flushes, checkpoints and the cleaner.

        The storage node runs each on its interval in a worker thread through
        :meth:`run_job` (see ``odradek.storage.log_maintenance``).
        """
        jobs: list[tuple[int, Callable[[], object]]] = [
            (self._ms("log.retention.check.interval.ms"), self.run_retention),
            (min(self._ms("log.flush.scheduler.interval.ms"), ROLL_FLUSH_CHECK_MS), self.run_flush),
            (ROLL_FLUSH_CHECK_MS, self.purge_deleted_files),
            (self._ms("log.flush.offset.checkpoint.interval.ms"), self._checkpoint_offsets_job),
            (
                self._ms("log.flush.start.offset.checkpoint.interval.ms"),
                self.checkpoint_log_start_offsets,
            ),
        ]
        if self._setting("log.cleaner.enable"):
            jobs.append((self._ms("log.cleaner.backoff.ms"), self.run_cleaner_once))
        return jobs

    @property
    def is_shut_down(self) -> bool:
        return self._shut_down

    def purge_deleted_files(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` segment files and deleted log directories that are due."""
        now = self.clock_ms() if now_ms is None else now_ms
        purged = 0
        for _tp, log in self.logs():
            if log.pending_deletes:
                purged += log.purge_deleted(now)
        return purged + self.purge_deleted_logs()

    def _checkpoint_offsets_job(self) -> None:
        self.checkpoint_recovery_points()
        self.checkpoint_high_watermarks()

    def run_job(self, job: Callable[[], object]) -> None:
        """Run one periodic job unless shut down; :meth:`shutdown` waits for running ones."""
        with self._jobs_idle:
            if self._shut_down:
                return
            self._running_jobs += 1
        try:
            job()
        finally:
            with self._jobs_idle:
                self._running_jobs -= 1
                self._jobs_idle.notify_all()

    # -- shutdown -----------------------------------------------------------------------
    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown marker.

        Waits for a periodic job still running in a worker thread to finish first.
        """
        with self._jobs_idle:
            if self._shut_down:
                return
            self._shut_down = True
            while self._running_jobs:
                self._jobs_idle.wait()
        try:
            for _tp, log in self.logs():
                log.close(flush=True)
            self.write_checkpoints()
            self.purge_deleted_logs()
            for d in self.log_dirs:
                atomic_write_text(d / CLEAN_SHUTDOWN_FILE, '{"version":0,"brokerEpoch":-1}')
        finally:
            for lock in self._locks:
                lock.release()
            self._locks = []

    def close_without_shutdown(self) -> None:
        """Release descriptors and locks as a crash would (tests of recovery)."""
        self._shut_down = True
        for _tp, log in self.logs():
            log.close_handles()
        for lock in self._locks:
            lock.release()
        self._locks = []
