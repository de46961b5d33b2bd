"""The transaction coordinator and the storage nodes spoken to over their gRPC APIs,
for the coordinator's own integration tests (no gateway, no Kafka client in between):
find a transactional id's owner, call ``TransactionCoordinator`` until the cluster has
settled, write transactional batches to a partition leader and read them back with
either isolation level."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import grpc
from helpers.waiting import wait_until

from odradek.protocol.errors import ErrorCode as E
from odradek.records.record import BatchBuilder, DecodedBatch, decode_batches
from odradek.rpc.v1 import (
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
    transactions_pb2,
    transactions_pb2_grpc,
)
from odradek.tools.launcher import Cluster
from odradek.transaction_shard import transaction_coordinator_of, transaction_shard_of

T = TypeVar("T")
SETTLE_S = 60.0  # how long the cluster may take to settle after a start, kill or move
# What a client retries while shards load, move or finish the previous transaction.
SETTLING = {
    E.COORDINATOR_LOAD_IN_PROGRESS,
    E.NOT_COORDINATOR,
    E.COORDINATOR_NOT_AVAILABLE,
    E.CONCURRENT_TRANSACTIONS,
}


def metadata(cluster: Cluster) -> common_pb2.ClusterMetadata:
    with grpc.insecure_channel(cluster.controller_address.split(",")[0]) as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)
        return stub.GetMetadata(controller_pb2.GetMetadataRequest(), timeout=10)


def owner(cluster: Cluster, transactional_id: str) -> tuple[int, int]:
    """(owning transaction coordinator node id, shard epoch) once assigned."""

    def assigned() -> tuple[int, int] | None:
        md = metadata(cluster)
        found = transaction_coordinator_of(md, transaction_shard_of(md, transactional_id))
        return found if found[0] >= 0 else None

    return wait_until(assigned, f"an owner of {transactional_id}", timeout=SETTLE_S)


def coordinator(cluster: Cluster, node_id: int) -> transactions_pb2_grpc.TransactionCoordinatorStub:
    channel = grpc.insecure_channel(cluster.grpc_address(f"transactions-{node_id}"))
    return transactions_pb2_grpc.TransactionCoordinatorStub(channel)


def settled(call: Callable[[], T], error_of: Callable[[T], int], timeout: float = SETTLE_S) -> T:
    """``call()`` again while it answers a settling error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = call()
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
            continue
        if error_of(result) not in SETTLING or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def init(
    stub: transactions_pb2_grpc.TransactionCoordinatorStub,
    transactional_id: str,
    timeout_ms: int = 60_000,
) -> transactions_pb2.TxnInitProducerIdResponse:
    return settled(
        lambda: stub.InitProducerId(
            transactions_pb2.TxnInitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout_ms=timeout_ms,
                producer_id=-1,
                producer_epoch=-1,
            ),
            timeout=30,
        ),
        lambda r: r.error_code,
    )


def add_partitions(
    stub: transactions_pb2_grpc.TransactionCoordinatorStub,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    partitions: dict[str, list[int]],
    *,
    verify_only: bool = False,
) -> transactions_pb2.AddPartitionsTransactionResult:
    request = transactions_pb2.AddPartitionsToTxnRequest(
        transactions=[
            transactions_pb2.AddPartitionsTransaction(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=epoch,
                verify_only=verify_only,
                topics=[
                    transactions_pb2.TxnTopicPartitions(topic=t, partitions=p)
                    for t, p in partitions.items()
                ],
            )
        ]
    )

    def first_error(r: transactions_pb2.AddPartitionsToTxnResponse) -> int:
        errors = [p.error_code for p in r.results[0].partitions]
        return max(errors, key=lambda e: e in SETTLING) if errors else 0

    response = settled(lambda: stub.AddPartitionsToTxn(request, timeout=30), first_error)
    return response.results[0]


def end_txn(
    stub: transactions_pb2_grpc.TransactionCoordinatorStub,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    commit: bool,
    *,
    retry: bool = True,
) -> int:
    request = transactions_pb2.EndTxnRequest(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        committed=commit,
    )
    if not retry:
        return int(stub.EndTxn(request, timeout=30).error_code)
    return int(settled(lambda: stub.EndTxn(request, timeout=30), lambda r: r.error_code).error_code)


def describe(
    stub: transactions_pb2_grpc.TransactionCoordinatorStub, transactional_id: str
) -> transactions_pb2.TransactionDescription:
    response = settled(
        lambda: stub.DescribeTransactions(
            transactions_pb2.DescribeTransactionsRequest(transactional_ids=[transactional_id]),
            timeout=30,
        ),
        lambda r: r.transactions[0].error_code,
    )
    return response.transactions[0]


def wait_state(
    stub: transactions_pb2_grpc.TransactionCoordinatorStub,
    transactional_id: str,
    state: str,
    timeout: float = SETTLE_S,
) -> transactions_pb2.TransactionDescription:
    def reached() -> transactions_pb2.TransactionDescription | None:
        d = describe(stub, transactional_id)
        return d if d.transaction_state == state else None

    return wait_until(reached, f"{transactional_id} in {state}", timeout=timeout)


def create_topic(
    cluster: Cluster,
    name: str,
    partitions: int = 1,
    assignments: dict[int, list[int]] | None = None,
) -> None:
    topic = controller_pb2.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=-1
    )
    if assignments:
        topic.num_partitions = -1
        topic.assignments.extend(
            controller_pb2.ReplicaAssignment(partition=p, replicas=r)
            for p, r in assignments.items()
        )
    storage_nodes = sum(1 for s in cluster.services if s.spec.kind == "storage")
    wait_until(
        lambda: (
            sum(
                1
                for n in metadata(cluster).nodes
                if n.kind == common_pb2.STORAGE and n.state == common_pb2.ONLINE
            )
            == storage_nodes
        ),
        "every storage node online",
        timeout=SETTLE_S,
    )
    with grpc.insecure_channel(cluster.controller_address.split(",")[0]) as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)
        response = stub.CreateTopics(controller_pb2.CreateTopicsRequest(topics=[topic]), timeout=30)
    assert response.results[0].error_code == 0, response

    def led() -> bool:
        found = [t for t in metadata(cluster).topics if t.name == name]
        return bool(found) and all(p.leader >= 0 for p in found[0].partitions)

    wait_until(led, f"leaders of {name}", timeout=SETTLE_S)


def leader(cluster: Cluster, topic: str, partition: int) -> int:
    def known() -> int | None:
        for t in metadata(cluster).topics:
            if t.name == topic:
                p = t.partitions[partition]
                return p.leader if p.leader >= 0 else None
        return None

    return wait_until(known, f"a leader of {topic}-{partition}", timeout=SETTLE_S)


def storage(cluster: Cluster, node_id: int) -> storage_pb2_grpc.StorageStub:
    channel = grpc.insecure_channel(cluster.grpc_address(f"storage-{node_id}"))
    return storage_pb2_grpc.StorageStub(channel)


def produce_txn(
    cluster: Cluster,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    topic: str,
    partition: int,
    sequence: int,
    values: list[bytes],
) -> int:
    """A transactional batch to the partition leader (acks=all); its error code."""
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )
    for v in values:
        builder.append(int(time.time() * 1000), None, v)
    request = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        transactional_id=transactional_id,
        partitions=[
            storage_pb2.ProducePartition(topic=topic, partition=partition, records=builder.build())
        ],
    )
    response = storage(cluster, leader(cluster, topic, partition)).Produce(request, timeout=30)
    return int(response.partitions[0].error_code)


def fetch(
    cluster: Cluster, topic: str, partition: int, isolation: int
) -> tuple[list[DecodedBatch], list[tuple[int, int]]]:
    """Every batch the leader returns from offset 0, and the aborted transactions
    (producer id, first offset) it lists."""
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        partitions=[
            storage_pb2.FetchPartition(
                topic=topic,
                partition=partition,
                fetch_offset=0,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
                log_start_offset=-1,
                last_fetched_epoch=-1,
            )
        ],
    )
    response = storage(cluster, leader(cluster, topic, partition)).Fetch(request, timeout=30)
    result = response.partitions[0]
    assert result.error_code == 0, result
    batches = decode_batches(result.records) if result.records else []
    aborted = [(a.producer_id, a.first_offset) for a in result.aborted_transactions]
    return batches, aborted


def data_values(batches: list[DecodedBatch]) -> list[bytes]:
    return [r.value or b"" for b in batches if not b.is_control for r in b.records]


def committed_values(batches: list[DecodedBatch], aborted: list[tuple[int, int]]) -> list[bytes]:
    """What a read_committed consumer keeps (Kafka's ``CompletedFetch``): a producer's
    batches from the first offset of an aborted transaction up to its ABORT marker are
    skipped."""
    pending = sorted(aborted, key=lambda a: a[1])
    skipping: set[int] = set()
    out: list[bytes] = []
    for b in batches:
        while pending and pending[0][1] <= b.base_offset:
            skipping.add(pending.pop(0)[0])
        if b.is_control:
            skipping.discard(b.producer_id)
        elif not (b.is_transactional and b.producer_id in skipping):
            out.extend(r.value or b"" for r in b.records)
    return out
