"""Per-partition storage calls fanned out to the nodes leading the partitions.

DeleteRecords, OffsetForLeaderEpoch and ListOffsets group their partitions by the
storage node leading them, ask every node at once, and give each partition of a
node that could not be asked the same retriable error, so the client refreshes its
metadata and tries again. Produce and Fetch shape their results differently but use
:func:`failure_code` for the same mapping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import storage_pb2_grpc

P = TypeVar("P")
R = TypeVar("R")


def failure_code(exc: BaseException) -> ErrorCode:
    """A storage RPC that failed: its deadline passed, or the node is gone or moved."""
    if isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ErrorCode.REQUEST_TIMED_OUT
    return ErrorCode.NOT_LEADER_OR_FOLLOWER


async def call_leaders(
    gw: Any,
    by_node: dict[int, list[P]],
    call: Callable[[storage_pb2_grpc.StorageStub, list[P]], Awaitable[Any]],
    results: dict[tuple[str, int], R],
    error: Callable[[int], R],
) -> None:
    """``call(stub, parts)`` per node in parallel; every answered partition (items with
    ``topic`` and ``partition``) lands in ``results``, every partition of a failed call
    gets ``error(code)``."""

    async def one(node: int, parts: list[P]) -> None:
        try:
            response = await call(gw.storage.stub(node), parts)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            code = failure_code(exc)
            for q in parts:
                results[(q.topic, q.partition)] = error(code)  # type: ignore[attr-defined]
            return
        for r in response.partitions:
            results[(r.topic, r.partition)] = r

    await asyncio.gather(*(one(n, ps) for n, ps in by_node.items()))
