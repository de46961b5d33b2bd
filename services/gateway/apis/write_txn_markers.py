"""WriteTxnMarkers (key 27), version 1 (KIP-664's abort of hanging transactions).

Kafka's transaction coordinator sends this broker to broker; Odradek's sends its
markers over internal gRPC (``Storage.WriteTxnMarkers``). Clients send it too:
``Admin.abortTransaction`` (``kafka-transactions.sh abort``) writes an ABORT marker
to one partition for a producer whose transaction no coordinator will finish (a
hanging transaction, found with DescribeProducers). So the gateway serves it: each
marker's partitions are grouped by leading storage node and handed to those leaders,
which append the control batch with the checks of Kafka's ``ProducerStateManager``
(the producer epoch, a coordinator epoch not older than the partition's last
marker's) and answer once the high watermark passed it (acks=all).

Deviations: Kafka requires CLUSTER_ACTION on the cluster; Odradek has no ACLs, so
anyone may write markers. Version 2 (``TransactionVersion``, transactions v2,
KIP-890 part 2) is not advertised. An unknown partition is
UNKNOWN_TOPIC_OR_PARTITION; one without a leader, or whose leader cannot be reached,
NOT_LEADER_OR_FOLLOWER (admin clients refresh metadata and retry).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.leader_calls import failure_code
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from odradek.rpc.v1 import transactions_pb2

API_KEY = ApiKey.WRITE_TXN_MARKERS

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult

# (marker index, topic, partition) -> error code
Codes = dict[tuple[int, str, int], int]


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse:
    snap = gw.metadata.current
    codes: Codes = {}
    # leader -> marker index -> topic -> partitions
    by_node: dict[int, dict[int, dict[str, list[int]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for i, marker in enumerate(request.markers):
        for t in marker.topics:
            for index in t.partition_indexes:
                part = snap.partition(t.name, index)
                if part is None:
                    codes[(i, t.name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif part.leader < 0:
                    codes[(i, t.name, index)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    by_node[part.leader][i][t.name].append(index)
    await asyncio.gather(
        *(_write(gw, node, request, wanted, codes) for node, wanted in by_node.items())
    )
    return WriteTxnMarkersResponse(
        markers=[
            MarkerResult(
                producer_id=marker.producer_id,
                topics=[
                    TopicResult(
                        name=t.name,
                        partitions=[
                            PartitionResult(
                                partition_index=index,
                                error_code=codes.get(
                                    (i, t.name, index), ErrorCode.UNKNOWN_SERVER_ERROR
                                ),
                            )
                            for index in t.partition_indexes
                        ],
                    )
                    for t in marker.topics
                ],
            )
            for i, marker in enumerate(request.markers)
        ]
    )


async def _write(
    gw: GatewayApi,
    node: int,
    request: WriteTxnMarkersRequest,
    wanted: dict[int, dict[str, list[int]]],
    codes: Codes,
) -> None:
    """One storage leader's share: the markers in request order, only its partitions."""
    order = sorted(wanted)
    call = transactions_pb2.WriteTxnMarkersRequest(
        markers=[
            transactions_pb2.TxnMarker(
                producer_id=request.markers[i].producer_id,
                producer_epoch=request.markers[i].producer_epoch,
                committed=bool(request.markers[i].transaction_result),
                coordinator_epoch=request.markers[i].coordinator_epoch,
                topics=[
                    transactions_pb2.TxnTopicPartitions(topic=topic, partitions=parts)
                    for topic, parts in wanted[i].items()
                ],
            )
            for i in order
        ]
    )
    try:
        answer = await gw.storage.stub(node).WriteTxnMarkers(call, timeout=30.0)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        code = failure_code(exc, timed_out=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        for i in order:
            for topic, parts in wanted[i].items():
                for index in parts:
                    codes[(i, topic, index)] = code
        return
    for i, result in zip(order, answer.markers, strict=True):
        for p in result.partitions:
            codes[(i, p.topic, p.partition)] = p.error_code
