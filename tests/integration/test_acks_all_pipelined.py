"""One-record acks=all Produce requests pipelined on one connection to a replication
factor 3 topic, which is what librdkafka sends at ``linger.ms=0`` (issue 18's latency
benchmark): every request is answered, in order, only once replicated, and the records
land in the order sent. The gateway passes a connection's Produce lane on as soon as a
request is written to the leader's data link, so this is where a reordering or a
lost wake-up of the acks=all waits would show.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from helpers.batches import producer_batch
from helpers.wire import connect, recv_frame

from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import ProduceRequest, decode_response, encode_request
from odradek.protocol.versions import response_header_version
from odradek.tools.launcher import Cluster

REQUESTS = 400


def _produce(topic: str, cid: int) -> bytes:
    records = bytes(producer_batch([(int(time.time() * 1000), None, b"%d" % cid)]))
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=records)])
        ],
    )
    return encode_request(0, 9, cid, "pipelined", request)


@pytest.mark.timeout(240)
def test_pipelined_one_record_acks_all_requests(
    cluster_factory: Callable[..., Cluster], unique_topic: str
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = cluster_factory(storage_nodes=3, replication_factor=3)
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(unique_topic, 1, 3)])[unique_topic].result(60)
    warm = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    warm.produce(unique_topic, b"0", partition=0)  # the leader and its ISR are up
    assert warm.flush(60) == 0

    with connect(cluster, timeout=120) as s:
        s.sendall(b"".join(_produce(unique_topic, cid) for cid in range(1, REQUESTS + 1)))
        offsets = []
        for cid in range(1, REQUESTS + 1):
            frame = recv_frame(s)
            got, at = parse_response_header(frame, response_header_version(0, 9))
            assert got == cid  # answers in request order
            response = decode_response(0, 9, memoryview(frame)[at:])
            part = response.responses[0].partition_responses[0]  # type: ignore[attr-defined]
            assert part.error_code == ErrorCode.NONE, (cid, part.error_code)
            offsets.append(part.base_offset)
    assert offsets == list(range(1, REQUESTS + 1))  # offset 0 is the warm-up record

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique_topic, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(unique_topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < REQUESTS + 1 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            values.append(m.value())
    consumer.close()
    assert values == [b"%d" % i for i in range(REQUESTS + 1)]  # acknowledged = readable
