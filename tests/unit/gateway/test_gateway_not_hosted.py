"""A partition the gateway's metadata has but its leader's storage node does not host
(a new topic whose leader has not applied its leadership yet, a replica just moved):
the node says UNKNOWN_TOPIC_OR_PARTITION, and the gateway answers what a Kafka broker
answers then, NOT_LEADER_OR_FOLLOWER (``ReplicaManager.getPartitionOrError``), for
Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords alike, so clients
refresh metadata and retry instead of taking the topic for missing.

A real storage node (the launcher's, no gateway) and an in-process gateway whose
metadata, read from the real controller, gains one topic led by that node.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from gateway_testkit import call, offline_gateway
from helpers.batches import producer_batch
from helpers.wire import fetch_request

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    DeleteRecordsRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc
from odradek.tools.launcher import STORAGE_BASE_ID, Cluster

GHOST = f"ghost-{uuid.uuid4().hex[:8]}"
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.fixture(scope="module")
def storage_only(module_cluster_factory: Callable[..., Cluster]) -> Cluster:
    return module_cluster_factory(gateways=0, with_groups=False, console=False)


async def _metadata_with_ghost(cluster: Cluster) -> common_pb2.ClusterMetadata:
    async with grpc.aio.insecure_channel(cluster.controller_address.split(",")[0]) as ch:
        md: common_pb2.ClusterMetadata = await controller_pb2_grpc.ControllerStub(ch).GetMetadata(
            controller_pb2.GetMetadataRequest(), timeout=10
        )
    md.topics.append(
        common_pb2.Topic(
            name=GHOST,
            topic_id=uuid.uuid4().bytes,
            partitions=[
                common_pb2.Partition(
                    partition=0,
                    replicas=[STORAGE_BASE_ID],
                    isr=[STORAGE_BASE_ID],
                    leader=STORAGE_BASE_ID,
                    leader_epoch=0,
                )
            ],
        )
    )
    return md


def _produce() -> Any:
    T = ProduceRequest.TopicProduceData
    batch = bytes(producer_batch([(int(time.time() * 1000), b"k", b"v")]))
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[T(name=GHOST, partition_data=[T.PartitionProduceData(index=0, records=batch)])],
    )


async def test_every_partition_api_answers_not_leader(storage_only: Cluster) -> None:
    async with offline_gateway(await _metadata_with_ghost(storage_only)) as gw:
        produced = await call(gw, ApiKey.PRODUCE, 8, _produce())
        assert produced.responses[0].partition_responses[0].error_code == NOT_LEADER

        fetched = await call(gw, ApiKey.FETCH, 11, fetch_request(GHOST, 0))
        assert fetched.responses[0].partitions[0].error_code == NOT_LEADER

        LT = ListOffsetsRequest.ListOffsetsTopic
        listed = await call(
            gw,
            ApiKey.LIST_OFFSETS,
            5,
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    LT(
                        name=GHOST,
                        partitions=[
                            LT.ListOffsetsPartition(
                                partition_index=0, current_leader_epoch=-1, timestamp=-1
                            )
                        ],
                    )
                ],
            ),
        )
        assert listed.topics[0].partitions[0].error_code == NOT_LEADER

        OT = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        epochs = await call(
            gw,
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            4,
            OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=[
                    OT(
                        topic=GHOST,
                        partitions=[
                            OT.OffsetForLeaderPartition(
                                partition=0, current_leader_epoch=-1, leader_epoch=0
                            )
                        ],
                    )
                ],
            ),
        )
        assert epochs.topics[0].partitions[0].error_code == NOT_LEADER

        DT = DeleteRecordsRequest.DeleteRecordsTopic
        deleted = await call(
            gw,
            ApiKey.DELETE_RECORDS,
            2,
            DeleteRecordsRequest(
                topics=[
                    DT(
                        name=GHOST,
                        partitions=[DT.DeleteRecordsPartition(partition_index=0, offset=0)],
                    )
                ],
                timeout_ms=5000,
            ),
        )
        assert deleted.topics[0].partitions[0].error_code == NOT_LEADER
