"""Moving replicas between this node's log directories (Kafka's ReplicaAlterLogDirsThread).

AlterReplicaLogDirs asks for a replica to live in another directory. The node then
keeps a *future* log there (:meth:`odradek.log.manager.LogManager.create_future_log`)
and one task copies into it, like a follower whose leader is the current log: whole
batches, read from the current log and appended with their offsets and leader epochs,
at most ``replica.alter.log.dirs.io.max.bytes.per.second``. The future log follows the
current one's log start offset, and after a truncation of the current log (the replica
is a follower whose leader changed) it truncates where their leader epochs agree
(:mod:`odradek.storage.truncation`), as a follower would.

Once the future log has reached the current log's end, the two are swapped in one
step on the event loop (nothing can append in between): the future log takes the
partition's name and the current one is deleted
(:meth:`~odradek.log.manager.LogManager.replace_current_with_future`). A move survives
a restart (the future log is reloaded and copying resumes); asking for the current
directory cancels a move; a replica that leaves this node takes its future log along.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from odradek.log.log import PartitionLog
from odradek.log.manager import LogManager
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import kafka_uuid
from odradek.storage.replication_quota import ReplicationQuota
from odradek.storage.truncation import truncation_state

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


@dataclass(eq=False)
class Move:
    partition: Partition
    future: PartitionLog
    truncations: int = field(default=-1)

    @property
    def key(self) -> tuple[str, int]:
        return (self.partition.topic, self.partition.index)


class LogDirMover:
    def __init__(
        self, log_manager: LogManager, quota: ReplicationQuota, *, chunk_bytes: int = CHUNK_BYTES
    ) -> None:
        self.log_manager = log_manager
        self.quota = quota
        self.chunk_bytes = chunk_bytes
        self.moves: dict[tuple[str, int], Move] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    # -- requests (on the event loop) ---------------------------------------------------
    def request(self, part: Partition, destination: Path) -> None:
        """Move ``part``'s log to ``destination`` (a configured, online directory)."""
        key = (part.topic, part.index)
        current_dir = self.log_manager.dir_of(*key)
        future_dir = self.log_manager.future_dir_of(*key)
        if future_dir == destination:
            return
        if future_dir is not None:
            self.cancel(part)
        if current_dir == destination:
            return
        future = self.log_manager.create_future_log(
            part.topic,
            part.index,
            destination,
            kafka_uuid(part.topic_id) if part.topic_id else None,
            part.config,
        )
        log.info("%s: moving from %s to %s", part.name, current_dir, destination)
        self._add(part, future)

    def resume(self, part: Partition) -> None:
        """A replica opened with a future log left from before a restart."""
        future = self.log_manager.future_log(part.topic, part.index)
        if future is not None and (part.topic, part.index) not in self.moves:
            log.info("%s: resuming the move to %s", part.name, future.dir.parent)
            self._add(part, future)

    def cancel(self, part: Partition) -> None:
        self.moves.pop((part.topic, part.index), None)
        self.log_manager.abort_future_log(part.topic, part.index)

    def forget_dir(self, d: Path) -> None:
        """Directory ``d`` failed: moves into it are gone with it."""
        for key, move in list(self.moves.items()):
            if move.future.dir.parent == d or move.partition.offline:
                del self.moves[key]

    def _add(self, part: Partition, future: PartitionLog) -> None:
        self.moves[(part.topic, part.index)] = Move(part, future)
        self._wakeup.set()

    # -- the copy task ------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="log-dir-mover")

    async def stop(self) -> None:
        self._stopped = True
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, 5.0)

    async def _run(self) -> None:
        while not self._stopped:
            if not self.moves:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if self.quota.exceeded():
                await asyncio.sleep(min(max(self.quota.delay(), 0.005), 1.0))
                continue
            copied = 0
            for move in list(self.moves.values()):
                if self.moves.get(move.key) is not move:
                    continue
                try:
                    copied += self.step(move)
                except Exception as exc:
                    log.warning("%s: moving the log failed: %s", move.partition.name, exc)
                    self.moves.pop(move.key, None)
                    if isinstance(exc, OSError):  # the destination directory failed
                        self.log_manager.mark_dir_offline(move.future.dir.parent, str(exc))
                    else:
                        self.log_manager.abort_future_log(*move.key)
                if self.quota.exceeded():
                    break
            if copied:
                await asyncio.sleep(0)  # let requests in between chunks
            else:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), 0.05)

    def step(self, move: Move) -> int:
        """Copy one chunk into ``move``'s future log, swapping it in once caught up.

        Returns the bytes copied. Synchronous: runs between other coroutines.
        """
        part = move.partition
        if part.offline:
            self.moves.pop(move.key, None)
            return 0
        current, future = part.log, move.future
        if current.truncations != move.truncations:
            move.truncations = current.truncations
            self._align(current, future)
        if future.log_end_offset > current.log_end_offset:
            future.truncate_to(current.log_end_offset)
        if future.log_end_offset < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        future.high_watermark = min(current.high_watermark, future.log_end_offset)
        if future.log_start_offset < current.log_start_offset <= future.high_watermark:
            future.delete_records_before(current.log_start_offset)
        copied = 0
        if future.log_end_offset < current.log_end_offset:
            # through the partition: a read error fails the current log's directory
            records = part.read(
                future.log_end_offset, self.chunk_bytes, max_offset=None, min_one_message=True
            )
            if records:
                future.append_as_follower(records)
                copied = len(records)
                self.quota.record(copied)
        if (
            future.log_end_offset == current.log_end_offset
            and future.log_start_offset == current.log_start_offset
        ):
            self._swap(move)
        return copied

    @staticmethod
    def _align(current: PartitionLog, future: PartitionLog) -> None:
        """The current log was truncated: cut the future one where their epochs agree."""
        for _ in range(64):
            epoch = future.leader_epoch_cache.latest_epoch
            if epoch is None:
                return
            leader_epoch, end = current.end_offset_for_epoch(epoch)
            decision = truncation_state(
                leader_epoch, end, future.end_offset_for_epoch, future.log_end_offset
            )
            future.truncate_to(decision.offset)
            if decision.completed:
                return

    def _swap(self, move: Move) -> None:
        part = move.partition
        del self.moves[move.key]
        new = self.log_manager.replace_current_with_future(part.topic, part.index)
        part.replace_log(new)
        log.info("%s: now in %s", part.name, new.dir.parent)

    # -- for DescribeLogDirs ------------------------------------------------------------
    def future_lag(self, key: tuple[str, int]) -> int | None:
        move = self.moves.get(key)
        if move is None:
            return None
        return move.partition.log_end_offset - move.future.log_end_offset
