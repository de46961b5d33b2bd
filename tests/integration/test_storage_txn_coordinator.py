"""The storage leader's KIP-890 verification against the real transaction coordinator
(``odradek.transactions``), over gRPC: a late produce after the coordinator aborted
cannot open a hanging transaction, and the LSO moves past the aborted data."""

from __future__ import annotations

import time

from txn_grpc import (
    add_partitions,
    committed_values,
    coordinator,
    create_topic,
    end_txn,
    fetch,
    init,
    leader,
    owner,
    storage,
    wait_state,
)

from odradek.protocol.errors import ErrorCode as E
from odradek.records.record import BatchBuilder
from odradek.rpc.v1 import storage_pb2
from odradek.tools.launcher import Cluster

READ_COMMITTED = 1


def produce(
    cluster: Cluster, txn: str, pid: int, seq: int, topic: str, value: bytes, *, api_version: int
) -> storage_pb2.ProducePartitionResult:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True
    )
    builder.append(int(time.time() * 1000), None, value)
    request = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        transactional_id=txn,
        api_version=api_version,
        partitions=[
            storage_pb2.ProducePartition(topic=topic, partition=0, records=builder.build())
        ],
    )
    response = storage(cluster, leader(cluster, topic, 0)).Produce(request, timeout=30)
    return response.partitions[0]


def test_late_produce_after_an_abort_cannot_hang(cluster: Cluster, unique_topic: str) -> None:
    topic, txn = unique_topic, f"late-{unique_topic}"
    create_topic(cluster, topic, 1)
    stub = coordinator(cluster, owner(cluster, txn)[0])
    pid = init(stub, txn).producer_id
    assert add_partitions(stub, txn, pid, 0, {topic: [0]}).partitions[0].error_code == E.NONE
    assert produce(cluster, txn, pid, 0, topic, b"in-txn", api_version=9).error_code == E.NONE
    assert end_txn(stub, txn, pid, 0, commit=False) == E.NONE
    wait_state(stub, txn, "CompleteAbort")

    # A retry of the producer's next batch arriving after the abort: the coordinator no
    # longer lists the partition, so nothing is appended and no transaction reopens.
    late = produce(cluster, txn, pid, 1, topic, b"late", api_version=9)
    assert late.error_code == E.INVALID_TXN_STATE, late
    late11 = produce(cluster, txn, pid, 1, topic, b"late", api_version=11)
    assert late11.error_code == E.TRANSACTION_ABORTABLE, late11
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        isolation_level=READ_COMMITTED,
        max_bytes=1 << 20,
        partitions=[
            storage_pb2.FetchPartition(
                topic=topic,
                partition=0,
                fetch_offset=0,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
            )
        ],
    )
    result = storage(cluster, leader(cluster, topic, 0)).Fetch(request, timeout=30).partitions[0]
    assert result.error_code == E.NONE
    assert result.last_stable_offset == result.high_watermark == 2  # data + ABORT marker
    batches, aborted = fetch(cluster, topic, 0, READ_COMMITTED)
    assert aborted == [(pid, 0)] and committed_values(batches, aborted) == []
