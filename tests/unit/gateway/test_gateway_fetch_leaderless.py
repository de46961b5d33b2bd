"""A Fetch of partitions without a leader the gateway could ask: a partition whose
leader is unknown (-1) gets NOT_LEADER_OR_FOLLOWER (the client refreshes metadata and
retries), a partition index the topic does not have and an unknown topic get
UNKNOWN_TOPIC_OR_PARTITION, each in the request's order, with no storage call. The
handler reads leaders from the snapshot's cached leader table (issue 18) and must
still tell the first two apart."""

from __future__ import annotations

from gateway_testkit import call, offline_gateway, one_partition_metadata

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import FetchRequest
from odradek.rpc.v1 import common_pb2


def _metadata() -> common_pb2.ClusterMetadata:
    return one_partition_metadata(
        [common_pb2.Partition(partition=i, replicas=[100], isr=[], leader=-1) for i in (0, 1)]
    )


def _fetch(partitions: dict[str, list[int]]) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic=topic,
                partitions=[
                    T.FetchPartition(
                        partition=i,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for i in indexes
                ],
            )
            for topic, indexes in partitions.items()
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


async def test_leaderless_missing_and_unknown_partitions() -> None:
    async with offline_gateway(_metadata()) as gw:
        for version in (4, 12):
            r = await call(gw, ApiKey.FETCH, version, _fetch({"orders": [1, 7, 0], "gone": [0]}))
            got = [
                (t.topic, p.partition_index, p.error_code)
                for t in r.responses
                for p in t.partitions
            ]
            assert got == [
                ("orders", 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                ("orders", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                ("orders", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                ("gone", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ]
