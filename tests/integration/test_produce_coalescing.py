"""Produce requests pipelined on one connection and coalesced by the gateway
(odradek.gateway.produce_lane): hundreds of one-batch-per-partition requests of an
idempotent producer, sent in one write, over three partitions led by different
storage nodes, with a corrupt batch, an unknown partition and a stretch of acks=1
requests in the middle. Every request gets its own answer, in order, with the
results of its own batches; the batch after the corrupt one on the same partition is
refused as out of order (its sequence no longer follows), never appended; the logs
hold exactly the accepted records in the order sent; and the storage nodes served
the requests in far fewer calls than there were requests (the coalescing itself).
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable

import pytest
from helpers.batches import producer_batch
from helpers.wire import WireClient, connect, recv_frame

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    InitProducerIdRequest,
    ProduceRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version
from odradek.tools.launcher import Cluster

REQUESTS = 300
PARTITIONS = 3
CORRUPT = 150  # this request's first batch has a bad CRC
UNKNOWN = 120  # this request also names partition 99
ACKS_ONE = range(200, 210)  # these ask for acks=1
VERSION = 9


def _storage_produce_calls(cluster: Cluster) -> float:
    total = 0.0
    for svc in cluster.services:
        if svc.spec.kind != "storage":
            continue
        url = f"http://127.0.0.1:{svc.ports['metrics']}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        found = re.search(r"^odradek_storage_produce_requests_total (\S+)$", text, re.M)
        total += float(found.group(1)) if found else 0.0
    return total


def _partitions_of(i: int) -> tuple[int, int]:
    return i % PARTITIONS, (i + 1) % PARTITIONS


@pytest.mark.timeout(300)
def test_pipelined_requests_are_coalesced_and_answered_each_on_its_own(
    cluster_factory: Callable[..., Cluster], unique_topic: str
) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = cluster_factory(storage_nodes=3, replication_factor=3)
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(unique_topic, PARTITIONS, 3)])[unique_topic].result(60)
    with WireClient(bootstrap) as c:
        init = c.request(
            ApiKey.INIT_PRODUCER_ID,
            1,
            InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
            ),
        )
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch

    sequences = [0] * PARTITIONS
    frames = []
    for i in range(REQUESTS):
        data = ProduceRequest.TopicProduceData
        entries = []
        for n, p in enumerate(_partitions_of(i)):
            now = int(time.time() * 1000)
            records = producer_batch(
                [(now, None, b"%d-%d" % (i, p))],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=sequences[p],
            )
            sequences[p] += 1  # the client's view: it sent it, whatever the answer
            if i == CORRUPT and n == 0:
                records[-1] ^= 0xFF  # the CRC no longer matches
            entries.append(data.PartitionProduceData(index=p, records=bytes(records)))
        if i == UNKNOWN:
            one = bytes(producer_batch([(int(time.time() * 1000), None, b"lost")]))
            entries.append(data.PartitionProduceData(index=99, records=one))
        request = ProduceRequest(
            transactional_id=None,
            acks=1 if i in ACKS_ONE else -1,
            timeout_ms=30_000,
            topic_data=[data(name=unique_topic, partition_data=entries)],
        )
        frames.append(encode_request(0, VERSION, i + 1, "coalescing", request))

    calls_before = _storage_produce_calls(cluster)
    answers: list[dict[int, tuple[int, int]]] = []
    with connect(cluster, timeout=120) as s:
        s.sendall(b"".join(frames))
        for i in range(REQUESTS):
            frame = recv_frame(s)
            got, at = parse_response_header(frame, response_header_version(0, VERSION))
            assert got == i + 1  # answers in request order
            response = decode_response(0, VERSION, memoryview(frame)[at:])
            (topic,) = response.responses  # type: ignore[attr-defined]
            answers.append(
                {r.index: (r.error_code, r.base_offset) for r in topic.partition_responses}
            )
    calls = _storage_produce_calls(cluster) - calls_before

    bad = _partitions_of(CORRUPT)[0]
    expected_next = [0] * PARTITIONS
    accepted: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i, answer in enumerate(answers):
        wanted = set(_partitions_of(i)) | ({99} if i == UNKNOWN else set())
        assert set(answer) == wanted, (i, answer)
        if i == UNKNOWN:
            assert answer[99][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for p in _partitions_of(i):
            code, offset = answer[p]
            if i == CORRUPT and p == bad:
                assert code == ErrorCode.CORRUPT_MESSAGE, (i, p, code)
            elif i > CORRUPT and p == bad:
                # Its sequence follows the refused batch: out of order, never appended.
                assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, (i, p, code)
            else:
                assert code == ErrorCode.NONE, (i, p, code)
                assert offset == expected_next[p], (i, p, offset)
                expected_next[p] += 1
                accepted[p].append(b"%d-%d" % (i, p))
    assert len(accepted[bad]) < len(accepted[(bad + 1) % PARTITIONS])
    # Without coalescing every request is at least one storage call.
    assert calls < REQUESTS / 2, calls

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique_topic, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(unique_topic, p, 0) for p in range(PARTITIONS)])
    logs: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    want = sum(len(v) for v in accepted.values())
    deadline = time.monotonic() + 60
    while sum(len(v) for v in logs.values()) < want and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            logs[m.partition()].append(m.value())
    consumer.close()
    assert logs == accepted  # exactly the accepted records, in the order sent
