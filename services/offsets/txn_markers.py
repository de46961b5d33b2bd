"""Transaction markers in ``__consumer_offsets``: writing one through the storage
leader, and reading one back when a shard is replayed.

The transaction coordinator sends the markers for ``__consumer_offsets`` partitions to
the offset store owning the shard (docs/transactions-design.md, "Markers"), as Kafka
delegates them to its group coordinator (KafkaApis.handleWriteTxnMarkersRequest): the
store appends the marker with the partition's leader (``Storage.WriteTxnMarkers``,
acks=all, the coordinator epoch fences stale coordinators) and only then settles the
producer's pending offsets, so the cache never runs ahead of the log.
"""

from __future__ import annotations

import logging

import grpc

from odradek.group_shard import OFFSETS_TOPIC
from odradek.protocol.errors import ErrorCode
from odradek.records.control import ControlRecordType, parse_end_txn_marker
from odradek.records.errors import InvalidRecordError
from odradek.records.record import DecodedRecord
from odradek.rpc.v1 import transactions_pb2
from odradek.storage_client import StoragePool, StorageUnavailable

log = logging.getLogger(__name__)


async def write_marker(
    storage: StoragePool, partition: int, marker: transactions_pb2.TxnMarker, timeout_ms: int
) -> int:
    """Append ``marker`` to ``__consumer_offsets``-``partition``; 0 or Kafka's error
    (NOT_LEADER_OR_FOLLOWER when the leader is unknown or unreachable: retried)."""
    part = storage.metadata.current.partition(OFFSETS_TOPIC, partition)
    if part is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if part.leader < 0:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    request = transactions_pb2.WriteTxnMarkersRequest(
        timeout_ms=timeout_ms,
        markers=[
            transactions_pb2.TxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                committed=marker.committed,
                coordinator_epoch=marker.coordinator_epoch,
                topics=[
                    transactions_pb2.TxnTopicPartitions(topic=OFFSETS_TOPIC, partitions=[partition])
                ],
            )
        ],
    )
    try:
        response = await storage.stub(part.leader).WriteTxnMarkers(
            request, timeout=timeout_ms / 1000.0 + 5.0
        )
    except StorageUnavailable:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    except grpc.aio.AioRpcError as exc:
        log.debug("WriteTxnMarkers to storage node %d failed: %s", part.leader, exc.code())
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return ErrorCode.REQUEST_TIMED_OUT
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    for result in response.markers:
        for p in result.partitions:
            if p.topic == OFFSETS_TOPIC and p.partition == partition:
                return int(p.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def marker_commits(record: DecodedRecord) -> bool | None:
    """For a control record: True for a COMMIT marker, False for ABORT, None for any
    other control record (or one this code cannot read)."""
    try:
        marker = parse_end_txn_marker(record.key, record.value)
    except InvalidRecordError:
        return None
    return marker.control_type == ControlRecordType.COMMIT
