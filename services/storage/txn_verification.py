"""KIP-890 part 1 on the partition leader: a transactional produce that would open a
transaction here is first checked with the transaction coordinator (Kafka's
AddPartitionsToTxnManager and ReplicaManager.maybeStartTransactionVerificationForPartitions).

The leader asks ``TransactionCoordinator.AddPartitionsToTxn`` with ``verify_only`` on
the coordinator that owns the transactional id's ``__transaction_state`` shard
(``abs(java hash(id)) % transaction.state.log.num.partitions``, owner from
``ClusterMetadata.transaction_shards``). Every partition asked must come back NONE to
count as verified; the coordinator answers each partition.

What a failed verification answers to the producer (Kafka's mapping, per partition):

* PRODUCER_FENCED from the coordinator -> INVALID_PRODUCER_EPOCH;
* TRANSACTION_ABORTABLE (partition not in the transaction) -> INVALID_TXN_STATE for
  Produce up to v10, TRANSACTION_ABORTABLE from v11 (Kafka's defaultError/genericError);
* CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION (coordinator unreachable or too slow),
  COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (no owner), NOT_COORDINATOR
  -> NOT_ENOUGH_REPLICAS, which every client retries without refreshing metadata;
* CLUSTER_AUTHORIZATION_FAILED at the top level -> INVALID_TXN_STATE;
* anything else (INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, ...) as is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import grpc

from odradek.metadata_cache import Snapshot
from odradek.protocol.errors import ErrorCode
from odradek.rpc.channel import NodeChannels
from odradek.rpc.v1 import common_pb2, transactions_pb2, transactions_pb2_grpc
from odradek.shards import online_node, partition_for, shard_owner

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

# Produce v11 is the first to understand TRANSACTION_ABORTABLE (KIP-890, KafkaApis).
FIRST_PRODUCE_VERSION_WITH_ABORTABLE = 11
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


def produce_error_for(coordinator_error: int, produce_version: int) -> ErrorCode:
    """What the producer gets for a partition the coordinator did not verify."""
    try:
        code = ErrorCode(coordinator_error)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE:
        if produce_version >= FIRST_PRODUCE_VERSION_WITH_ABORTABLE:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.INVALID_TXN_STATE
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return ErrorCode.INVALID_TXN_STATE
    if code in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


class TxnVerifier:
    """Asks the owning transaction coordinator; one channel per coordinator node."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot | None],
        *,
        num_shards: int,
        timeout_ms: int,
    ) -> None:
        self.snapshot = snapshot
        self.num_shards = num_shards
        self.timeout_ms = timeout_ms
        self._channels: NodeChannels[transactions_pb2_grpc.TransactionCoordinatorStub] = (
            NodeChannels(transactions_pb2_grpc.TransactionCoordinatorStub)
        )

    def _coordinator(self, transactional_id: str) -> tuple[int, str] | None:
        snapshot = self.snapshot()
        if snapshot is None:
            return None
        shard = partition_for(transactional_id, self.num_shards)
        owner, _epoch = shard_owner(snapshot.raw.transaction_shards, shard)
        if owner < 0:
            return None
        node = online_node(snapshot.raw, owner, common_pb2.TRANSACTION_COORDINATOR)
        if node is None:
            return None
        return owner, f"{node.host}:{node.grpc_port}"

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartitionKey],
        produce_version: int,
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """The partitions that failed verification and the produce error for each
        (empty: all verified)."""
        errors = await self._ask(transactional_id, producer_id, producer_epoch, partitions)
        return {
            tp: produce_error_for(code, produce_version)
            for tp, code in errors.items()
            if code != ErrorCode.NONE
        }

    async def _ask(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, int]:
        def all_(code: int) -> dict[TopicPartitionKey, int]:
            return dict.fromkeys(partitions, code)

        coordinator = self._coordinator(transactional_id)
        if coordinator is None:
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        node_id, address = coordinator
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = transactions_pb2.AddPartitionsToTxnRequest(
            transactions=[
                transactions_pb2.AddPartitionsTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=True,
                    topics=[
                        transactions_pb2.TxnTopicPartitions(topic=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        )
        stub = self._channels.stub(node_id, address)
        try:
            response = await stub.AddPartitionsToTxn(request, timeout=self.timeout_ms / 1000.0)
        except grpc.aio.AioRpcError as exc:
            log.info(
                "transaction verification of %r at coordinator %d failed: %s",
                transactional_id,
                node_id,
                exc.code().name,
            )
            return all_(ErrorCode.NETWORK_EXCEPTION)
        if response.error_code:
            return all_(response.error_code)
        result = next((r for r in response.results if r.transactional_id == transactional_id), None)
        if result is None:
            return all_(ErrorCode.INVALID_TXN_STATE)
        if result.error_code:
            return all_(result.error_code)
        answered = {(p.topic, p.partition): p.error_code for p in result.partitions}
        # A partition the coordinator did not answer is not verified.
        return {tp: answered.get(tp, ErrorCode.INVALID_TXN_STATE) for tp in partitions}

    async def close(self) -> None:
        await self._channels.close()
