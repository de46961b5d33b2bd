"""Produce on the leader: append, then answer per ``acks``.

Per partition (Kafka's ReplicaManager.appendRecords + DelayedProduce):

* not hosted -> UNKNOWN_TOPIC_OR_PARTITION; hosted but not leading ->
  NOT_LEADER_OR_FOLLOWER with our leader epoch as a hint (KIP-951);
* ``acks=-1`` with an ISR smaller than ``min.insync.replicas`` -> NOT_ENOUGH_REPLICAS
  before anything is appended;
* the log validates (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE above
  ``max.message.bytes``, INVALID_TIMESTAMP), checks the idempotent producer's
  sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH) and answers a
  retried duplicate with its original offsets without appending;
* ``acks`` 0 and 1 answer after the leader's append; ``acks=-1`` waits until the
  high watermark passes the batch's last offset (a duplicate waits for its original
  offsets too), then answers NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR meanwhile
  fell below ``min.insync.replicas``, NOT_LEADER_OR_FOLLOWER if leadership moved, and
  REQUEST_TIMED_OUT when ``timeout_ms`` passes first.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.protocol.errors import ErrorCode, KafkaError, error_code_for
from odradek.rpc.v1 import storage_pb2
from odradek.storage.metrics import StorageMetrics
from odradek.storage.notify import subscribed, wait_until
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class ProduceHandler:
    def __init__(self, replicas: ReplicaManager, metrics: StorageMetrics) -> None:
        self.replicas = replicas
        self.metrics = metrics

    async def produce(self, request: storage_pb2.ProduceRequest) -> storage_pb2.ProduceResponse:
        self.metrics.produce_request()
        acks = request.acks
        results: list[storage_pb2.ProducePartitionResult] = []
        waiting: list[tuple[storage_pb2.ProducePartitionResult, Partition, int, int]] = []
        for pp in request.partitions:
            result = storage_pb2.ProducePartitionResult(
                topic=pp.topic,
                partition=pp.partition,
                base_offset=-1,
                log_append_time=-1,
                log_start_offset=-1,
                current_leader_epoch=-1,
            )
            results.append(result)
            if acks not in (-1, 0, 1):
                result.error_code = ErrorCode.INVALID_REQUIRED_ACKS
                result.error_message = f"Invalid required acks {acks}"
                continue
            part = self.replicas.get(pp.topic, pp.partition)
            if part is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"This server does not host {pp.topic}-{pp.partition}"
                continue
            try:
                appended = part.append_as_leader(bytearray(pp.records), acks)
            except Exception as exc:
                code = error_code_for(exc)
                result.error_code = code
                result.error_message = getattr(exc, "message", None) or str(exc)
                if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                    log.exception("%s: append failed", part.name)
                if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    result.current_leader_epoch = part.leader_epoch
                result.log_start_offset = part.log_start_offset
                continue
            result.base_offset = appended.first_offset
            result.log_append_time = appended.log_append_time
            result.log_start_offset = appended.log_start_offset
            if not appended.duplicate:
                self.metrics.bytes_in(part.topic, appended.size)
            if acks == -1:
                waiting.append((result, part, appended.last_offset + 1, appended.leader_epoch))
        if waiting:
            await self._await_replication(waiting, request.timeout_ms)
        return storage_pb2.ProduceResponse(partitions=results)

    async def _await_replication(
        self,
        waiting: list[tuple[storage_pb2.ProducePartitionResult, Partition, int, int]],
        timeout_ms: int,
    ) -> None:
        deadline = asyncio.get_running_loop().time() + max(0, timeout_ms) / 1000.0
        event = asyncio.Event()
        with subscribed(event, {id(w[1]): w[1].hw_changed for w in waiting}.values()):
            while True:
                event.clear()
                still = []
                for entry in waiting:
                    result, part, required, epoch = entry
                    done, error = part.replication_status(required, epoch)
                    if not done:
                        still.append(entry)
                    elif error != ErrorCode.NONE:
                        _fail(result, part, error)
                waiting = still
                if not waiting:
                    return
                if not await wait_until(event, deadline):
                    break
        for result, part, _required, _epoch in waiting:
            _fail(result, part, ErrorCode.REQUEST_TIMED_OUT)


def _fail(result: storage_pb2.ProducePartitionResult, part: Partition, code: ErrorCode) -> None:
    result.error_code = code
    if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        result.error_message = (
            f"The size of the current ISR {list(part.isr)} is insufficient to satisfy the "
            f"min.isr requirement of {part.min_insync_replicas} for partition {part.name}"
        )
    elif code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        result.error_message = f"Leadership of {part.name} moved before the write was replicated"
        result.current_leader_epoch = part.leader_epoch
    elif code == ErrorCode.REQUEST_TIMED_OUT:
        result.error_message = (
            f"The write to {part.name} was not replicated to the ISR {list(part.isr)} in time"
        )
    else:
        result.error_message = KafkaError(code).message
