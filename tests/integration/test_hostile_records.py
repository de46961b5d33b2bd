"""Hostile record batches through a real gateway and storage node (raw Produce v9).

Each batch has a valid CRC, so only record-level validation (Kafka's LogValidator)
catches it: the answer is Kafka's error code, with per-record ``record_errors`` where
Kafka gives them, and nothing of a rejected batch is ever fetched.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic
from helpers.batches import producer_batch
from helpers.waiting import wait_until
from helpers.wire import call, connect

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import ListOffsetsRequest, ProduceRequest
from odradek.records.batch import BatchView
from odradek.records.header import HEADER_STRUCT, LOG_OVERHEAD
from odradek.tools.launcher import Cluster

P = ProduceRequest.TopicProduceData


def _batch(keys: list[bytes | None], ts: int | None = None) -> bytearray:
    now = int(time.time() * 1000) if ts is None else ts
    return producer_batch((now, k, b"v%d" % i) for i, k in enumerate(keys))


def _forge(section: bytes, count: int, last_delta: int) -> bytes:
    now = int(time.time() * 1000)
    length = HEADER_STRUCT.size - LOG_OVERHEAD + len(section)
    buf = bytearray(
        HEADER_STRUCT.pack(0, length, -1, 2, 0, 0, last_delta, now, now, -1, -1, -1, count)
    )
    buf += section
    BatchView(buf).update_crc()
    return bytes(buf)


def _produce(cluster: Cluster, topic: str, records: bytes) -> object:
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])
        ],
    )
    retriable = (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    )

    def answer() -> object | None:
        with connect(cluster) as s:
            response = call(s, 0, 9, request)
        r = response.responses[0].partition_responses[0]  # type: ignore[attr-defined]
        return None if r.error_code in retriable else r  # a new topic's leader is on its way

    return wait_until(answer, f"produce to {topic}", timeout=60)


def _end_offset(cluster: Cluster, topic: str) -> int:
    """The partition's log end offset (ListOffsets v5, latest) once its leader answers."""
    T = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            T(
                name=topic,
                partitions=[
                    T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
                ],
            )
        ],
    )

    def answer() -> int | None:
        with connect(cluster) as s:
            r = call(s, 2, 5, request)
        (p,) = r.topics[0].partitions  # type: ignore[attr-defined]
        return None if p.error_code else int(p.offset) + 1  # +1: 0 is a valid answer

    return wait_until(answer, f"end offset of {topic}", timeout=60) - 1


def test_hostile_batches_are_refused_and_never_stored(cluster: Cluster, unique_topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    compacted = unique_topic + "-c"
    # The session cluster may be this module's first user: wait for its broker.
    wait_until(lambda: admin.list_topics(timeout=10).brokers, "a registered broker", timeout=90)
    futures = admin.create_topics(
        [
            NewTopic(unique_topic, 1, 1),
            NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact"}),
        ]
    )
    for f in futures.values():
        f.result(90)
    one = bytes(_batch([b"k"])[HEADER_STRUCT.size :])
    cases = {
        "count 5, one record": _forge(one, 5, 4),
        "lastOffsetDelta 2^31-1": _forge(one, 1, 2**31 - 1),
        "40 garbage bytes": _forge(bytes(range(7, 47)), 1, 0),
    }
    for what, records in cases.items():
        r = _produce(cluster, unique_topic, records)
        assert r.error_code == ErrorCode.INVALID_RECORD, what  # type: ignore[attr-defined]
    far = _produce(cluster, unique_topic, bytes(_batch([b"k"], ts=2**62)))
    assert far.error_code == ErrorCode.INVALID_TIMESTAMP  # type: ignore[attr-defined]
    assert [e.batch_index for e in far.record_errors] == [0]  # type: ignore[attr-defined]
    assert _end_offset(cluster, unique_topic) == 0
    ok = _produce(cluster, unique_topic, bytes(_batch([b"k"])))
    assert ok.error_code == 0 and ok.base_offset == 0  # type: ignore[attr-defined]

    r = _produce(cluster, compacted, bytes(_batch([b"a", None, b"b", None])))
    assert r.error_code == ErrorCode.INVALID_RECORD  # type: ignore[attr-defined]
    assert [e.batch_index for e in r.record_errors] == [1, 3]  # type: ignore[attr-defined]
    assert "Compacted topic cannot accept message without key" in (
        r.record_errors[0].batch_index_error_message  # type: ignore[attr-defined]
    )
    assert _end_offset(cluster, compacted) == 0
