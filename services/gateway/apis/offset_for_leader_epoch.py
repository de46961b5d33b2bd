"""OffsetForLeaderEpoch (key 23), versions 0-4.

For each partition, the end offset of the largest leader epoch at or below the one
asked for, from the storage node leading it (its leader-epoch cache); consumers use
it to detect log truncation after a leader change (KIP-320). Partitions are grouped
by leading storage node and asked in parallel; errors are per partition: unknown
partitions UNKNOWN_TOPIC_OR_PARTITION, no leader LEADER_NOT_AVAILABLE, an
unreachable storage node NOT_LEADER_OR_FOLLOWER (the client refreshes metadata and
retries), and FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH from the storage node's
check of ``current_leader_epoch`` (v2+).

v0 answers no ``leader_epoch``. ``replica_id`` (v3+) is not used: followers talk to
storage nodes directly, so every request here is a consumer's.
"""

from __future__ import annotations

from collections import defaultdict

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.leader_calls import call_leaders, leading
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from odradek.rpc.v1 import storage_pb2

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset

CONSUMER_REPLICA_ID = -1
STORAGE_TIMEOUT_S = 30.0


def _error(code: int) -> storage_pb2.OffsetForLeaderEpochPartitionResult:
    return storage_pb2.OffsetForLeaderEpochPartitionResult(
        error_code=code, leader_epoch=-1, end_offset=-1
    )


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse:
    version = header.api_version
    results: dict[tuple[str, int], storage_pb2.OffsetForLeaderEpochPartitionResult] = {}
    by_node: dict[int, list[storage_pb2.OffsetForLeaderEpochPartition]] = defaultdict(list)
    for t in request.topics:
        for p in t.partitions:
            part = leading(gw, ctx, AclOperation.DESCRIBE, t.topic, p.partition)
            if isinstance(part, ErrorCode):
                results[(t.topic, p.partition)] = _error(part)
            else:
                by_node[part.leader].append(
                    storage_pb2.OffsetForLeaderEpochPartition(
                        topic=t.topic,
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch if version >= 2 else -1,
                        leader_epoch=p.leader_epoch,
                    )
                )

    await call_leaders(
        gw,
        by_node,
        lambda stub, parts: stub.OffsetForLeaderEpoch(
            storage_pb2.OffsetForLeaderEpochRequest(
                replica_id=CONSUMER_REPLICA_ID, partitions=parts
            ),
            timeout=STORAGE_TIMEOUT_S,
        ),
        results,
        _error,
    )

    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            r = results.get((t.topic, p.partition)) or _error(ErrorCode.UNKNOWN_SERVER_ERROR)
            partitions.append(
                EpochEndOffset(
                    error_code=r.error_code,
                    partition=p.partition,
                    leader_epoch=r.leader_epoch if not r.error_code else -1,
                    end_offset=r.end_offset if not r.error_code else -1,
                )
            )
        topics.append(TopicResult(topic=t.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
