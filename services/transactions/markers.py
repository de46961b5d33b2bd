"""Delivering transaction markers (Kafka's ``TransactionMarkerChannelManager``).

A :class:`~odradek.transactions.shard.MarkerJob` names one transaction's outcome and
its partitions. Each partition gets ``WriteTxnMarkers``: a ``__consumer_offsets``
partition at the offset store owning that shard (``OffsetStore.WriteTxnMarkers``: it
appends the marker and materialises or drops the pending transactional offsets), any
other partition at its leader (``Storage.WriteTxnMarkers``). Partitions of one target
go in one request; targets are asked in parallel.

Per-partition answers (``TransactionMarkerRequestCompletionHandler``):

- NONE, or UNSUPPORTED_FOR_MESSAGE_FORMAT/UNSUPPORTED_VERSION: done for that partition;
- UNKNOWN_TOPIC_OR_PARTITION: done when the metadata no longer has the partition
  (deleted topic), else retried (a leader may not know it yet);
- INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer producer epoch or
  coordinator owns the outcome; the job stops (Kafka cancels it too);
- anything else, or a failed RPC (leader moving, node down, a node that does not serve
  WriteTxnMarkers yet): retried, re-resolving targets from fresh metadata, with a
  backoff doubling from ``transaction.marker.retry.backoff.ms`` up to 1 s.

A partition whose topic the metadata does not know is done without asking anyone
(Kafka drops markers for deleted topics). Jobs run until done, failed or cancelled
(the shard moved away: its new owner re-sends from the log).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from odradek.group_shard import OFFSETS_TOPIC, offset_store_of
from odradek.metadata_cache import MetadataCache
from odradek.offset_store_client import OffsetStoreClient
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import transactions_pb2
from odradek.storage_client import StoragePool, StorageUnavailable
from odradek.transaction_log.records import TopicPartition, group_partitions
from odradek.transactions.shard import MarkerJob

log = logging.getLogger(__name__)

E = ErrorCode
MAX_BACKOFF_S = 1.0
REQUEST_TIMEOUT_MS = 30_000
WARN_EVERY_S = 10.0
_DONE = frozenset({E.NONE, E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})
_FATAL = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})

# (kind, node id): "storage" leaders and "offsets" stores.
Target = tuple[str, int]


@dataclass
class MarkerStats:
    requests: int = 0
    retries: int = 0
    delivered: int = 0


class MarkerSender:
    def __init__(
        self,
        metadata: MetadataCache,
        storage: StoragePool,
        offsets: OffsetStoreClient,
        backoff_ms: int,
    ) -> None:
        self.metadata = metadata
        self.storage = storage
        self.offsets = offsets
        self.backoff_s = max(0.001, backoff_ms / 1000.0)
        self.stats = MarkerStats()
        self._jobs: dict[int, set[asyncio.Task[None]]] = {}

    def start(
        self,
        shard: int,
        job: MarkerJob,
        on_done: Callable[[], None],
        on_failed: Callable[[int], None],
    ) -> None:
        """Deliver ``job`` in the background; exactly one of the callbacks runs unless
        the shard's jobs are cancelled first."""

        async def run() -> None:
            error = await self.deliver(job)
            if error:
                on_failed(error)
            else:
                on_done()

        task = asyncio.get_running_loop().create_task(run(), name=f"markers-{job.transactional_id}")
        tasks = self._jobs.setdefault(shard, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def cancel_shard(self, shard: int) -> None:
        tasks = list(self._jobs.pop(shard, ()))
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def close(self) -> None:
        for shard in list(self._jobs):
            await self.cancel_shard(shard)

    # -- one job ------------------------------------------------------------------------------
    async def deliver(self, job: MarkerJob) -> int:
        """0 once every partition has its marker, else the error that ended the job."""
        remaining = set(job.partitions)
        backoff = self.backoff_s
        started = last_warning = time.monotonic()
        last_errors: dict[TopicPartition, int] = {}
        while remaining:
            targets, unroutable = self._route(remaining)
            remaining -= {tp for tp in unroutable if self._deleted(tp)}
            results = await asyncio.gather(
                *(self._send(job, target, parts) for target, parts in targets.items())
            )
            for answer in results:
                for tp, error in answer.items():
                    if error in _FATAL:
                        log.warning(
                            "markers of %s for %s-%d refused: error %d",
                            job.transactional_id,
                            tp[0],
                            tp[1],
                            error,
                        )
                        return error
                    if error in _DONE or (
                        error == E.UNKNOWN_TOPIC_OR_PARTITION and self._deleted(tp)
                    ):
                        remaining.discard(tp)
                        self.stats.delivered += 1
                    else:
                        last_errors[tp] = error
            if not remaining:
                break
            self.stats.retries += 1
            now = time.monotonic()
            if now - last_warning >= WARN_EVERY_S:
                last_warning = now
                pending = {f"{t}-{p}": last_errors.get((t, p), -1) for t, p in sorted(remaining)}
                log.warning(
                    "markers of %s (producer %d) still pending after %.0fs: %s",
                    job.transactional_id,
                    job.producer_id,
                    now - started,
                    pending,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
        return E.NONE

    def _deleted(self, tp: TopicPartition) -> bool:
        topic = self.metadata.current.topics.get(tp[0])
        return topic is None or self.metadata.current.partition(tp[0], tp[1]) is None

    def _route(
        self, partitions: set[TopicPartition]
    ) -> tuple[dict[Target, list[TopicPartition]], list[TopicPartition]]:
        """Partitions by target, and those without one right now."""
        snapshot = self.metadata.current
        targets: dict[Target, list[TopicPartition]] = {}
        unroutable: list[TopicPartition] = []
        for tp in sorted(partitions):
            topic, index = tp
            if snapshot.partition(topic, index) is None:
                unroutable.append(tp)
                continue
            if topic == OFFSETS_TOPIC:
                node = offset_store_of(snapshot.raw, index)
                if node is None:
                    unroutable.append(tp)
                    continue
                targets.setdefault(("offsets", node.node_id), []).append(tp)
            else:
                part = snapshot.partition(topic, index)
                if part is None or part.leader < 0:
                    unroutable.append(tp)
                    continue
                targets.setdefault(("storage", part.leader), []).append(tp)
        return targets, unroutable

    async def _send(
        self, job: MarkerJob, target: Target, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        request = transactions_pb2.WriteTxnMarkersRequest(
            timeout_ms=REQUEST_TIMEOUT_MS,
            markers=[
                transactions_pb2.TxnMarker(
                    producer_id=job.producer_id,
                    producer_epoch=job.producer_epoch,
                    committed=job.committed,
                    coordinator_epoch=job.coordinator_epoch,
                    topics=[
                        transactions_pb2.TxnTopicPartitions(topic=t, partitions=ids)
                        for t, ids in group_partitions(partitions)
                    ],
                )
            ],
        )
        kind, node_id = target
        self.stats.requests += 1
        timeout = REQUEST_TIMEOUT_MS / 1000.0 + 5.0
        try:
            if kind == "offsets":
                stub = self.offsets.stub(partitions[0][1])
                if stub is None:
                    return dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE)
                response = await stub.WriteTxnMarkers(request, timeout=timeout)
            else:
                response = await self.storage.stub(node_id).WriteTxnMarkers(
                    request, timeout=timeout
                )
        except (grpc.aio.AioRpcError, StorageUnavailable) as exc:
            detail = exc.code() if isinstance(exc, grpc.aio.AioRpcError) else exc
            log.debug("WriteTxnMarkers to %s %d failed: %s", kind, node_id, detail)
            return dict.fromkeys(partitions, E.NETWORK_EXCEPTION)
        out: dict[TopicPartition, int] = dict.fromkeys(partitions, E.UNKNOWN_SERVER_ERROR)
        for result in response.markers:
            if result.producer_id != job.producer_id:
                continue
            for p in result.partitions:
                if (p.topic, p.partition) in out:
                    out[(p.topic, p.partition)] = p.error_code
        return out
