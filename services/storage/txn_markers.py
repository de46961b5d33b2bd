"""WriteTxnMarkers on the partition leaders (Kafka's KafkaApis.handleWriteTxnMarkersRequest).

The transaction coordinator sends, per transaction, the producer id/epoch, COMMIT or
ABORT, its coordinator epoch and the partitions. For each partition hosted here:

* not hosted -> UNKNOWN_TOPIC_OR_PARTITION (the coordinator takes it as deleted);
  hosted but not leading -> NOT_LEADER_OR_FOLLOWER (it re-resolves the leader);
* an ISR smaller than ``min.insync.replicas`` -> NOT_ENOUGH_REPLICAS, nothing appended;
* the leader appends one control batch (:mod:`odradek.records.control`: isControl and
  isTransactional, the producer's id and epoch, base sequence -1, one record with key
  ``(version 0, type 0 ABORT / 1 COMMIT)`` and value ``(version 0, coordinatorEpoch)``).
  The producer's state decides, as Kafka's ProducerAppendInfo.appendEndTxnMarker:
  a marker epoch older than the producer's current epoch on this partition ->
  INVALID_PRODUCER_EPOCH; a coordinator epoch older than the one that last wrote for
  the producer -> TRANSACTION_COORDINATOR_FENCED. A marker for a producer that wrote
  nothing here is appended too (Kafka does; it changes neither the LSO nor
  ``.txnindex``);
* the answer waits until the high watermark passed the marker (acks=all; Kafka's
  appendRecords with requiredAcks -1) for at most ``timeout_ms`` (0: the node's
  ``request.timeout.ms``): NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND,
  NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT.

Markers for ``__consumer_offsets`` partitions come through the offset store, which
calls this same RPC and then materialises or drops its pending transactional offsets.
"""

from __future__ import annotations

import logging

from odradek.protocol.errors import ErrorCode, error_code_for
from odradek.rpc.v1 import transactions_pb2
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.replication_wait import await_replication

log = logging.getLogger(__name__)


class TxnMarkersHandler:
    def __init__(self, replicas: ReplicaManager, *, default_timeout_ms: int) -> None:
        self.replicas = replicas
        self.default_timeout_ms = default_timeout_ms

    async def write_txn_markers(
        self, request: transactions_pb2.WriteTxnMarkersRequest
    ) -> transactions_pb2.WriteTxnMarkersResponse:
        results: list[transactions_pb2.TxnMarkerResult] = []
        waiting: list[tuple[Partition, int, int]] = []
        waiting_results: list[transactions_pb2.TxnPartitionError] = []
        for marker in request.markers:
            marker_result = transactions_pb2.TxnMarkerResult(producer_id=marker.producer_id)
            results.append(marker_result)
            for topic in marker.topics:
                for index in topic.partitions:
                    # add() returns the stored message (append would store a copy).
                    answer = marker_result.partitions.add(topic=topic.topic, partition=index)
                    part = self.replicas.get(topic.topic, index)
                    if part is None:
                        answer.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        continue
                    try:
                        appended = part.append_end_txn_marker(
                            producer_id=marker.producer_id,
                            producer_epoch=marker.producer_epoch,
                            coordinator_epoch=marker.coordinator_epoch,
                            committed=marker.committed,
                        )
                    except Exception as exc:
                        code = error_code_for(exc)
                        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                            log.exception("%s: marker append failed", part.name)
                        else:
                            log.info("%s: marker refused: %s", part.name, exc)
                        answer.error_code = code
                        continue
                    waiting.append((part, appended.last_offset + 1, appended.leader_epoch))
                    waiting_results.append(answer)
        if waiting:
            timeout_ms = request.timeout_ms if request.timeout_ms > 0 else self.default_timeout_ms
            codes = await await_replication(waiting, timeout_ms)
            for answer, code in zip(waiting_results, codes, strict=True):
                answer.error_code = code
        return transactions_pb2.WriteTxnMarkersResponse(markers=results)
