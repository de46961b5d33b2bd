"""Producer ids taken from blocks the controller hands out (Kafka's ``RPCProducerIdManager``).

Used by the gateway (InitProducerId without a transactional id: idempotent producers)
and the transaction coordinator (transactional ids, and a new id when a producer's
epochs are exhausted). The controller gives each caller a disjoint block of ids
(``AllocateProducerIds``, 1000 by default) and persists its high-water mark before
answering, so no id is handed out twice, across callers or across restarts of one: a
restarted caller asks for a new block and abandons what was left of the old one.
Within a caller ids come from the current block in order; once 90% of it is used (the
threshold of Kafka's ``RPCProducerIdManager``) the next block is fetched in the
background, so a producer rarely waits for the controller.

As a last guard against a misbehaving controller, a block that reaches below the
highest id this caller already handed out is refused, never used.

When no id is available in time :class:`ProducerIdsUnavailable` maps to
COORDINATOR_LOAD_IN_PROGRESS, a retriable error (Kafka answers the same while its
producer-id manager waits for a block).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from odradek.controller_client import ControllerClient
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.rpc.v1 import controller_pb2

log = logging.getLogger(__name__)

PREFETCH_RATIO = 0.9
# How long InitProducerId waits for an id, and the bound on one AllocateProducerIds call.
WAIT_FOR_BLOCK_S = 5.0


class ProducerIdsUnavailable(Exception):
    kafka_error = "COORDINATOR_LOAD_IN_PROGRESS"


@dataclass(frozen=True)
class Block:
    first: int
    count: int

    @property
    def end(self) -> int:
        return self.first + self.count


Fetch = Callable[[], Awaitable[tuple[int, int]]]


def from_controller(
    controller: ControllerClient, node_id: int, incarnation: Callable[[], int]
) -> Fetch:
    """A :data:`Fetch` asking the controller (``AllocateProducerIds``) for node
    ``node_id``'s next block; ``incarnation`` is its current registration's."""

    async def fetch() -> tuple[int, int]:
        response = await controller.call(
            lambda s: s.AllocateProducerIds,
            controller_pb2.AllocateProducerIdsRequest(node_id=node_id, incarnation=incarnation()),
            timeout=WAIT_FOR_BLOCK_S,
        )
        if response.error_code:
            raise KafkaError(ErrorCode(response.error_code), "AllocateProducerIds refused")
        return response.first_producer_id, response.count

    return fetch


class ProducerIdBlocks:
    """Hands out producer ids from controller blocks; one fetch in flight at a time."""

    def __init__(self, fetch: Fetch, prefetch_ratio: float = PREFETCH_RATIO) -> None:
        self._fetch = fetch
        self._prefetch_ratio = prefetch_ratio
        self._current: Block | None = None
        self._next = 0
        self._spare: Block | None = None
        self._pending: asyncio.Task[bool] | None = None
        self._high_water = 0  # every id below this was handed out or skipped
        self.blocks_fetched = 0

    @property
    def remaining(self) -> int:
        """Ids left in the current block and the spare one."""
        left = self._current.end - self._next if self._current is not None else 0
        return left + (self._spare.count if self._spare is not None else 0)

    async def next_id(self, timeout: float) -> int:
        """The next unused producer id; ProducerIdsUnavailable if none arrives in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            block = self._current
            if block is not None and self._next < block.end:
                pid = self._next
                self._next += 1
                self._high_water = max(self._high_water, self._next)
                if (
                    self._spare is None
                    and self._pending is None
                    and self._next - block.first >= self._prefetch_ratio * block.count
                ):
                    self._start_fetch()
                return pid
            if self._spare is not None:
                self._current, self._spare = self._spare, None
                self._next = self._current.first
                continue
            if self._pending is None:
                self._start_fetch()
            pending = self._pending
            assert pending is not None
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ProducerIdsUnavailable("no producer id block available in time")
            try:
                fetched = await asyncio.wait_for(asyncio.shield(pending), remaining)
            except TimeoutError:
                raise ProducerIdsUnavailable("no producer id block available in time") from None
            if not fetched:  # let the client retry
                raise ProducerIdsUnavailable("fetching a producer id block failed")

    def _start_fetch(self) -> None:
        self._pending = asyncio.get_running_loop().create_task(
            self._fetch_block(), name="producer-id-block"
        )

    async def _fetch_block(self) -> bool:
        try:
            first, count = await self._fetch()
            block = Block(first, count)
            if count <= 0 or first < 0:
                raise ValueError(f"empty or negative block {block}")
            floor = max(self._high_water, self._current.end if self._current else 0)
            if first < floor:
                raise ValueError(f"block {block} overlaps ids already handed out (below {floor})")
            self._spare = block
            self.blocks_fetched += 1
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("cannot get a producer id block: %s", exc)
            return False
        finally:
            self._pending = None

    async def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pending
