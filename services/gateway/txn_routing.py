"""Where the gateway sends transaction requests, shared by the transaction API modules.

A transactional id belongs to one ``__transaction_state`` shard,
``abs(java hash(transactional id)) % transaction.state.log.num.partitions`` (Kafka's
``TransactionStateManager.partitionFor``), owned by the transaction coordinator that
``ClusterMetadata.transaction_shards`` names (:mod:`odradek.transaction_shard`). InitProducerId (with a transactional
id), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and DescribeTransactions go to that
owner over gRPC (``TransactionCoordinator``); ListTransactions asks every online
coordinator and merges.

As for groups (:mod:`odradek.gateway.group_routing`), every transactional id has one
coordinator *broker*, as in Kafka: the storage node leading the id's
``__transaction_state`` partition, at a gateway's broker port for it
(:mod:`odradek.gateway.brokers`). FindCoordinator answers it, and ListTransactions on
that broker's port lists the transaction (admin clients ask every broker and merge).
Any gateway still forwards any transactional id's requests. A coordinator that cannot
be reached becomes NOT_COORDINATOR, so clients look the coordinator up again
(docs/transactions-design.md, "Data paths").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import grpc

from odradek.gateway.authorizer import AclOperation, Authorizer, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.coordinator_routing import CoordinatorRouting
from odradek.protocol.errors import ErrorCode
from odradek.rpc.channel import NodeChannels
from odradek.rpc.v1 import common_pb2, transactions_pb2_grpc
from odradek.transaction_shard import (
    TRANSACTION_STATE_TOPIC,
    transaction_coordinator_node,
    transaction_shard_of,
)

log = logging.getLogger(__name__)

Stub = transactions_pb2_grpc.TransactionCoordinatorStub
T = TypeVar("T")


class _ErrorAnswer(Protocol):
    @property
    def error_code(self) -> int: ...


AnswerT = TypeVar("AnswerT", bound=_ErrorAnswer)


class TxnRouter(CoordinatorRouting):
    """One per gateway (``Gateway.transactions``): channels to the transaction coordinators."""

    internal_topic = TRANSACTION_STATE_TOPIC

    def _init_channels(self) -> None:
        self._channels = NodeChannels(transactions_pb2_grpc.TransactionCoordinatorStub)

    def shard(self, transactional_id: str) -> int:
        return transaction_shard_of(self.raw, transactional_id)

    def coordinator_node(self, transactional_id: str) -> common_pb2.Node | None:
        return transaction_coordinator_node(self.raw, self.shard(transactional_id))

    def _stub(self, node: common_pb2.Node) -> Stub:
        return self._channels.stub(node.node_id, f"{node.host}:{node.grpc_port}")

    def stub(self, transactional_id: str) -> Stub | None:
        node = self.coordinator_node(transactional_id)
        return self._stub(node) if node is not None else None

    def all_coordinators(self) -> list[Stub]:
        nodes = self.metadata.current.nodes_of(common_pb2.TRANSACTION_COORDINATOR)
        return [self._stub(n) for n in nodes if n.grpc_port > 0]

    def available(self, transactional_id: str) -> bool:
        """Whether FindCoordinator may name a coordinator for the id now."""
        if TRANSACTION_STATE_TOPIC not in self.metadata.current.topics:
            return False
        return (
            self.coordinator_broker(transactional_id) is not None
            and self.coordinator_node(transactional_id) is not None
        )

    async def call(
        self,
        transactional_id: str,
        method: Callable[[Stub], Callable[..., Awaitable[T]]],
        request: object,
    ) -> T | int:
        """``method(stub)(request)`` on the id's owner; a Kafka error code when there is
        no owner or the call fails (NOT_COORDINATOR: clients find the coordinator again)."""
        stub = self.stub(transactional_id)
        if stub is None:
            return ErrorCode.NOT_COORDINATOR
        try:
            return await method(stub)(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            log.debug("transaction coordinator call failed: %s", exc.code())
            return ErrorCode.NOT_COORDINATOR

    async def error_of(
        self,
        transactional_id: str,
        method: Callable[[Stub], Callable[..., Awaitable[AnswerT]]],
        request: object,
    ) -> int:
        """:meth:`call` for requests answered by an error code alone (AddOffsetsToTxn,
        EndTxn)."""
        answer = await self.call(transactional_id, method, request)
        return answer if isinstance(answer, int) else answer.error_code

    async def close(self) -> None:
        await self._channels.close()


def for_version(error: int, version: int, fenced_since: int, abortable_since: int) -> int:
    """An error as a client of ``version`` understands it (KafkaApis and
    AddPartitionsToTxnManager): versions below ``fenced_since`` get INVALID_PRODUCER_EPOCH
    for PRODUCER_FENCED, versions below ``abortable_since`` INVALID_TXN_STATE for
    TRANSACTION_ABORTABLE (KIP-890)."""
    if error == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < abortable_since:
        return ErrorCode.INVALID_TXN_STATE
    return error


def refusal(authorizer: Authorizer, ctx: ConnectionContext, transactional_id: str) -> int | None:
    """The checks a request naming a transactional id starts with (KafkaApis): an empty
    id is INVALID_REQUEST, and the id needs WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
    None when the request may go on."""
    if not transactional_id:
        return ErrorCode.INVALID_REQUEST
    if not authorizer.allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None
