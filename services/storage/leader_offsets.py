"""ListOffsets, DeleteRecords and OffsetForLeaderEpoch on the leader.

ListOffsets (Kafka's Partition.fetchOffsetForTimestamp): -1 latest is the high
watermark (the LSO under READ_COMMITTED) with the current leader epoch; -2 earliest
(and -4 earliest local) is the log start offset; -3 is the record with the largest
timestamp; a timestamp >= 0 finds the first offset whose timestamp is >= it. Lookups
only answer offsets below the high watermark (-1/-1 when nothing qualifies), and a
new leader whose high watermark still lags its epoch's start answers
OFFSET_NOT_AVAILABLE instead of a too-small "latest".

DeleteRecords moves the log start offset (offset -1 means the high watermark; above
it -> OFFSET_OUT_OF_RANGE) and answers once every live replica has followed (the low
watermark), or REQUEST_TIMED_OUT.

OffsetForLeaderEpoch answers ``(largest epoch <= requested, its end offset)`` from the
leader's epoch cache, which is how a follower finds where to truncate.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.protocol.errors import ErrorCode, KafkaError, error_code_for
from odradek.protocol.fetch_request import READ_COMMITTED
from odradek.rpc.v1 import storage_pb2
from odradek.storage.notify import subscribed, wait_until
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def _code(exc: BaseException, what: str) -> int:
    code = error_code_for(exc)
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        log.exception("%s failed", what)
    return int(code)


class LeaderOffsetsHandler:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    # -- ListOffsets --------------------------------------------------------------------
    def list_offsets(
        self, request: storage_pb2.ListOffsetsRequest
    ) -> storage_pb2.ListOffsetsResponse:
        results = []
        for lp in request.partitions:
            result = storage_pb2.ListOffsetsPartitionResult(
                topic=lp.topic, partition=lp.partition, timestamp=-1, offset=-1, leader_epoch=-1
            )
            results.append(result)
            part = self.replicas.get(lp.topic, lp.partition)
            if part is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                self._list_one(part, lp, request.isolation_level, result)
            except Exception as exc:
                result.error_code = _code(exc, f"ListOffsets {part.name}")
                result.offset = -1
                result.timestamp = -1
        return storage_pb2.ListOffsetsResponse(partitions=results)

    def _list_one(
        self,
        part: Partition,
        lp: storage_pb2.ListOffsetsPartition,
        isolation_level: int,
        result: storage_pb2.ListOffsetsPartitionResult,
    ) -> None:
        part.check_leader(lp.current_leader_epoch)
        fetchable = (
            part.last_stable_offset if isolation_level == READ_COMMITTED else part.high_watermark
        )
        lagging = part.leader_epoch_start_offset > part.high_watermark
        target = lp.timestamp
        if target == LATEST:
            if lagging:
                raise KafkaError(
                    ErrorCode.OFFSET_NOT_AVAILABLE,
                    f"Failed to fetch offsets for {part.name}: the high watermark "
                    f"{part.high_watermark} is behind the leader epoch start offset "
                    f"{part.leader_epoch_start_offset}",
                )
            result.offset = fetchable
            result.leader_epoch = part.leader_epoch
            return
        if target in (EARLIEST, EARLIEST_LOCAL):
            start = part.log_start_offset
            result.offset = start
            result.leader_epoch = part.epoch_for_offset(start)
            return
        if target == LATEST_TIERED:
            return  # no tiered storage: nothing was ever uploaded
        if target == MAX_TIMESTAMP:
            found = part.max_timestamp_offset()
        elif target >= 0:
            found = part.offset_for_timestamp(target)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown special timestamp {target}")
        if found is not None and found[0] < fetchable:
            result.offset, result.timestamp, result.leader_epoch = found
        elif lagging:
            raise KafkaError(
                ErrorCode.OFFSET_NOT_AVAILABLE, f"High watermark of {part.name} is lagging"
            )

    # -- DeleteRecords ------------------------------------------------------------------
    async def delete_records(
        self, request: storage_pb2.DeleteRecordsRequest
    ) -> storage_pb2.DeleteRecordsResponse:
        results = []
        waiting: list[tuple[storage_pb2.DeleteRecordsPartitionResult, Partition, int]] = []
        for dp in request.partitions:
            result = storage_pb2.DeleteRecordsPartitionResult(
                topic=dp.topic, partition=dp.partition, low_watermark=-1
            )
            results.append(result)
            part = self.replicas.get(dp.topic, dp.partition)
            if part is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                required = part.high_watermark if dp.offset == -1 else dp.offset
                part.delete_records_before(dp.offset)
            except Exception as exc:
                result.error_code = _code(exc, f"DeleteRecords {part.name}")
                continue
            waiting.append((result, part, required))
        if waiting:
            await self._await_low_watermark(waiting, request.timeout_ms)
        return storage_pb2.DeleteRecordsResponse(partitions=results)

    async def _await_low_watermark(
        self,
        waiting: list[tuple[storage_pb2.DeleteRecordsPartitionResult, Partition, int]],
        timeout_ms: int,
    ) -> None:
        deadline = asyncio.get_running_loop().time() + max(0, timeout_ms) / 1000.0
        event = asyncio.Event()
        notifiers = {id(p): p.followers_changed for _, p, _ in waiting}.values()
        with subscribed(event, notifiers):
            while True:
                event.clear()
                still = []
                for entry in waiting:
                    result, part, required = entry
                    if not part.is_leader:
                        result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                        continue
                    low = part.low_watermark()
                    if low >= required:
                        result.low_watermark = low
                    else:
                        still.append(entry)
                waiting = still
                if not waiting:
                    return
                if not await wait_until(event, deadline):
                    break
        for result, part, _required in waiting:
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
            result.low_watermark = part.low_watermark()

    # -- OffsetForLeaderEpoch -------------------------------------------------------------
    def offset_for_leader_epoch(
        self, request: storage_pb2.OffsetForLeaderEpochRequest
    ) -> storage_pb2.OffsetForLeaderEpochResponse:
        results = []
        for op in request.partitions:
            result = storage_pb2.OffsetForLeaderEpochPartitionResult(
                topic=op.topic, partition=op.partition, leader_epoch=-1, end_offset=-1
            )
            results.append(result)
            part = self.replicas.get(op.topic, op.partition)
            if part is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                part.check_leader(op.current_leader_epoch)
                result.leader_epoch, result.end_offset = part.end_offset_for_epoch(op.leader_epoch)
            except Exception as exc:
                result.error_code = _code(exc, f"OffsetForLeaderEpoch {part.name}")
        return storage_pb2.OffsetForLeaderEpochResponse(partitions=results)
