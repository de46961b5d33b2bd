"""Transactions on real storage processes: WriteTxnMarkers, the last stable offset in Fetch
and ListOffsets, the aborted-transactions list, KIP-890 verification against a
TransactionCoordinator, and a follower taking over leadership.

The transaction coordinator here is a small gRPC server inside the test (registered with
the controller as a TRANSACTION_COORDINATOR node, so the controller gives it every
``__transaction_state`` shard): it answers ``AddPartitionsToTxn(verify_only)`` from a
table the test controls, the way Kafka's TransactionCoordinator does. Markers are sent
by the test as the coordinator would send them.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import grpc
import pytest
from helpers.waiting import wait_until_async
from test_storage_harness import Client, Cluster, retry, storage_clusters

from odradek.controller_client import ControllerClient, Membership
from odradek.protocol.errors import ErrorCode
from odradek.records.control import ControlRecordType, parse_end_txn_marker
from odradek.records.record import BatchBuilder, decode_batches
from odradek.rpc.v1 import (
    common_pb2,
    storage_pb2,
    transactions_pb2,
    transactions_pb2_grpc,
)
from odradek.tools.dump_log import dump_files
from odradek.tools.launcher import Cluster as LaunchedCluster

NODES = [100, 101, 102]
COORDINATOR_ID = 400
READ_COMMITTED = 1
_probe_epochs = itertools.count()


# -- the transaction coordinator stand-in -------------------------------------------------
@dataclass
class TxnState:
    producer_id: int
    producer_epoch: int
    partitions: set[tuple[str, int]] = field(default_factory=set)


class FakeTransactionCoordinator(transactions_pb2_grpc.TransactionCoordinatorServicer):
    """Answers verify_only as Kafka's TransactionCoordinator.handleVerifyPartitionsInTransaction."""

    def __init__(self) -> None:
        self.transactions: dict[str, TxnState] = {}
        self.verify_calls: list[transactions_pb2.AddPartitionsTransaction] = []
        self.fail_with = ErrorCode.NONE

    async def AddPartitionsToTxn(
        self, request: transactions_pb2.AddPartitionsToTxnRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.AddPartitionsToTxnResponse:
        results = []
        for txn in request.transactions:
            assert txn.verify_only
            self.verify_calls.append(txn)
            result = transactions_pb2.AddPartitionsTransactionResult(
                transactional_id=txn.transactional_id
            )
            state = self.transactions.get(txn.transactional_id)
            for topic in txn.topics:
                for index in topic.partitions:
                    if self.fail_with:
                        code = self.fail_with
                    elif state is None or state.producer_id != txn.producer_id:
                        code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
                    elif state.producer_epoch != txn.producer_epoch:
                        code = ErrorCode.PRODUCER_FENCED
                    elif (topic.topic, index) in state.partitions:
                        code = ErrorCode.NONE
                    else:
                        code = ErrorCode.TRANSACTION_ABORTABLE
                    result.partitions.append(
                        transactions_pb2.TxnPartitionError(
                            topic=topic.topic, partition=index, error_code=code
                        )
                    )
            results.append(result)
        return transactions_pb2.AddPartitionsToTxnResponse(results=results)


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: Callable[..., LaunchedCluster]) -> Cluster:
    return storage_clusters(module_cluster_factory)(NODES)


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[Client]:
    c = Client(cluster)
    yield c
    await c.close()


@pytest.fixture
async def coordinator(
    cluster: Cluster, client: Client
) -> AsyncIterator[FakeTransactionCoordinator]:
    fake = FakeTransactionCoordinator()
    server = grpc.aio.server()
    transactions_pb2_grpc.add_TransactionCoordinatorServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    controller = ControllerClient(cluster.controller_address)
    membership = Membership(
        controller,
        common_pb2.Node(
            node_id=COORDINATOR_ID,
            kind=common_pb2.TRANSACTION_COORDINATOR,
            host="127.0.0.1",
            grpc_port=port,
        ),
    )
    await membership.register()
    membership.start()
    try:

        async def owns_shards() -> bool:
            md = await client.metadata()
            return bool(md.transaction_shards) and all(
                s.coordinator_id == COORDINATOR_ID for s in md.transaction_shards
            )

        await wait_until_async(
            owns_shards, "the test coordinator owning the transaction shards", timeout=15
        )
        # The storage nodes learn it from their metadata stream: probe until verified.
        md = await client.metadata()
        if not any(t.name == "probe" for t in md.topics):
            await client.create_topic("probe", rf=1, assignment=[[node] for node in NODES])
        epoch = next(_probe_epochs)
        for index, node in enumerate(NODES):
            fake.transactions["probe"] = TxnState(1, epoch, {("probe", index)})
            probe = txn_batch(1, 0, [b"p"], epoch=epoch)

            async def verified(node: int = node, index: int = index, probe: bytes = probe) -> bool:
                result = await produce(client, node, "probe", probe, index=index, txn_id="probe")
                return result.error_code == ErrorCode.NONE

            await wait_until_async(
                verified, f"storage node {node} verifying with the coordinator", timeout=15
            )
            await write_marker(client, node, "probe", 1, epoch, committed=True, index=index)
        fake.verify_calls.clear()
        yield fake
    finally:
        await membership.stop()
        await controller.close()
        await server.stop(None)


# -- helpers --------------------------------------------------------------------------------
def txn_batch(
    pid: int, seq: int, values: list[bytes], *, epoch: int = 0, transactional: bool = True
) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(now + i, b"k", value)
    return builder.build()


async def produce(
    client: Client,
    node: int,
    topic: str,
    records: bytes,
    *,
    index: int = 0,
    txn_id: str = "",
    api_version: int = 9,
) -> storage_pb2.ProducePartitionResult:
    response = await client.node(node).Produce(
        storage_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            transactional_id=txn_id,
            api_version=api_version,
            partitions=[
                storage_pb2.ProducePartition(topic=topic, partition=index, records=records)
            ],
        ),
        timeout=20,
    )
    return response.partitions[0]


async def write_markers(
    client: Client,
    node: int,
    markers: list[transactions_pb2.TxnMarker],
) -> transactions_pb2.WriteTxnMarkersResponse:
    return await client.node(node).WriteTxnMarkers(
        transactions_pb2.WriteTxnMarkersRequest(markers=markers, timeout_ms=5000), timeout=20
    )


def marker(
    pid: int, epoch: int, *, committed: bool, coordinator_epoch: int = 0, **topics: list[int]
) -> transactions_pb2.TxnMarker:
    return transactions_pb2.TxnMarker(
        producer_id=pid,
        producer_epoch=epoch,
        committed=committed,
        coordinator_epoch=coordinator_epoch,
        topics=[
            transactions_pb2.TxnTopicPartitions(topic=t, partitions=p) for t, p in topics.items()
        ],
    )


async def write_marker(
    client: Client,
    node: int,
    topic: str,
    pid: int,
    epoch: int,
    *,
    committed: bool,
    coordinator_epoch: int = 0,
    index: int = 0,
) -> int:
    response = await write_markers(
        client,
        node,
        [
            transactions_pb2.TxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                committed=committed,
                coordinator_epoch=coordinator_epoch,
                topics=[transactions_pb2.TxnTopicPartitions(topic=topic, partitions=[index])],
            )
        ],
    )
    (result,) = response.markers
    assert result.producer_id == pid
    (answer,) = result.partitions
    return answer.error_code


def committed_values(records: bytes, aborted: list[tuple[int, int]]) -> list[bytes]:
    """What a read_committed consumer delivers (the Java consumer's algorithm): skip the
    transactional batches of a producer from an aborted transaction's first offset until
    its ABORT marker, and every control batch."""
    pending = sorted(aborted, key=lambda a: a[1])
    skipping: set[int] = set()
    out: list[bytes] = []
    for b in decode_batches(records):
        while pending and pending[0][1] <= b.last_offset:
            skipping.add(pending.pop(0)[0])
        if b.is_control:
            m = parse_end_txn_marker(b.records[0].key, b.records[0].value)
            if m.control_type == ControlRecordType.ABORT:
                skipping.discard(b.producer_id)
            continue
        if b.is_transactional and b.producer_id in skipping:
            continue
        out.extend(bytes(r.value or b"") for r in b.records)
    return out


async def read_committed(
    client: Client, node: int, topic: str, *, index: int = 0
) -> tuple[storage_pb2.FetchPartitionResult, list[tuple[int, int]]]:
    result = await client.fetch(node, topic, 0, index=index, isolation_level=READ_COMMITTED)
    assert result.error_code == 0, result
    return result, [(a.producer_id, a.first_offset) for a in result.aborted_transactions]


async def list_offset_committed(client: Client, node: int, topic: str) -> int:
    response = await client.node(node).ListOffsets(
        storage_pb2.ListOffsetsRequest(
            isolation_level=READ_COMMITTED,
            partitions=[
                storage_pb2.ListOffsetsPartition(
                    topic=topic, partition=0, timestamp=-1, current_leader_epoch=-1
                )
            ],
        ),
        timeout=10,
    )
    result = response.partitions[0]
    assert result.error_code == 0, result
    return result.offset


async def scrape(cluster: Cluster, node: int) -> str:
    url = f"http://127.0.0.1:{cluster.nodes[node].ports['metrics']}/metrics"
    return await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())


def plain_batch(values: list[bytes]) -> bytes:
    builder = BatchBuilder()
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(now + i, b"k", value)
    return builder.build()


def txnindex_bytes(cluster: Cluster, node: int, topic: str) -> bytes:
    d = cluster.root / f"storage-{node}" / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.txnindex")))


async def replicas_in_step(client: Client, topic: str, nodes: list[int]) -> None:
    async def in_step() -> bool:
        states = [await client.describe(n, topic) for n in nodes]
        return len({(s.log_end_offset, s.high_watermark) for s in states}) == 1

    await wait_until_async(in_step, f"replicas of {topic} in step", timeout=15)


# -- tests ----------------------------------------------------------------------------------
async def test_markers_bound_read_committed_fetch_and_list_offsets(
    cluster: Cluster, client: Client, coordinator: FakeTransactionCoordinator
) -> None:
    await client.create_topic(
        "tx", rf=3, configs={"min.insync.replicas": "2"}, assignment=[[100, 101, 102]]
    )
    a, b = 5001, 5002
    coordinator.transactions["txn-a"] = TxnState(a, 0, {("tx", 0)})
    coordinator.transactions["txn-b"] = TxnState(b, 0, {("tx", 0)})
    assert (await produce(client, 100, "tx", plain_batch([b"plain-0"]))).error_code == 0
    first_a = await produce(client, 100, "tx", txn_batch(a, 0, [b"a-0", b"a-1"]), txn_id="txn-a")
    assert first_a.error_code == 0, first_a
    a_first = first_a.base_offset
    (call,) = coordinator.verify_calls
    assert (call.transactional_id, call.producer_id, call.producer_epoch) == ("txn-a", a, 0)
    assert [(t.topic, list(t.partitions)) for t in call.topics] == [("tx", [0])]
    # The transaction is ongoing now: later batches need no verification.
    more = await produce(client, 100, "tx", txn_batch(a, 2, [b"a-2"]), txn_id="txn-a")
    assert more.error_code == 0 and len(coordinator.verify_calls) == 1
    first_b = await produce(client, 100, "tx", txn_batch(b, 0, [b"b-0"]), txn_id="txn-b")
    assert first_b.error_code == 0
    assert (await produce(client, 100, "tx", plain_batch([b"plain-1"]))).error_code == 0

    fetched, aborted = await read_committed(client, 100, "tx")
    assert fetched.high_watermark == 6 and fetched.last_stable_offset == a_first
    assert committed_values(fetched.records, aborted) == [b"plain-0"] and aborted == []
    assert (await client.list_offset(100, "tx", -1)).offset == 6
    assert await list_offset_committed(client, 100, "tx") == a_first
    lag = 'odradek_partition_last_stable_offset_lag{partition="0",topic="tx"}'
    assert f"{lag} {6.0 - a_first}" in await scrape(cluster, 100)

    assert await write_marker(client, 100, "tx", a, 0, committed=False, coordinator_epoch=3) == 0
    fetched, aborted = await read_committed(client, 100, "tx")
    assert fetched.last_stable_offset == first_b.base_offset
    assert await write_marker(client, 100, "tx", b, 0, committed=True, coordinator_epoch=3) == 0
    fetched, aborted = await read_committed(client, 100, "tx")
    assert fetched.last_stable_offset == fetched.high_watermark == 8
    assert aborted == [(a, a_first)]
    assert committed_values(fetched.records, aborted) == [b"plain-0", b"b-0", b"plain-1"]
    assert await list_offset_committed(client, 100, "tx") == 8
    assert f"{lag} 0.0" in await scrape(cluster, 100)
    # read_uncommitted: everything, no aborted list.
    uncommitted = await client.fetch(100, "tx", 0)
    assert not uncommitted.aborted_transactions
    assert len(decode_batches(uncommitted.records)) == 7

    # Followers applied the markers to their own .txnindex (Kafka's file, byte for byte).
    await replicas_in_step(client, "tx", NODES)
    index = txnindex_bytes(cluster, 100, "tx")
    assert len(index) == 34
    assert {txnindex_bytes(cluster, n, "tx") for n in NODES} == {index}

    # dump-log prints the control records and the index like kafka-dump-log.sh.
    out = io.StringIO()
    d = cluster.root / "storage-101" / "tx-0"
    dump_files(
        [str(p) for p in sorted(d.glob("*.log")) + sorted(d.glob("*.txnindex"))],
        False,
        out,
        deep_iteration=True,
    )
    text = out.getvalue()
    assert "endTxnMarker: ABORT coordinatorEpoch: 3" in text
    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in text
    assert (
        f"version: 0 producerId: {a} firstOffset: {a_first} lastOffset: 6 "
        f"lastStableOffset: {first_b.base_offset}"
    ) in text


async def test_marker_errors_are_kafkas(
    cluster: Cluster, client: Client, coordinator: FakeTransactionCoordinator
) -> None:
    await client.create_topic(
        "txbad", rf=3, configs={"min.insync.replicas": "2"}, assignment=[[101, 100, 102]]
    )
    pid = 6001
    coordinator.transactions["bad"] = TxnState(pid, 0, {("txbad", 0)})
    assert (
        await produce(client, 101, "txbad", txn_batch(pid, 0, [b"x"]), txn_id="bad")
    ).error_code == 0
    response = await write_markers(
        client,
        101,
        [
            marker(pid, 0, committed=True, coordinator_epoch=5, txbad=[0, 7], nosuch=[0]),
            marker(pid + 1, 0, committed=False, txbad=[0]),  # a producer that wrote nothing
        ],
    )
    assert [
        [(p.topic, p.partition, p.error_code) for p in m.partitions] for m in response.markers
    ] == [
        [
            ("txbad", 0, ErrorCode.NONE),
            ("txbad", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("nosuch", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ],
        [("txbad", 0, ErrorCode.NONE)],
    ]
    assert [m.producer_id for m in response.markers] == [pid, pid + 1]
    # Only the leader writes markers.
    assert (
        await write_marker(client, 100, "txbad", pid, 0, committed=True, coordinator_epoch=5)
        == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    # A zombie coordinator (older coordinator epoch) is fenced.
    assert (
        await produce(client, 101, "txbad", txn_batch(pid, 1, [b"y"]), txn_id="bad")
    ).error_code == 0
    assert (
        await write_marker(client, 101, "txbad", pid, 0, committed=False, coordinator_epoch=4)
        == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    # The coordinator bumps the epoch while aborting (a timed-out transaction): the old
    # epoch's markers and data are fenced from then on.
    assert (
        await write_marker(client, 101, "txbad", pid, 1, committed=False, coordinator_epoch=5) == 0
    )
    assert (
        await write_marker(client, 101, "txbad", pid, 0, committed=True, coordinator_epoch=5)
        == ErrorCode.INVALID_PRODUCER_EPOCH
    )
    coordinator.transactions["bad"] = TxnState(pid, 0, {("txbad", 0)})
    zombie = await produce(client, 101, "txbad", txn_batch(pid, 2, [b"z"]), txn_id="bad")
    assert zombie.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    fetched, aborted = await read_committed(client, 101, "txbad")
    assert fetched.last_stable_offset == fetched.high_watermark
    assert committed_values(fetched.records, aborted) == [b"x"]


async def test_verification_keeps_late_produces_out(
    cluster: Cluster, client: Client, coordinator: FakeTransactionCoordinator
) -> None:
    await client.create_topic("txv", partitions=2, rf=1, assignment=[[102], [102]])
    pid, epoch = 7001, 2
    coordinator.transactions["v"] = TxnState(pid, epoch, set())
    first = txn_batch(pid, 0, [b"v-0"], epoch=epoch)
    leo = (await client.describe(102, "txv")).log_end_offset

    async def refused(
        code: int, *, api_version: int = 9, txn_id: str = "v", records: bytes = first
    ) -> None:
        result = await produce(client, 102, "txv", records, txn_id=txn_id, api_version=api_version)
        assert result.error_code == code, (ErrorCode(result.error_code).name, result.error_message)
        assert (await client.describe(102, "txv")).log_end_offset == leo  # nothing appended

    # The partition was never added to the transaction (Kafka: TRANSACTION_ABORTABLE from
    # the coordinator, INVALID_TXN_STATE to Produce up to v10).
    await refused(ErrorCode.INVALID_TXN_STATE)
    await refused(ErrorCode.TRANSACTION_ABORTABLE, api_version=11)
    coordinator.transactions["v"] = TxnState(pid, epoch + 1, {("txv", 0)})
    await refused(ErrorCode.INVALID_PRODUCER_EPOCH)  # PRODUCER_FENCED at the coordinator
    coordinator.transactions["v"] = TxnState(pid + 1, epoch, {("txv", 0)})
    await refused(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    coordinator.transactions["v"] = TxnState(pid, epoch, {("txv", 0)})
    for busy in (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    ):
        coordinator.fail_with = busy
        await refused(ErrorCode.NOT_ENOUGH_REPLICAS)  # retriable for every client
    coordinator.fail_with = ErrorCode.NONE
    await refused(ErrorCode.INVALID_TXN_STATE, txn_id="")  # nothing to verify with
    # Two producers' transactional batches in one request.
    two = await client.node(102).Produce(
        storage_pb2.ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            transactional_id="v",
            partitions=[
                storage_pb2.ProducePartition(topic="txv", partition=0, records=first),
                storage_pb2.ProducePartition(
                    topic="txv", partition=1, records=txn_batch(pid + 5, 0, [b"w"])
                ),
            ],
        ),
        timeout=20,
    )
    assert [p.error_code for p in two.partitions] == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2

    # Verified: the transaction opens.
    ok = await produce(client, 102, "txv", first, txn_id="v")
    assert ok.error_code == 0 and ok.base_offset == leo
    # The coordinator aborts it (the producer timed out); a late retry of a batch of the
    # old transaction must not open a new, hanging one.
    coordinator.transactions["v"] = TxnState(pid, epoch, set())
    assert await write_marker(client, 102, "txv", pid, epoch, committed=False) == 0
    leo = (await client.describe(102, "txv")).log_end_offset
    late = txn_batch(pid, 1, [b"late"], epoch=epoch)
    await refused(ErrorCode.INVALID_TXN_STATE, records=late)
    fetched, aborted = await read_committed(client, 102, "txv")
    assert fetched.last_stable_offset == fetched.high_watermark == leo  # nothing hangs
    assert committed_values(fetched.records, aborted) == []


async def test_ongoing_transaction_survives_restarts_of_its_leader(
    cluster: Cluster, client: Client, coordinator: FakeTransactionCoordinator
) -> None:
    await client.create_topic("txr", rf=1, assignment=[[101]])
    a, b = 9001, 9002
    coordinator.transactions["ra"] = TxnState(a, 0, {("txr", 0)})
    coordinator.transactions["rb"] = TxnState(b, 0, {("txr", 0)})
    rb = await produce(client, 101, "txr", txn_batch(b, 0, [b"b0"]), txn_id="rb")
    assert rb.error_code == 0
    assert await write_marker(client, 101, "txr", b, 0, committed=False, coordinator_epoch=2) == 0
    ra = await produce(client, 101, "txr", txn_batch(a, 0, [b"a0"]), txn_id="ra")
    assert ra.error_code == 0 and ra.base_offset == 2
    assert (await produce(client, 101, "txr", plain_batch([b"p"]))).error_code == 0
    expected = ([(b, rb.base_offset)], [])  # aborted list, committed values below the LSO

    async def state() -> tuple[list[tuple[int, int]], list[bytes]]:
        fetched, aborted = await retry(lambda: read_committed(client, 101, "txr"), timeout=30)
        assert fetched.last_stable_offset == ra.base_offset
        return aborted, committed_values(fetched.records, aborted)

    assert await state() == expected
    cluster.nodes[101].terminate()  # clean: producer snapshot at the log end
    cluster.nodes[101].start()
    cluster.nodes[101].wait_ready()
    await client.wait_hosted(101, "txr", 0, leader=True, timeout=30)
    assert await state() == expected
    cluster.restart(101)  # kill -9: recovery rebuilds producer state and .txnindex
    await client.wait_hosted(101, "txr", 0, leader=True, timeout=30)
    assert await state() == expected
    # A's transaction is still open: its marker ends it; the old coordinator epoch of B's
    # abort stays fenced.
    assert (
        await write_marker(client, 101, "txr", b, 0, committed=True, coordinator_epoch=1)
        == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    assert await write_marker(client, 101, "txr", a, 0, committed=True, coordinator_epoch=2) == 0
    fetched, aborted = await read_committed(client, 101, "txr")
    assert fetched.last_stable_offset == fetched.high_watermark
    assert committed_values(fetched.records, aborted) == [b"a0", b"p"]


async def test_follower_taking_over_keeps_lso_and_aborted_list(
    cluster: Cluster, client: Client, coordinator: FakeTransactionCoordinator
) -> None:
    await client.create_topic(
        "txfo", rf=3, configs={"min.insync.replicas": "2"}, assignment=[[102, 100, 101]]
    )
    a, b = 8001, 8002
    coordinator.transactions["fa"] = TxnState(a, 0, {("txfo", 0)})
    coordinator.transactions["fb"] = TxnState(b, 0, {("txfo", 0)})
    assert (await produce(client, 102, "txfo", plain_batch([b"p0"]))).error_code == 0
    ra = await produce(client, 102, "txfo", txn_batch(a, 0, [b"a0", b"a1"]), txn_id="fa")
    rb = await produce(client, 102, "txfo", txn_batch(b, 0, [b"b0"]), txn_id="fb")
    assert ra.error_code == rb.error_code == 0
    assert await write_marker(client, 102, "txfo", a, 0, committed=False, coordinator_epoch=7) == 0
    assert (await produce(client, 102, "txfo", plain_batch([b"p1"]))).error_code == 0
    await replicas_in_step(client, "txfo", NODES)
    before, before_aborted = await read_committed(client, 102, "txfo")
    assert before.last_stable_offset == rb.base_offset
    assert before_aborted == [(a, ra.base_offset)]

    cluster.nodes[102].kill()
    try:

        async def new_leader() -> bool:
            p = await client.partition("txfo")
            return p.leader in (100, 101)

        await wait_until_async(new_leader, "a new leader for txfo", timeout=20)
        leader = (await client.partition("txfo")).leader

        async def served() -> bool:
            r = await client.fetch(leader, "txfo", 0, isolation_level=READ_COMMITTED)
            return r.error_code == 0 and r.high_watermark >= before.high_watermark

        await wait_until_async(served, "the new leader serving txfo", timeout=20)
        after, after_aborted = await read_committed(client, leader, "txfo")
        assert after.last_stable_offset == rb.base_offset
        assert after_aborted == before_aborted
        assert committed_values(after.records, after_aborted) == [b"p0"]
        assert await list_offset_committed(client, leader, "txfo") == rb.base_offset
        # The new leader fences the old coordinator epoch it replicated, and finishes B.
        assert (
            await write_marker(client, leader, "txfo", a, 0, committed=True, coordinator_epoch=6)
            == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        )
        assert (
            await write_marker(client, leader, "txfo", b, 0, committed=True, coordinator_epoch=7)
            == 0
        )
        done, done_aborted = await read_committed(client, leader, "txfo")
        assert done.last_stable_offset == done.high_watermark
        assert done_aborted == before_aborted
        assert committed_values(done.records, done_aborted) == [b"p0", b"b0", b"p1"]
    finally:
        cluster.nodes[102].start()
        cluster.nodes[102].wait_ready()
    # The old leader comes back as a follower with the same index (recovered after kill -9).
    await retry(lambda: replicas_in_step(client, "txfo", NODES), timeout=30)
    await wait_until_async(
        lambda: _same_index(cluster, "txfo"), "the same .txnindex on every replica", timeout=20
    )


async def _same_index(cluster: Cluster, topic: str) -> bool:
    return len({txnindex_bytes(cluster, n, topic) for n in NODES}) == 1
