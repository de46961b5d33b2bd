"""DescribeLogDirs (key 35), versions 1-5 (Kafka 4 dropped v0).

Kafka asks this of each broker about its own log directories. A connection on a
broker port (``ctx.broker_id``, docs/brokers.md) asks that storage node; the bootstrap
listener answers for the whole cluster, every online storage node's directories in
one list. Per directory: its absolute path, KAFKA_STORAGE_ERROR when it failed (no
partitions then), the volume's total and usable bytes (v4+), and each partition
replica in it with its size, offset lag (current log: high watermark minus log end,
never negative; future log: how far it trails the current one) and whether it is the
future log of an AlterReplicaLogDirs move. Null topics lists every partition; an
empty list none. v5's IsCordoned is always false (no cordoning, KIP-1066).

A storage node that cannot be asked: on its broker port the answer carries
BROKER_NOT_AVAILABLE at the top level (v3+; older versions list no directories);
on the bootstrap listener it is left out.
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
from odradek.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from odradek.rpc.v1 import common_pb2, storage_pb2

API_KEY = ApiKey.DESCRIBE_LOG_DIRS

log = logging.getLogger(__name__)

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = Result.DescribeLogDirsTopic
PartitionResult = TopicResult.DescribeLogDirsPartition


def storage_nodes(gw: GatewayApi, ctx: ConnectionContext) -> list[int]:
    """The storage nodes a broker-scoped request addresses (all of them on bootstrap)."""
    if ctx.broker_id is not None:
        return [ctx.broker_id]
    return [n.node_id for n in gw.metadata.current.nodes_of(common_pb2.STORAGE)]


def _result(d: storage_pb2.LogDirDescription) -> Result:
    topics: dict[str, list[PartitionResult]] = defaultdict(list)
    for r in d.replicas:
        topics[r.topic].append(
            PartitionResult(
                partition_index=r.partition,
                partition_size=r.size_bytes,
                offset_lag=r.offset_lag,
                is_future_key=r.is_future,
            )
        )
    return Result(
        error_code=d.error_code,
        log_dir=d.path,
        topics=[TopicResult(name=name, partitions=parts) for name, parts in topics.items()],
        total_bytes=d.total_bytes,
        usable_bytes=d.usable_bytes,
        is_cordoned=False,
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not gw.authorizer.cluster(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    if request.topics is None:
        query = storage_pb2.DescribeLogDirsRequest(all_partitions=True)
    else:
        query = storage_pb2.DescribeLogDirsRequest(
            partitions=[
                common_pb2.TopicPartition(topic=t.topic, partition=p)
                for t in request.topics
                for p in t.partitions
            ]
        )
    timeout = max(1.0, gw.request_timeout_ms / 1000.0)

    async def ask(node_id: int) -> storage_pb2.DescribeLogDirsResponse | None:
        try:
            return await gw.storage.stub(node_id).DescribeLogDirs(query, timeout=timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("DescribeLogDirs: storage node %d did not answer: %s", node_id, exc)
            return None

    nodes = storage_nodes(gw, ctx)
    answers = await asyncio.gather(*(ask(n) for n in nodes))
    error = 0
    results: list[Result] = []
    for answer in answers:
        if answer is None:
            if ctx.broker_id is not None:
                error = int(ErrorCode.BROKER_NOT_AVAILABLE)
            continue
        results.extend(_result(d) for d in answer.dirs)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=error, results=results)
