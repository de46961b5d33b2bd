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

Several log directories (Kafka's JBOD): a new log goes to the online directory holding
the fewest logs, or to the one AlterReplicaLogDirs asked for (:meth:`set_preferred_dir`).
Moving a log between directories copies it into a *future* log,
``<topic>-<partition>.<uuid hex>-future`` in the destination, which the storage node
fills and then swaps in (:meth:`replace_current_with_future`): the current directory is
renamed ``-delete`` first, then the future one takes the partition's name. A crash
between the two renames leaves only the future log, which the next start promotes; a
crash earlier leaves both, and the move resumes.

A failed log directory (an I/O error in it, or one unusable at start) goes offline
alone, as Kafka's LogDirFailureChannel does: its logs are closed without flushing and
forgotten, nothing is written there again, :attr:`on_dir_failure` tells the storage
node (from whichever thread saw the error), and the node keeps serving from the
others. Only when every directory failed does the manager refuse to start.

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
from dataclasses import dataclass
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
FUTURE_DIR_SUFFIX = "-future"
ROLL_FLUSH_CHECK_MS = 1000  # how often rolled segments are flushed (Kafka: at each roll)


def _always() -> bool:
    return True


@dataclass(frozen=True)
class PeriodicJob:
    """A job the storage node runs every ``interval_ms`` (in a worker thread), if a
    cheap look at the logs, ``has_work``, says it would do anything."""

    interval_ms: int
    run: Callable[[], object]
    has_work: Callable[[], bool] = _always


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
        self.offline_dirs: set[Path] = set()
        # Logs the cleaner failed on (Kafka's uncleanable partitions); skipped until restart.
        self.uncleanable: set[TopicPartition] = set()
        self._futures: dict[TopicPartition, PartitionLog] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        # Called (from any thread) with (directory, reason) when a directory fails.
        self.on_dir_failure: Callable[[Path, str], None] | None = None
        try:
            for d in self.log_dirs:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                    self._locks.append(DirLock(d))
                    MetaProperties.ensure(d, node_id, cluster_id)
                except OSError as exc:  # a disk problem; a mismatched meta.properties is fatal
                    self._offline_at_start(d, exc)
            for d in self.log_dirs:
                if d in self.offline_dirs:
                    continue
                try:
                    self._load_dir(d)
                except (OSError, KafkaStorageError) as exc:
                    if isinstance(exc, KafkaStorageError) and "Duplicate log directories" in str(
                        exc
                    ):
                        raise
                    self._offline_at_start(d, exc)
            if len(self.offline_dirs) == len(self.log_dirs):
                raise KafkaStorageError(
                    "Shutdown broker because all log dirs in "
                    f"{', '.join(map(str, self.log_dirs))} have failed"
                )
            self._settle_futures()
        except BaseException:
            for log in [*self._logs.values(), *self._futures.values()]:
                with contextlib.suppress(Exception):
                    log.close_handles()
            for lock in self._locks:
                lock.release()
            raise

    def _offline_at_start(self, d: Path, exc: BaseException) -> None:
        _log.error("log directory %s is offline: %s", d, exc)
        self.offline_dirs.add(d)
        for tp in [tp for tp, where in self._dir_of.items() if where == d]:
            with contextlib.suppress(Exception):
                self._logs[tp].close_handles()
            del self._logs[tp]
            del self._dir_of[tp]
        for tp in [tp for tp, where in self._future_dir_of.items() if where == d]:
            with contextlib.suppress(Exception):
                self._futures[tp].close_handles()
            del self._futures[tp]
            del self._future_dir_of[tp]

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
            if name.endswith(FUTURE_DIR_SUFFIX):
                future_tp = parse_future_dir_name(name)
                if future_tp is not None:
                    self._futures[future_tp] = PartitionLog.open(
                        path,
                        future_tp[0],
                        future_tp[1],
                        self.log_config(future_tp[0]),
                        clean_shutdown=clean,
                        clock_ms=self.clock_ms,
                        producer_id_expiration_ms=expiration,
                    )
                    self._future_dir_of[future_tp] = d
                continue
            if name.endswith("-stray"):
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

    def _settle_futures(self) -> None:
        """After loading: a future log without a current one was being swapped in when the
        node stopped (promote it); one in the same directory as its current log is
        pointless (drop it)."""
        for tp, future in list(self._futures.items()):
            d = self._future_dir_of[tp]
            if tp not in self._logs:
                _log.info("%s-%d: finishing the move to %s interrupted by a restart", *tp, d)
                del self._futures[tp], self._future_dir_of[tp]
                future.close(flush=True)
                target = d / log_dir_name(*tp)
                os.replace(future.dir, target)
                fsync_dir(d)
                self._logs[tp] = PartitionLog.open(
                    target,
                    tp[0],
                    tp[1],
                    self.log_config(tp[0]),
                    clean_shutdown=True,
                    clock_ms=self.clock_ms,
                    producer_id_expiration_ms=self._ms("producer.id.expiration.ms"),
                )
                self._dir_of[tp] = d
            elif self._dir_of[tp] == d:
                del self._futures[tp], self._future_dir_of[tp]
                self._discard(future, d)

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

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _next_log_dir(self, tp: TopicPartition) -> Path:
        preferred = self._preferred_dirs.pop(tp, None)
        online = self.online_dirs()
        if preferred is not None and preferred in online:
            return preferred
        if not online:
            raise KafkaStorageError(f"No online log directory to create {tp[0]}-{tp[1]} in")
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        return min(online, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def configured_dir(self, path: str) -> Path | None:
        """The log directory named by ``path`` (absolute, as AlterReplicaLogDirs gives it)."""
        for d in self.log_dirs:
            if str(d) == path or str(d) == path.rstrip("/"):
                return d
        return None

    def set_preferred_dir(self, topic: str, partition: int, d: Path) -> None:
        """Create this partition's log in ``d`` when it is created here (Kafka's
        maybeUpdatePreferredLogDir, used by kafka-reassign-partitions.sh ``log_dirs``)."""
        self._preferred_dirs[(topic, partition)] = d

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
            d = self._next_log_dir(tp)
            cfg = config if config is not None else self.log_config(topic)
            try:
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
            except OSError as exc:
                failure: OSError | None = exc
            else:
                failure = None
                self._logs[tp] = log
                self._dir_of[tp] = d
        if failure is not None:
            self.mark_dir_offline(d, f"cannot create {topic}-{partition}: {failure}")
            raise KafkaStorageError(
                f"Error while creating log for {topic}-{partition} in dir {d}"
            ) from failure
        return log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the partition's directory to ``...-delete``; files go asynchronously."""
        with self._mutex:
            tp = (topic, partition)
            log = self._logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
            self._cleaner_offsets.pop(tp, None)
            self.uncleanable.discard(tp)
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

    def _discard(self, log: PartitionLog, d: Path) -> None:
        """Rename a log's directory ``-delete`` (removed later) after closing its files."""
        log.close_handles()
        name = f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        if len(name) > 255:
            name = name[-255:]
        target = d / name
        os.replace(log.dir, target)
        fsync_dir(d)
        with self._mutex:
            self._dirs_to_delete.append(target)

    # -- future logs (AlterReplicaLogDirs) ----------------------------------------------
    def future_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._futures.get((topic, partition))

    def future_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._future_dir_of.get((topic, partition))

    def futures(self) -> list[tuple[TopicPartition, PartitionLog]]:
        return list(self._futures.items())

    def create_future_log(
        self,
        topic: str,
        partition: int,
        d: Path,
        topic_id: str | None = None,
        config: LogConfig | None = None,
    ) -> PartitionLog:
        """An empty future log for ``topic-partition`` in directory ``d``."""
        tp = (topic, partition)
        if d in self.offline_dirs:
            raise KafkaStorageError(f"Log directory {d} is offline")
        name = f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
        log = PartitionLog.open(
            d / name,
            topic,
            partition,
            config if config is not None else self.log_config(topic),
            clock_ms=self.clock_ms,
            topic_id=topic_id,
            clean_shutdown=True,
            producer_id_expiration_ms=self._ms("producer.id.expiration.ms"),
        )
        with self._mutex:
            self._futures[tp] = log
            self._future_dir_of[tp] = d
        return log

    def abort_future_log(self, topic: str, partition: int) -> bool:
        """Drop a future log (the move was cancelled or the replica went away)."""
        with self._mutex:
            tp = (topic, partition)
            log = self._futures.pop(tp, None)
            d = self._future_dir_of.pop(tp, None)
        if log is None or d is None:
            return False
        if d in self.offline_dirs:
            log.close_handles()
        else:
            self._discard(log, d)
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Swap a caught-up future log in for the current one; returns the new current log.

        The caller guarantees nothing appends to either log meanwhile. The future takes
        over the current log's high watermark and leader epochs (an epoch with no batch
        of its own exists only in the current log's cache).
        """
        tp = (topic, partition)
        with self._mutex:
            future = self._futures.pop(tp)
            d = self._future_dir_of.pop(tp)
            current = self._logs[tp]
            old_dir = self._dir_of[tp]
        hw, start = current.high_watermark, current.log_start_offset
        future.leader_epoch_cache.clear()
        future.leader_epoch_cache.assign_many(current.leader_epoch_cache.entries())
        future.close(flush=True)
        self._discard(current, old_dir)
        target = d / log_dir_name(topic, partition)
        os.replace(future.dir, target)
        fsync_dir(d)
        log = PartitionLog.open(
            target,
            topic,
            partition,
            current.config,
            recovery_point=future.log_end_offset,
            log_start_offset=start,
            clock_ms=self.clock_ms,
            clean_shutdown=True,
            high_watermark=hw,
            producer_id_expiration_ms=self._ms("producer.id.expiration.ms"),
        )
        with self._mutex:
            self._logs[tp] = log
            self._dir_of[tp] = d
        return log

    # -- failed directories -------------------------------------------------------------
    def mark_dir_offline(self, d: Path, reason: str) -> list[TopicPartition]:
        """Take directory ``d`` offline after an I/O error; returns the logs it held.

        Thread-safe and idempotent; :attr:`on_dir_failure` is told once.
        """
        with self._mutex:
            if d in self.offline_dirs or d not in self.log_dirs:
                return []
            self.offline_dirs.add(d)
            lost = [tp for tp, where in self._dir_of.items() if where == d]
            logs = [self._logs.pop(tp) for tp in lost]
            for tp in lost:
                del self._dir_of[tp]
                self._cleaner_offsets.pop(tp, None)
            futures = [tp for tp, where in self._future_dir_of.items() if where == d]
            logs += [self._futures.pop(tp) for tp in futures]
            for tp in futures:
                del self._future_dir_of[tp]
            self._dirs_to_delete = [p for p in self._dirs_to_delete if p.parent != d]
        _log.error(
            "log directory %s failed (%s): %d partition log(s) offline", d, reason, len(lost)
        )
        for log in logs:
            with contextlib.suppress(Exception):
                log.close_handles()
        callback = self.on_dir_failure
        if callback is not None:
            callback(d, reason)
        return lost

    def io_failure(self, tp: TopicPartition, exc: BaseException) -> None:
        """An I/O error on ``tp``'s log: its directory fails."""
        d = self._dir_of.get(tp) or self._future_dir_of.get(tp)
        if d is not None:
            self.mark_dir_offline(d, f"{type(exc).__name__}: {exc}")

    def dir_usage(self, d: Path) -> tuple[int, int]:
        """(total, usable) bytes of the volume holding ``d``; (-1, -1) when unknown."""
        try:
            st = os.statvfs(d)
        except OSError:
            return -1, -1
        return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize

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
            except OSError as exc:
                if (tp in self._logs) and not log.closed:
                    self.io_failure(tp, exc)
            except KafkaStorageError:
                if (tp in self._logs) and not log.closed:
                    raise
        self.purge_deleted_logs()
        return deleted

    def run_flush(self, now_ms: int | None = None) -> int:
        """Flush rolled segments (as Kafka does after each roll) and apply ``flush.ms``."""
        now = self.clock_ms() if now_ms is None else now_ms
        flushed = 0
        for tp, log in self.logs():
            if log.closed:
                continue
            before = log.recovery_point
            try:
                log.flush_rolled_segments()
                log.maybe_flush_for_time(now)
            except OSError as exc:
                if tp in self._logs and not log.closed:
                    self.io_failure(tp, exc)
                continue
            flushed += log.recovery_point != before
        return flushed

    def _write_checkpoint(self, d: Path, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        if d in self.offline_dirs:
            return
        try:
            OffsetCheckpointFile(d / name).write(offsets)
        except OSError as exc:
            self.mark_dir_offline(d, f"cannot write {name}: {exc}")

    def write_checkpoints(self) -> None:
        """Write every node-level offset checkpoint in every log directory."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.checkpoint_cleaner_offsets()

    def _by_dir(
        self, value: Callable[[PartitionLog], int]
    ) -> dict[Path, dict[TopicPartition, int]]:
        out: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.online_dirs()}
        for tp, log in self.logs():
            d = self._dir_of.get(tp)
            if d is not None and d in out:
                out[d][tp] = value(log)
        return out

    def checkpoint_recovery_points(self) -> None:
        for d, offsets in self._by_dir(lambda log: log.recovery_point).items():
            self._write_checkpoint(d, RECOVERY_POINT_CHECKPOINT, offsets)

    def checkpoint_log_start_offsets(self) -> None:
        for d, offsets in self._by_dir(lambda log: log.log_start_offset).items():
            self._write_checkpoint(d, LOG_START_OFFSET_CHECKPOINT, offsets)

    def checkpoint_high_watermarks(self) -> None:
        for d, offsets in self._by_dir(lambda log: log.high_watermark).items():
            self._write_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT, offsets)

    def checkpoint_cleaner_offsets(self) -> None:
        per_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.online_dirs()}
        for tp, offset in list(self._cleaner_offsets.items()):
            d = self._dir_of.get(tp)
            if d is not None and d in per_dir:
                per_dir[d][tp] = offset
        for d, offsets in per_dir.items():
            self._write_checkpoint(d, CLEANER_OFFSET_CHECKPOINT, offsets)

    def cleaner_offset(self, topic: str, partition: int) -> int | None:
        return self._cleaner_offsets.get((topic, partition))

    def run_cleaner_once(self, now_ms: int | None = None) -> CleanResult | None:
        """Compact the dirtiest eligible log, then checkpoint its new clean offset."""
        if not self._setting("log.cleaner.enable"):
            return None
        now = self.clock_ms() if now_ms is None else now_ms
        logs = [(tp, log) for tp, log in self.logs() if tp not in self.uncleanable]
        candidates = cleanable_logs(logs, self._cleaner_offsets, now)
        for cand in candidates:
            tp = (cand.log.topic, cand.log.partition)
            try:
                result = self._cleaner.clean(cand.log, self._cleaner_offsets.get(tp), now)
            except OSError as exc:  # the disk failed: its directory goes offline
                if tp in self._logs and not cand.log.closed:
                    self.io_failure(tp, exc)
                continue
            except Exception:
                # Kafka's LogCleanerManager.markPartitionUncleanable: a log the cleaner
                # cannot read is set aside so the others (__consumer_offsets) keep compacting.
                _log.exception("cleaner failed on %s-%d; marking it uncleanable", *tp)
                self.uncleanable.add(tp)
                continue
            if result.aborted:
                continue
            if tp in self._logs:
                self._cleaner_offsets[tp] = result.end_offset
                self.checkpoint_cleaner_offsets()
            return result
        return None

    def periodic_jobs(self) -> list[PeriodicJob]:
        """The periodic jobs: retention, flushes, checkpoints and the cleaner.

        The storage node runs each on its interval in a worker thread through
        :meth:`run_job` (see ``odradek.storage.log_maintenance``), when its ``has_work``
        says so: the two once-a-second jobs would otherwise wake a worker thread and
        the loop twice a second on an idle node (docs/data-link.md, "Idle CPU").
        """
        jobs = [
            PeriodicJob(self._ms("log.retention.check.interval.ms"), self.run_retention),
            PeriodicJob(
                min(self._ms("log.flush.scheduler.interval.ms"), ROLL_FLUSH_CHECK_MS),
                self.run_flush,
                self.flush_due,
            ),
            PeriodicJob(ROLL_FLUSH_CHECK_MS, self.purge_deleted_files, self.purge_due),
            PeriodicJob(
                self._ms("log.flush.offset.checkpoint.interval.ms"), self._checkpoint_offsets_job
            ),
            PeriodicJob(
                self._ms("log.flush.start.offset.checkpoint.interval.ms"),
                self.checkpoint_log_start_offsets,
            ),
        ]
        if self._setting("log.cleaner.enable"):
            jobs.append(PeriodicJob(self._ms("log.cleaner.backoff.ms"), self.run_cleaner_once))
        return jobs

    def flush_due(self) -> bool:
        """Whether :meth:`run_flush` has anything to flush now (no I/O)."""
        now = self.clock_ms()
        return any(not log.closed and log.flush_due(now) for _tp, log in self.logs())

    def purge_due(self) -> bool:
        """Whether :meth:`purge_deleted_files` has files or directories waiting (no I/O)."""
        return bool(self._dirs_to_delete) or any(log.pending_deletes for _tp, log in self.logs())

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
            for tp, log in [*self.logs(), *self.futures()]:
                try:
                    log.close(flush=True)
                except OSError as exc:
                    self.io_failure(tp, exc)
            self.write_checkpoints()
            self.purge_deleted_logs()
            for d in self.online_dirs():
                try:
                    atomic_write_text(d / CLEAN_SHUTDOWN_FILE, '{"version":0,"brokerEpoch":-1}')
                except OSError as exc:
                    _log.error("cannot mark %s cleanly shut down: %s", d, exc)
        finally:
            for lock in self._locks:
                lock.release()
            self._locks = []

    def close_without_shutdown(self) -> None:
        """Release descriptors and locks as a crash would (tests of recovery)."""
        self._shut_down = True
        for _tp, log in [*self.logs(), *self.futures()]:
            log.close_handles()
        for lock in self._locks:
            lock.release()
        self._locks = []


def parse_future_dir_name(name: str) -> TopicPartition | None:
    """``<topic>-<partition>.<uuid hex>-future`` -> (topic, partition)."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    base, dot, unique = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or not unique:
        return None
    return parse_log_dir_name(base)
