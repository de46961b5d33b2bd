"""One source partition copied to its target partition: the task that owns its state.

Per session (until an error): an idempotent producer id for this partition alone
(InitProducerId on the target), then a loop of read_committed Fetches from the
source leader; each fetched batch is stamped with the next sequence
(:func:`odradek.mirror.batches.stamp_producer`) and produced with acks=all, up to
``max.in.flight.requests.per.connection`` at once. The target keeps them in order and
drops a resent duplicate by its sequence (Kafka's idempotent producer, KIP-98), so
order per partition holds with several batches in flight. The small batches of one
fetch are merged first (:func:`odradek.mirror.batches.merge_batches`): when the
target is slower than the source's producer, the backlog one fetch brings back goes
out in one Produce instead of one per source batch, so the mirror catches up.

Acknowledgements are applied strictly in order: ``acked`` (the source offset after
the last batch the target holds) only moves over a batch once every earlier batch
is acknowledged, and only ``acked`` is committed. After any error the in-flight
batches are awaited, the session ends, and the next one resumes at ``acked`` with a
new producer id when a produce failed (its fate is unknown: at least once, never a
gap). ``syncs`` remembers (source offset, target offset, dense length) triples, one
per acknowledged batch and one per session start (the position and the target's
end offset then, which is where a re-sent batch lands): MirrorMaker 2's offset syncs,
from which consumer group offsets are translated.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TypeVar

from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.mirror import mirror_metrics as metrics
from odradek.mirror import wire
from odradek.mirror.batches import (
    AbortedTransactions,
    MirrorBatch,
    merge_batches,
    mirror_batches,
    stamp_producer,
)
from odradek.mirror.offset_store import decode_metadata, encode_metadata
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_SYNCS = 4096
BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class Tuning:
    max_wait_ms: int = 500
    min_bytes: int = 1
    partition_max_bytes: int = 4 << 20
    max_in_flight: int = 5
    timeout_ms: int = 30_000


class ProduceFailed(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"produce failed: {ErrorCode(code).name} {message}".strip())
        self.code = code


class PartitionMirror:
    def __init__(
        self,
        source_alias: str,
        source: KafkaClient,
        target: KafkaClient,
        source_tp: tuple[str, int],
        target_tp: tuple[str, int],
        tuning: Tuning,
        group_id: str,
        transactional_id: str | None = None,
    ) -> None:
        self.alias = source_alias
        self.source = source
        self.target = target
        self.source_tp = source_tp
        self.target_tp = target_tp
        self.tuning = tuning
        # The mirror's group on the target, where the source position is committed.
        self.group_id = group_id
        # Exactly once: records and source offset in one transaction of this id.
        self.transactional_id = transactional_id
        self.acked: int | None = None  # None: not read from the group yet
        self.target_next = -1
        self.high_watermark = -1
        self.records = 0
        self.bytes = 0
        self.syncs: deque[tuple[int, int, int]] = deque(maxlen=MAX_SYNCS)
        self.errors = 0
        self.last_error = ""
        self._labels = (source_alias, source_tp[0], str(source_tp[1]))
        self._producer: tuple[int, int] | None = None
        self._sequence = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"mirror-{self.alias}-{self.source_tp[0]}-{self.source_tp[1]}"
        )

    @property
    def exactly_once(self) -> bool:
        return self.transactional_id is not None

    async def stop(self, *, graceful: bool = True, timeout: float = 5.0) -> None:
        """Stop copying. Graceful (a revoked partition, a clean shutdown): no new fetch,
        the batches in flight are awaited (at least once) or the open transaction is
        finished (exactly once), so ``acked`` is what the target holds and may be
        committed; after ``timeout`` seconds, or when not graceful (a partition lost to
        another instance), the task is cancelled (an open transaction is then aborted by
        the next owner's InitProducerId)."""
        self._stopping = True
        if self._task is not None:
            if graceful:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(self._task), timeout)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.source.close()  # this partition's own source connections

    @property
    def lag(self) -> int:
        if self.high_watermark < 0 or self.acked is None:
            return 0
        return max(0, self.high_watermark - self.acked)

    def translate(self, source_offset: int) -> int | None:
        """The target offset a consumer at ``source_offset`` resumes from: exact inside a
        batch copied whole, else the last sync before it (never a gap; at worst a re-read
        of records the source skipped, such as transaction markers)."""
        syncs = list(self.syncs)
        i = bisect.bisect_right(syncs, (source_offset, 1 << 62, 1 << 62)) - 1
        if i < 0:
            return None
        source, target, dense = syncs[i]
        return target + min(source_offset - source, dense)

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                await self._session()
                failures = 0
            except asyncio.CancelledError:
                raise
            except (KafkaClientError, ProduceFailed, OSError) as exc:
                if self.exactly_once:
                    self._producer = None  # InitProducerId again: aborts the open transaction
                self.errors += 1
                self.last_error = str(exc)
                metrics.ERRORS.labels(self.alias, type(exc).__name__).inc()
                log.warning(
                    "%s %s-%d: %s (resuming at %s)",
                    self.alias,
                    *self.source_tp,
                    exc,
                    self.acked,
                )
                await asyncio.sleep(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])
                failures += 1
                with contextlib.suppress(KafkaClientError, OSError):
                    await self.source.leaders_for([self.source_tp], refresh=True)
                with contextlib.suppress(KafkaClientError, OSError):
                    await self.target.leaders_for([self.target_tp], refresh=True)

    # -- one session --------------------------------------------------------------------
    async def _leader(self, client: KafkaClient, tp: tuple[str, int]) -> int:
        leaders = await client.leaders_for([tp])
        if tp not in leaders:
            leaders = await client.leaders_for([tp], refresh=True)
        if tp not in leaders:
            raise KafkaClientError(f"{tp[0]}-{tp[1]} has no leader", ErrorCode.LEADER_NOT_AVAILABLE)
        return leaders[tp]

    async def _start_position(self, leader: int) -> int:
        found = await wire.list_offsets(self.source, leader, {self.source_tp: wire.EARLIEST})
        code, offset = found.get(self.source_tp, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1))
        if code:
            raise KafkaClientError(f"ListOffsets {self.source_tp}: {ErrorCode(code).name}", code)
        return max(0, offset)

    async def _fetch(self, source_leader: int, position: int) -> wire.FetchedPartition | None:
        """One read_committed Fetch of the source partition from ``position``."""
        answer = await wire.fetch(
            self.source,
            source_leader,
            {self.source_tp: position},
            max_wait_ms=self.tuning.max_wait_ms,
            min_bytes=self.tuning.min_bytes,
            max_bytes=self.tuning.partition_max_bytes,
            partition_max_bytes=self.tuning.partition_max_bytes,
        )
        return answer.get(self.source_tp)

    async def _resume(self, coordinator: int | None = None) -> None:
        """``acked`` from the position committed to the group on the target (the source
        offset to copy from, and in its metadata the target offset it maps to); read with
        require_stable, so a pending exactly-once commit is waited for."""
        if coordinator is None:
            coordinator = await wire.find_coordinator(self.target, self.group_id)
        committed = await wire.offset_fetch(
            self.target, coordinator, self.group_id, [self.target_tp]
        )
        if self.target_tp in committed:
            offset, metadata = committed[self.target_tp]
            source, target_offset = decode_metadata(metadata)
            if source == self.alias:
                self.acked = offset
                if target_offset >= 0:
                    self.syncs.append((offset, target_offset, 0))

    async def _session(self) -> None:
        if self.transactional_id is not None:
            await self._transactional_session(self.transactional_id, self.group_id)
            return
        if self._producer is None:
            self._producer = await wire.init_producer_id(self.target)
            self._sequence = 0
        if self.acked is None:
            await self._resume()
        source_leader = await self._leader(self.source, self.source_tp)
        if self.acked is None:
            self.acked = await self._start_position(source_leader)
        position = self.acked
        self.target_next = await self._target_end()
        self.syncs.append((position, self.target_next, 0))
        aborted = AbortedTransactions()
        in_flight: deque[tuple[MirrorBatch, asyncio.Task[tuple[int, int, str]] | None]] = deque()
        try:
            while not self._stopping:
                self._apply_acks(in_flight)
                while len(in_flight) >= self.tuning.max_in_flight:
                    await asyncio.wait(
                        {t for _, t in in_flight if t is not None},
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    self._apply_acks(in_flight)
                fetched = await self._fetch_applying_acks(source_leader, position, in_flight)
                if self._stopping:
                    break
                if fetched is None:
                    raise KafkaClientError(
                        "fetch answer without the partition", ErrorCode.UNKNOWN_SERVER_ERROR
                    )
                if fetched.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._drain(in_flight)
                    start = await self._start_position(source_leader)
                    log.warning(
                        "%s %s-%d: offset %d is out of range, resetting to %d (earliest)",
                        self.alias,
                        *self.source_tp,
                        position,
                        start,
                    )
                    self.acked = position = start
                    continue
                if fetched.error_code:
                    raise KafkaClientError(
                        f"fetch {self.source_tp[0]}-{self.source_tp[1]}: "
                        f"{ErrorCode(fetched.error_code).name}",
                        fetched.error_code,
                    )
                self.high_watermark = fetched.high_watermark
                aborted.add(fetched.aborted)
                for batch in merge_batches(mirror_batches(fetched.records, position, aborted)):
                    in_flight.append((batch, self._send(batch) if batch.data is not None else None))
                    position = batch.source_next
                metrics.LAG.labels(*self._labels).set(
                    max(0, self.high_watermark - (self.acked or 0))
                )
        finally:
            await self._drain(in_flight)

    async def _fetch_applying_acks(
        self,
        source_leader: int,
        position: int,
        in_flight: deque[tuple[MirrorBatch, asyncio.Task[tuple[int, int, str]] | None]],
    ) -> wire.FetchedPartition | None:
        """The next Fetch; while it long-polls, acknowledgements are applied as they
        arrive, so ``acked`` (what is committed) does not wait for new source records."""
        fetch = asyncio.get_running_loop().create_task(self._fetch(source_leader, position))
        try:
            while not fetch.done():
                pending = {t for _, t in in_flight if t is not None and not t.done()}
                await asyncio.wait({fetch, *pending}, return_when=asyncio.FIRST_COMPLETED)
                self._apply_acks(in_flight)
            return fetch.result()
        finally:
            if not fetch.done():
                fetch.cancel()
                with contextlib.suppress(asyncio.CancelledError, KafkaClientError, OSError):
                    await fetch

    async def _target_end(self) -> int:
        leader = await self._leader(self.target, self.target_tp)
        ends = await wire.list_offsets(self.target, leader, {self.target_tp: wire.LATEST})
        code, end = ends.get(self.target_tp, (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1))
        if code:
            raise KafkaClientError(f"ListOffsets {self.target_tp}: {ErrorCode(code).name}", code)
        return end

    async def _transactional_session(self, transactional_id: str, group_id: str) -> None:
        """Exactly once (KIP-98): per fetched chunk, one transaction holding the batches
        and the mirror's new source offset (TxnOffsetCommit). The position a session
        starts from is the committed one (read with require_stable), never a guess."""
        coordinator = await wire.find_coordinator(self.target, transactional_id, key_type=1)
        if self._producer is None:
            self._producer = await wire.init_producer_id(
                self.target, transactional_id, node_id=coordinator
            )
            self._sequence = 0
        txn = (transactional_id, *self._producer)
        group_coordinator = await wire.find_coordinator(self.target, group_id)
        await self._resume(group_coordinator)
        source_leader = await self._leader(self.source, self.source_tp)
        if self.acked is None:
            self.acked = await self._start_position(source_leader)
        position = self.acked
        self.target_next = await self._target_end()
        self.syncs.append((position, self.target_next, 0))
        aborted = AbortedTransactions()
        # When behind, the next chunk is fetched while the current transaction is
        # produced and committed, so the source and the target work at the same time.
        prefetch: asyncio.Task[wire.FetchedPartition | None] | None = None
        try:
            while not self._stopping:
                fetched = await (prefetch or self._fetch(source_leader, position))
                prefetch = None
                if self._stopping:
                    break
                position, prefetch = await self._one_transaction(
                    fetched, position, source_leader, aborted, coordinator, group_coordinator, txn
                )
        finally:
            if prefetch is not None:
                await _cancelled(prefetch)

    async def _one_transaction(
        self,
        fetched: wire.FetchedPartition | None,
        position: int,
        source_leader: int,
        aborted: AbortedTransactions,
        coordinator: int,
        group_coordinator: int,
        txn: tuple[str, int, int],
    ) -> tuple[int, asyncio.Task[wire.FetchedPartition | None] | None]:
        """The fetched chunk's batches and the new source position in one transaction;
        returns the position after it and the Fetch of the next chunk, already sent."""
        transactional_id, group_id = txn[0], self.group_id
        if fetched is None or fetched.error_code:
            code = ErrorCode.UNKNOWN_SERVER_ERROR if fetched is None else fetched.error_code
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                return await self._start_position(source_leader), None
            raise KafkaClientError(f"fetch {self.source_tp}: {ErrorCode(code).name}", code)
        self.high_watermark = fetched.high_watermark
        aborted.add(fetched.aborted)
        batches = merge_batches(mirror_batches(fetched.records, position, aborted))
        if not batches:
            return position, None
        prefetch = None
        if fetched.high_watermark > batches[-1].source_next:
            # Behind: the next chunk is already there; fetch it during this transaction.
            # Caught up, the Fetch after the commit takes everything that arrived
            # meanwhile into the next transaction instead (a prefetch would return
            # early with the first record and leave the rest a transaction later).
            prefetch = asyncio.get_running_loop().create_task(
                self._fetch(source_leader, batches[-1].source_next)
            )
        committed_position = self.acked
        adding_offsets: asyncio.Task[None] | None = None
        in_flight: deque[tuple[MirrorBatch, asyncio.Task[tuple[int, int, str]] | None]]
        in_flight = deque()
        try:
            # AddOffsetsToTxn does not depend on the records: sent alongside them.
            adding_offsets = asyncio.get_running_loop().create_task(
                wire.add_offsets_to_txn(self.target, coordinator, txn, group_id)
            )
            if any(b.data is not None for b in batches):
                await wire.add_partitions_to_txn(self.target, coordinator, txn, self.target_tp)
            for batch in batches:
                task = None
                if batch.data is not None:
                    task = self._send(batch, transactional_id)
                in_flight.append((batch, task))
            tasks = [t for _, t in in_flight if t is not None]
            if tasks:
                await asyncio.wait(tasks)
            self._apply_acks(in_flight)
            position = batches[-1].source_next
            await adding_offsets
            await wire.txn_offset_commit(
                self.target,
                group_coordinator,
                txn,
                group_id,
                {self.target_tp: (position, encode_metadata(self.alias, self.target_next))},
            )
            await wire.end_txn(self.target, coordinator, txn, commit=True)
        except BaseException:
            self.acked = committed_position
            for pending in (adding_offsets, prefetch):
                if pending is not None:
                    await _cancelled(pending)  # the session's error is what counts
            raise
        self.acked = position
        metrics.LAG.labels(*self._labels).set(max(0, self.high_watermark - position))
        return position, prefetch

    def _send(
        self, batch: MirrorBatch, transactional_id: str | None = None
    ) -> asyncio.Task[tuple[int, int, str]]:
        assert batch.data is not None and self._producer is not None
        stamp_producer(
            batch.data,
            self._producer[0],
            self._producer[1],
            self._sequence,
            transactional=transactional_id is not None,
        )
        self._sequence = (self._sequence + batch.record_count) & 0x7FFFFFFF
        return asyncio.get_running_loop().create_task(self._produce(batch, transactional_id))

    async def _produce(
        self, batch: MirrorBatch, transactional_id: str | None = None
    ) -> tuple[int, int, str]:
        assert batch.data is not None
        leader = await self._leader(self.target, self.target_tp)
        result = await wire.produce(
            self.target,
            leader,
            self.target_tp,
            batch.data,
            timeout_ms=self.tuning.timeout_ms,
            transactional_id=transactional_id,
        )
        if result[0] in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER) and batch.max_timestamp >= 0:
            latency = max(0.0, time.time() - batch.max_timestamp / 1000.0)
            metrics.LATENCY.labels(*self._labels).set(latency * 1000.0)
            metrics.LATENCY_HISTOGRAM.labels(self.alias).observe(latency)
        return result

    def _apply_acks(
        self,
        in_flight: deque[tuple[MirrorBatch, asyncio.Task[tuple[int, int, str]] | None]],
    ) -> None:
        """Move ``acked`` over every leading batch the target acknowledged."""
        while in_flight:
            batch, task = in_flight[0]
            if task is not None:
                if not task.done():
                    return
                try:
                    code, base_offset, message = task.result()
                except BaseException:
                    self._producer = None
                    raise
                if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                    code = 0
                if code:
                    self._producer = None  # unknown fate of what follows: new producer id
                    raise ProduceFailed(code, message)
                if base_offset >= 0:
                    self.target_next = base_offset + batch.record_count
                    if batch.dense:
                        first = batch.source_next - batch.record_count
                        self.syncs.append((first, base_offset, batch.record_count))
                    else:
                        self.syncs.append((batch.source_next, self.target_next, 0))
                self.records += batch.record_count
                size = len(batch.data or b"")
                self.bytes += size
                metrics.RECORDS.labels(*self._labels).inc(batch.record_count)
                metrics.BYTES.labels(*self._labels).inc(size)
            elif self.target_next >= 0:
                self.syncs.append((batch.source_next, self.target_next, 0))
            in_flight.popleft()
            self.acked = batch.source_next

    async def _drain(
        self, in_flight: deque[tuple[MirrorBatch, asyncio.Task[tuple[int, int, str]] | None]]
    ) -> None:
        """Wait for what was sent, keep the acknowledged prefix, forget the rest."""
        tasks = [t for _, t in in_flight if t is not None]
        if tasks:
            await asyncio.wait(tasks)
        try:
            self._apply_acks(in_flight)
        except (KafkaClientError, ProduceFailed, OSError) as exc:
            self._producer = None
            log.debug("%s %s-%d: in-flight produce failed: %s", self.alias, *self.source_tp, exc)
        if in_flight:
            self._producer = None
        in_flight.clear()


async def _cancelled(task: asyncio.Task[T]) -> None:
    """Cancel ``task`` unless done, and retrieve its outcome (nothing left unobserved)."""
    if not task.done():
        task.cancel()
    with contextlib.suppress(BaseException):
        await task
