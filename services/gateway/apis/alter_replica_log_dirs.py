"""AlterReplicaLogDirs (key 34), versions 1-2.

Moves replicas between the log directories of the broker it is sent to: a connection
on a broker port (``ctx.broker_id``) asks that storage node. The node copies the
replica into a *future* log in the destination directory (DescribeLogDirs shows it
with ``is_future_key``), throttled by ``replica.alter.log.dirs.io.max.bytes.per.second``,
and swaps it in once it has caught up. Per-partition errors are Kafka's:
LOG_DIR_NOT_FOUND (the path is not one of the node's ``log.dirs``),
KAFKA_STORAGE_ERROR (that directory or the replica failed), REPLICA_NOT_AVAILABLE (the
node holds no replica of an existing partition yet; the directory is remembered for
when it gets one, which is how kafka-reassign-partitions.sh places new replicas), and
UNKNOWN_TOPIC_OR_PARTITION.

On the bootstrap listener (no broker named) the move is asked of every online storage
node holding a replica of the partition; a partition answers NONE when one of them
accepted it, else the first error. A storage node that cannot be asked answers
KAFKA_STORAGE_ERROR for its partitions.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from odradek.rpc.v1 import common_pb2, storage_pb2

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS

log = logging.getLogger(__name__)

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = TopicResult.AlterReplicaLogDirPartitionResult


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse:
    moves = [
        storage_pb2.ReplicaLogDirMove(topic=t.name, partition=p, path=d.path)
        for d in request.dirs
        for t in d.topics
        for p in t.partitions
    ]
    by_node: dict[int, list[storage_pb2.ReplicaLogDirMove]] = defaultdict(list)
    if not gw.authorizer.cluster(ctx, AclOperation.ALTER):
        refused: dict[str, list[PartitionResult]] = defaultdict(list)
        for move in moves:
            refused[move.topic].append(
                PartitionResult(
                    partition_index=move.partition,
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                )
            )
        return AlterReplicaLogDirsResponse(
            throttle_time_ms=0,
            results=[TopicResult(topic_name=n, partitions=ps) for n, ps in refused.items()],
        )
    if ctx.broker_id is not None:
        by_node[ctx.broker_id] = list(moves)
    else:
        snap = gw.metadata.current
        online = {n.node_id for n in snap.nodes_of(common_pb2.STORAGE)}
        for move in moves:
            part = snap.partition(move.topic, move.partition)
            for replica in part.replicas if part is not None else []:
                if replica in online:
                    by_node[replica].append(move)
    timeout = max(1.0, gw.request_timeout_ms / 1000.0)

    async def ask(node_id: int, batch: list[storage_pb2.ReplicaLogDirMove]) -> list[int]:
        try:
            answer = await gw.storage.stub(node_id).AlterReplicaLogDirs(
                storage_pb2.AlterReplicaLogDirsRequest(moves=batch), timeout=timeout
            )
            return [r.error_code for r in answer.results]
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("AlterReplicaLogDirs: storage node %d did not answer: %s", node_id, exc)
            return [int(ErrorCode.KAFKA_STORAGE_ERROR)] * len(batch)

    nodes = list(by_node)
    answers = await asyncio.gather(*(ask(n, by_node[n]) for n in nodes))
    codes: dict[tuple[str, int], int] = {}
    for node, node_codes in zip(nodes, answers, strict=True):
        for move, code in zip(by_node[node], node_codes, strict=True):
            key = (move.topic, move.partition)
            if key not in codes or code == 0:
                codes[key] = code
    topics: dict[str, list[PartitionResult]] = defaultdict(list)
    for move in moves:
        answered = codes.get((move.topic, move.partition))
        if answered is None:  # bootstrap listener, no online replica of it anywhere
            exists = gw.metadata.current.partition(move.topic, move.partition) is not None
            answered = int(
                ErrorCode.REPLICA_NOT_AVAILABLE if exists else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        topics[move.topic].append(
            PartitionResult(partition_index=move.partition, error_code=answered)
        )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[TopicResult(topic_name=name, partitions=parts) for name, parts in topics.items()],
    )
