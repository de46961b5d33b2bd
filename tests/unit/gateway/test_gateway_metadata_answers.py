"""The Metadata handler's per-snapshot topic answers (odradek.gateway.apis.metadata):
built once per metadata snapshot and broker set, so a client pipelining all-topics
Metadata requests does not make the loop rebuild them each time, and never stale
after the metadata changes."""

from __future__ import annotations

import pytest
from gateway_testkit import call, offline_gateway

from odradek.gateway import gateway as gateway_module
from odradek.gateway import shared_answers
from odradek.gateway.apis import metadata as metadata_api
from odradek.gateway.connection import ConnectionContext
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    Message,
    MetadataRequest,
    encode_response,
)
from odradek.rpc.v1 import common_pb2


def _cluster(version: int, leader: int) -> common_pb2.ClusterMetadata:
    online = common_pb2.ONLINE
    return common_pb2.ClusterMetadata(
        version=version,
        cluster_id="Zq3sS1o8RkGx7YH0c2bVYA",
        nodes=[
            common_pb2.Node(
                node_id=0, kind=common_pb2.GATEWAY, host="127.0.0.1", kafka_port=9092, state=online
            ),
            common_pb2.Node(node_id=100, kind=common_pb2.STORAGE, host="127.0.0.1", state=online),
            common_pb2.Node(node_id=101, kind=common_pb2.STORAGE, host="127.0.0.1", state=online),
        ],
        topics=[
            common_pb2.Topic(
                name="orders",
                topic_id=bytes(range(16)),
                partitions=[
                    common_pb2.Partition(
                        partition=0, replicas=[100, 101], isr=[100, 101], leader=leader
                    )
                ],
            )
        ],
    )


def _all_topics() -> MetadataRequest:
    return MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


async def test_topic_answers_are_reused_within_a_snapshot_and_rebuilt_after_it() -> None:
    async with offline_gateway(_cluster(1, leader=100)) as gw:
        snap = gw.metadata.current
        brokers = gw.brokers(None)
        topic = snap.topics["orders"]
        first = metadata_api._topic_answer(snap, brokers, topic, None)
        assert metadata_api._topic_answer(snap, brokers, topic, None) is first
        answer = await call(gw, ApiKey.METADATA, 12, _all_topics())
        assert [p.leader_id for p in answer.topics[0].partitions] == [100]

        await gw.metadata.update(_cluster(2, leader=101))
        answer = await call(gw, ApiKey.METADATA, 12, _all_topics())
        assert [p.leader_id for p in answer.topics[0].partitions] == [101]
        snap = gw.metadata.current
        again = metadata_api._topic_answer(snap, gw.brokers(None), snap.topics["orders"], None)
        assert again is not first
        assert [p.leader_id for p in again.partitions] == [101]


async def test_the_all_topics_answer_is_encoded_once_per_version_and_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pipelined all-topics requests cost one encoding per API version and snapshot
    (shared_answers.py); the bytes are the generic encoder's, and never stale."""
    encoded: list[int] = []
    real = shared_answers.encode_body

    def counting(message: Message, version: int) -> bytes:
        encoded.append(version)
        return real(message, version)

    monkeypatch.setattr(shared_answers, "encode_body", counting)
    async with offline_gateway(_cluster(1, leader=100)) as gw:
        for _ in range(3):
            answer = await call(gw, ApiKey.METADATA, 12, _all_topics())
            assert [p.leader_id for p in answer.topics[0].partitions] == [100]
        await call(gw, ApiKey.METADATA, 9, _all_topics())
        assert encoded == [12, 9]
        listener = ConnectionContext(1, "test").listener  # what call() connects on
        shared = metadata_api._all_topics_answer(gw.metadata.current, gw.brokers(listener))
        for version in (1, 9, 12):
            header = RequestHeader(ApiKey.METADATA, version, 5, "c")
            assert shared_answers.frame(header, shared) == encode_response(header, shared)
        assert encoded == [12, 9, 1]

        await gw.metadata.update(_cluster(2, leader=101))
        answer = await call(gw, ApiKey.METADATA, 12, _all_topics())
        assert [p.leader_id for p in answer.topics[0].partitions] == [101]
        assert encoded == [12, 9, 1, 12]


async def test_the_same_all_topics_request_is_answered_by_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repeated all-topics request (issue 14's never-read clients pipeline them) is
    neither decoded nor handled again while its answer stands; after a metadata change,
    and for other requests (named topics), it is handled as before."""
    decoded: list[int] = []
    real = gateway_module.decode_request

    def counting(header: RequestHeader, body: memoryview) -> Message:
        decoded.append(header.api_key)
        return real(header, body)

    monkeypatch.setattr(gateway_module, "decode_request", counting)
    async with offline_gateway(_cluster(1, leader=100)) as gw:
        for _ in range(3):
            answer = await call(gw, ApiKey.METADATA, 12, _all_topics())
            assert [p.leader_id for p in answer.topics[0].partitions] == [100]
        assert decoded == [ApiKey.METADATA]  # the first one only
        await call(gw, ApiKey.METADATA, 11, _all_topics())  # another version: its own bytes
        assert len(decoded) == 2

        await gw.metadata.update(_cluster(2, leader=101))
        answer = await call(gw, ApiKey.METADATA, 12, _all_topics())
        assert [p.leader_id for p in answer.topics[0].partitions] == [101]
        assert len(decoded) == 3

        named = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="nope", topic_id=None)],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        answer = await call(gw, ApiKey.METADATA, 12, named)
        assert [t.name for t in answer.topics] == ["nope"]
        assert answer.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
