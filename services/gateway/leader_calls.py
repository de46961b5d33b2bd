"""Per-partition storage calls fanned out to the nodes leading the partitions.

DeleteRecords, OffsetForLeaderEpoch, ListOffsets and DescribeProducers refuse a
partition the same way (:func:`leading`), group their partitions by the
storage node leading them, ask every node at once, and give each partition of a
node that could not be asked the same retriable error, so the client refreshes its
metadata and tries again. Produce and Fetch shape their results differently but use
:func:`failure_code` for the same mapping. Fetch alone reports a deadline as
NOT_LEADER_OR_FOLLOWER too: the Java consumer
(``org.apache.kafka.clients.consumer.internals.FetchCollector.handleInitializeErrors``)
throws IllegalStateException on a Fetch partition error outside its list, and
REQUEST_TIMED_OUT is not in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, TypeVar

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import common_pb2, storage_pb2_grpc

R_co = TypeVar("R_co", covariant=True)


class PartitionKeyed(Protocol):
    """A per-partition item of a storage request or answer."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


class PartitionResult(PartitionKeyed, Protocol):
    """A per-partition result of a storage answer."""

    error_code: int


P = TypeVar("P", bound=PartitionKeyed)
R = TypeVar("R", bound=PartitionResult)


class PartitionsAnswer(Protocol[R_co]):
    """A storage answer: one result per partition asked."""

    @property
    def partitions(self) -> Iterable[R_co]: ...


def leading(
    gw: GatewayApi,
    ctx: ConnectionContext,
    operation: AclOperation,
    topic: str,
    partition: int,
    *,
    no_leader: ErrorCode = ErrorCode.LEADER_NOT_AVAILABLE,
) -> common_pb2.Partition | ErrorCode:
    """The partition, when a request may go to its leader; else the error Kafka answers
    for it: TOPIC_AUTHORIZATION_FAILED without ``operation`` on the topic,
    UNKNOWN_TOPIC_OR_PARTITION, ``no_leader`` while it has no leader."""
    if not gw.authorizer.allowed(ctx, operation, ResourceType.TOPIC, topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    part = gw.metadata.current.partition(topic, partition)
    if part is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if part.leader < 0:
        return no_leader
    return part


# An int: the Produce path maps every partition's answer, and an enum member looked up
# on its class costs ~0.3 us on Python 3.11 (issue 18).
_UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def leader_answer_code(code: int) -> int:
    """A storage node's error for a partition the gateway's metadata has: a node that
    does not host it (UNKNOWN_TOPIC_OR_PARTITION, e.g. a new topic whose leader has not
    applied its leadership yet, or a replica just moved away) answers what a Kafka broker
    answers then, NOT_LEADER_OR_FOLLOWER (``ReplicaManager.getPartitionOrError``), which
    every client takes as "refresh metadata and retry" rather than as a missing topic."""
    if code == _UNKNOWN_TOPIC_OR_PARTITION:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return code


def failure_code(
    exc: BaseException, *, timed_out: ErrorCode = ErrorCode.REQUEST_TIMED_OUT
) -> ErrorCode:
    """A storage RPC that failed: its deadline passed (``timed_out``), or the node is
    gone or moved (NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata)."""
    if isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return timed_out
    if isinstance(exc, TimeoutError):  # a data link call's deadline (docs/data-link.md)
        return timed_out
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


async def call_leaders(
    gw: GatewayApi,
    by_node: dict[int, list[P]],
    call: Callable[[storage_pb2_grpc.StorageStub, list[P]], Awaitable[PartitionsAnswer[R]]],
    results: dict[tuple[str, int], R],
    error: Callable[[int], R],
) -> None:
    """``call(stub, parts)`` per node in parallel; every answered partition lands in
    ``results``, every partition of a failed call gets ``error(code)``."""

    async def one(node: int, parts: list[P]) -> None:
        try:
            response = await call(gw.storage.stub(node), parts)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            code = failure_code(exc)
            for q in parts:
                results[(q.topic, q.partition)] = error(code)
            return
        for r in response.partitions:
            r.error_code = leader_answer_code(r.error_code)
            results[(r.topic, r.partition)] = r

    await asyncio.gather(*(one(n, ps) for n, ps in by_node.items()))
