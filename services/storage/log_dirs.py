"""DescribeLogDirs and AlterReplicaLogDirs on the storage node (Kafka's ReplicaManager
``describeLogDirs`` / ``alterReplicaLogDirs``).

Describe: every configured directory with its path, KAFKA_STORAGE_ERROR when it failed
(then nothing else), the volume's total and usable bytes, and the asked-for partitions
whose current or future log lives there: size, offset lag (current log: high watermark
minus log end offset, never negative; future log: how far it trails the current one)
and whether it is a future log.

Alter, per partition, in Kafka's order of checks: LOG_DIR_NOT_FOUND (the path is not one
of ``log.dirs``), KAFKA_STORAGE_ERROR (that directory, or the replica's own, failed);
a partition not hosted here remembers the directory for when it is created here and
answers REPLICA_NOT_AVAILABLE (UNKNOWN_TOPIC_OR_PARTITION when the topic does not
exist); otherwise the move starts (:mod:`odradek.storage.log_dir_mover`), or is
cancelled when the destination is the current directory. Kafka creates no future log
while any directory is offline; neither do we (KAFKA_STORAGE_ERROR).
"""

from __future__ import annotations

from odradek.log.manager import LogManager
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import storage_pb2
from odradek.storage.log_dir_mover import LogDirMover
from odradek.storage.replica_manager import ReplicaManager


class LogDirsHandler:
    def __init__(
        self, replicas: ReplicaManager, log_manager: LogManager, mover: LogDirMover
    ) -> None:
        self.replicas = replicas
        self.log_manager = log_manager
        self.mover = mover

    def describe(
        self, request: storage_pb2.DescribeLogDirsRequest
    ) -> storage_pb2.DescribeLogDirsResponse:
        lm = self.log_manager
        wanted = (
            None
            if request.all_partitions
            else {(tp.topic, tp.partition) for tp in request.partitions}
        )
        out = storage_pb2.DescribeLogDirsResponse(node_id=self.replicas.node_id)
        for d in lm.log_dirs:
            if d in lm.offline_dirs:
                out.dirs.append(
                    storage_pb2.LogDirDescription(
                        path=str(d),
                        error_code=ErrorCode.KAFKA_STORAGE_ERROR,
                        total_bytes=-1,
                        usable_bytes=-1,
                    )
                )
                continue
            total, usable = lm.dir_usage(d)
            desc = storage_pb2.LogDirDescription(
                path=str(d), total_bytes=total, usable_bytes=usable
            )
            for tp, plog in sorted(lm.logs()):
                if lm.dir_of(*tp) != d or (wanted is not None and tp not in wanted):
                    continue
                desc.replicas.append(
                    storage_pb2.LogDirReplica(
                        topic=tp[0],
                        partition=tp[1],
                        size_bytes=plog.size_bytes,
                        offset_lag=max(plog.high_watermark - plog.log_end_offset, 0),
                    )
                )
            for tp, future in sorted(lm.futures()):
                if lm.future_dir_of(*tp) != d or (wanted is not None and tp not in wanted):
                    continue
                current = lm.get_log(*tp)
                lag = current.log_end_offset - future.log_end_offset if current else -1
                desc.replicas.append(
                    storage_pb2.LogDirReplica(
                        topic=tp[0],
                        partition=tp[1],
                        size_bytes=future.size_bytes,
                        offset_lag=lag,
                        is_future=True,
                    )
                )
            out.dirs.append(desc)
        return out

    def alter(
        self, request: storage_pb2.AlterReplicaLogDirsRequest
    ) -> storage_pb2.AlterReplicaLogDirsResponse:
        out = storage_pb2.AlterReplicaLogDirsResponse()
        for move in request.moves:
            out.results.append(
                storage_pb2.ReplicaLogDirResult(
                    topic=move.topic, partition=move.partition, error_code=self._alter(move)
                )
            )
        return out

    def _alter(self, move: storage_pb2.ReplicaLogDirMove) -> int:
        lm = self.log_manager
        d = lm.configured_dir(move.path)
        if d is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if d in lm.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        key = (move.topic, move.partition)
        if key in self.replicas.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        part = self.replicas.get(*key)
        if part is None:
            lm.set_preferred_dir(move.topic, move.partition, d)
            snapshot = self.replicas.snapshot
            if snapshot is None or snapshot.partition(*key) is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if part.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if lm.dir_of(*key) != d and lm.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            self.mover.request(part, d)
        except OSError:
            lm.mark_dir_offline(d, f"cannot create the future log of {part.name}")
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE
