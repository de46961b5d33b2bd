"""The ``TransactionCoordinator`` gRPC servicer: route each transactional id to its
shard's runtime and translate between protobuf and :mod:`odradek.transactions.shard`.

An id of a shard this node does not own gets NOT_COORDINATOR; of a shard still loading,
COORDINATOR_LOAD_IN_PROGRESS. What needs the cluster metadata is checked here:
AddPartitionsToTxn (client form) answers UNKNOWN_TOPIC_OR_PARTITION for partitions the
metadata does not have and OPERATION_NOT_ATTEMPTED for the others, adding nothing
(KafkaApis.handleAddPartitionsToTxnRequest); AddOffsetsToTxn adds the group's
``__consumer_offsets`` partition. Fresh producer ids come from the controller's blocks
when the shard asks for one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import grpc

from odradek.group_shard import OFFSETS_TOPIC, shard_of
from odradek.producer_id_blocks import WAIT_FOR_BLOCK_S, ProducerIdsUnavailable
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import transactions_pb2, transactions_pb2_grpc
from odradek.shard_runtime import ShardStatus
from odradek.transaction_log.records import TopicPartition, TransactionState, group_partitions
from odradek.transactions.shard import (
    Description,
    InitResult,
    Listing,
    TransactionShard,
    VerifyResult,
)

if TYPE_CHECKING:
    from odradek.transactions.service import TransactionCoordinatorService, TxnRuntime

log = logging.getLogger(__name__)

E = ErrorCode
T = TypeVar("T")
# InitProducerId asks for a fresh producer id at most this often before giving up.
MAX_ID_ROUNDS = 3


def _partitions(topics: list[transactions_pb2.TxnTopicPartitions]) -> list[TopicPartition]:
    return [(t.topic, p) for t in topics for p in t.partitions]


def _errors(
    partitions: list[TopicPartition], errors: dict[TopicPartition, int] | int
) -> list[transactions_pb2.TxnPartitionError]:
    return [
        transactions_pb2.TxnPartitionError(
            topic=t,
            partition=p,
            error_code=errors if isinstance(errors, int) else errors[(t, p)],
        )
        for t, p in partitions
    ]


class TransactionCoordinatorServicer(transactions_pb2_grpc.TransactionCoordinatorServicer):
    def __init__(self, service: TransactionCoordinatorService) -> None:
        self.service = service

    def _runtime(self, transactional_id: str) -> tuple[TxnRuntime | None, int]:
        runtime = self.service.runtime_for(transactional_id)
        if runtime is None:
            return None, E.NOT_COORDINATOR
        return runtime, E.NONE

    # -- InitProducerId ---------------------------------------------------------------------
    async def InitProducerId(
        self, request: transactions_pb2.TxnInitProducerIdRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.TxnInitProducerIdResponse:
        result = await self._init(request)
        return transactions_pb2.TxnInitProducerIdResponse(
            error_code=int(result.error),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )

    async def _init(self, request: transactions_pb2.TxnInitProducerIdRequest) -> InitResult:
        txn_id = request.transactional_id
        if not txn_id:
            return InitResult(E.INVALID_REQUEST)
        runtime, error = self._runtime(txn_id)
        if runtime is None:
            return InitResult(error)
        expected = None
        if request.producer_id >= 0 or request.producer_epoch >= 0:
            expected = (request.producer_id, request.producer_epoch)
        new_id: int | None = None
        for _ in range(MAX_ID_ROUNDS):
            pid = new_id

            def init(
                shard: TransactionShard,
                respond: Callable[[InitResult], None],
                pid: int | None = pid,
            ) -> None:
                shard.init_producer_id(
                    txn_id, request.transaction_timeout_ms, expected, pid, respond
                )

            result: InitResult = await runtime.long_poll(init, InitResult)
            if not result.needs_producer_id:
                return result
            try:
                new_id = await self.service.producer_ids.next_id(WAIT_FOR_BLOCK_S)
            except ProducerIdsUnavailable:
                return InitResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        return InitResult(E.CONCURRENT_TRANSACTIONS)

    # -- AddPartitionsToTxn -----------------------------------------------------------------
    async def AddPartitionsToTxn(
        self, request: transactions_pb2.AddPartitionsToTxnRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.AddPartitionsToTxnResponse:
        response = transactions_pb2.AddPartitionsToTxnResponse()
        for txn in request.transactions:
            response.results.append(await self._add_partitions(txn))
        return response

    async def _add_partitions(
        self, txn: transactions_pb2.AddPartitionsTransaction
    ) -> transactions_pb2.AddPartitionsTransactionResult:
        partitions = _partitions(list(txn.topics))
        out = transactions_pb2.AddPartitionsTransactionResult(transactional_id=txn.transactional_id)

        def failed(error: int) -> transactions_pb2.AddPartitionsTransactionResult:
            out.error_code = error
            out.partitions.extend(_errors(partitions, error))
            return out

        if not txn.transactional_id:
            return failed(E.INVALID_REQUEST)
        runtime, error = self._runtime(txn.transactional_id)
        if runtime is None:
            return failed(error)
        if txn.verify_only:
            verified: VerifyResult = await runtime.call(
                lambda s: s.verify_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions
                ),
                lambda e: VerifyResult(e, dict.fromkeys(partitions, e)),
            )
            out.error_code = verified.error
            out.partitions.extend(_errors(partitions, verified.partitions))
            return out
        snapshot = self.service.metadata.current
        unknown = {tp for tp in partitions if snapshot.partition(*tp) is None}
        if unknown:
            out.partitions.extend(
                _errors(
                    partitions,
                    {
                        tp: E.UNKNOWN_TOPIC_OR_PARTITION
                        if tp in unknown
                        else E.OPERATION_NOT_ATTEMPTED
                        for tp in partitions
                    },
                )
            )
            return out
        error = await self._add(
            runtime, txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions
        )
        if error:
            return failed(error)
        out.partitions.extend(_errors(partitions, E.NONE))
        return out

    @staticmethod
    async def _add(
        runtime: TxnRuntime, txn_id: str, pid: int, epoch: int, partitions: list[TopicPartition]
    ) -> int:
        result: int = await runtime.long_poll(
            lambda s, respond: s.add_partitions(txn_id, pid, epoch, partitions, respond),
            lambda e: e,
        )
        return result

    # -- AddOffsetsToTxn --------------------------------------------------------------------
    async def AddOffsetsToTxn(
        self, request: transactions_pb2.AddOffsetsToTxnRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.AddOffsetsToTxnResponse:
        if not request.transactional_id:
            return transactions_pb2.AddOffsetsToTxnResponse(error_code=E.INVALID_REQUEST)
        runtime, error = self._runtime(request.transactional_id)
        if runtime is not None:
            partition = (
                OFFSETS_TOPIC,
                shard_of(self.service.metadata.current.raw, request.group_id),
            )
            error = await self._add(
                runtime,
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                [partition],
            )
        return transactions_pb2.AddOffsetsToTxnResponse(error_code=int(error))

    # -- EndTxn -----------------------------------------------------------------------------
    async def EndTxn(
        self, request: transactions_pb2.EndTxnRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.EndTxnResponse:
        if not request.transactional_id:
            return transactions_pb2.EndTxnResponse(error_code=E.INVALID_REQUEST)
        runtime, error = self._runtime(request.transactional_id)
        if runtime is not None:
            error = await runtime.long_poll(
                lambda s, respond: s.end_txn(
                    request.transactional_id,
                    request.producer_id,
                    request.producer_epoch,
                    request.committed,
                    respond,
                ),
                lambda e: e,
            )
        return transactions_pb2.EndTxnResponse(error_code=int(error))

    # -- DescribeTransactions / ListTransactions ----------------------------------------------
    async def DescribeTransactions(
        self,
        request: transactions_pb2.DescribeTransactionsRequest,
        context: grpc.aio.ServicerContext,
    ) -> transactions_pb2.DescribeTransactionsResponse:
        response = transactions_pb2.DescribeTransactionsResponse()
        for txn_id in request.transactional_ids:
            d = await self._describe(txn_id)
            response.transactions.append(
                transactions_pb2.TransactionDescription(
                    transactional_id=txn_id,
                    error_code=int(d.error),
                    transaction_state=d.state,
                    transaction_timeout_ms=d.timeout_ms,
                    transaction_start_time_ms=d.start_ms,
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    topics=[
                        transactions_pb2.TxnTopicPartitions(topic=t, partitions=ids)
                        for t, ids in group_partitions(d.partitions)
                    ],
                )
            )
        return response

    async def _describe(self, txn_id: str) -> Description:
        if not txn_id:
            return Description(txn_id, E.INVALID_REQUEST)
        runtime, error = self._runtime(txn_id)
        if runtime is None:
            return Description(txn_id, error)
        result: Description = await runtime.call(
            lambda s: s.describe(txn_id), lambda e: Description(txn_id, e)
        )
        return result

    async def ListTransactions(
        self, request: transactions_pb2.ListTransactionsRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.ListTransactionsResponse:
        response = transactions_pb2.ListTransactionsResponse()
        states: set[TransactionState] = set()
        for name in request.state_filters:
            state = TransactionState.from_name(name)
            if state is None:
                response.unknown_state_filters.append(name)
            else:
                states.add(state)
        if request.state_filters and not states:
            return response  # only unknown states asked for: nothing matches
        pids = set(request.producer_id_filters)
        runtimes = list(self.service.runtimes.values())
        if any(r.status is ShardStatus.LOADING for r in runtimes):
            response.error_code = E.COORDINATOR_LOAD_IN_PROGRESS
            return response
        for runtime in runtimes:
            listed: list[Listing] | int = await runtime.call(
                lambda s: s.list_transactions(states, pids, request.duration_filter_ms),
                lambda e: e,
            )
            if isinstance(listed, int):
                if listed == E.COORDINATOR_LOAD_IN_PROGRESS:
                    response.error_code = listed
                    del response.transactions[:]
                    return response
                continue  # closed meanwhile: its ids are another coordinator's now
            response.transactions.extend(
                transactions_pb2.TransactionListing(
                    transactional_id=item.transactional_id,
                    producer_id=item.producer_id,
                    transaction_state=item.state,
                )
                for item in listed
            )
        return response
