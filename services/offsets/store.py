"""The offset store's shards: ownership, loading, and the operations on them.

Each owned shard is a ``__consumer_offsets`` partition with a :class:`ShardCache`
(loaded by replaying the partition) and a :class:`PartitionAppender`. A shard is
``loading`` until the replay reaches the high watermark (requests get
COORDINATOR_LOAD_IN_PROGRESS), then ``active``. Writes answer only after the storage
node acknowledged them with acks=-1; the cache changes just before the answer, in
log order. Coordinators' writes carry their shard epoch: one older than what the
metadata says is fenced with NOT_COORDINATOR.

Transactional offset commits (``CommitOffsets`` with ``transactional``) are appended
as the producer's transactional batch and kept pending in the cache; the transaction
coordinator's ``WriteTxnMarkers`` for the shard appends the marker through the
storage leader (:mod:`odradek.offsets.txn_markers`), in its turn among the shard's
writes, and then materialises (COMMIT) or drops (ABORT) them. Loading a shard
replays transactional batches and markers the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.consumer_offsets.group_proto import group_from_proto, group_to_proto
from odradek.consumer_offsets.records import (
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from odradek.group_shard import OFFSETS_TOPIC, coordinator_of, offset_store_of, shard_of
from odradek.internal_topic.partition_log import (
    ApplyRecord,
    LoadError,
    PartitionAppender,
    Record,
    TxnProducer,
    read_partition,
)
from odradek.metadata_cache import MetadataCache
from odradek.offsets.append_errors import map_append_error
from odradek.offsets.cache import ShardCache
from odradek.offsets.txn_markers import marker_commits, write_marker
from odradek.protocol.errors import ErrorCode
from odradek.records.record import DecodedBatch, DecodedRecord
from odradek.rpc.v1 import offsets_pb2, transactions_pb2
from odradek.storage_client import StoragePool

log = logging.getLogger(__name__)


def replayer(cache: ShardCache) -> ApplyRecord:
    """Replay into ``cache``: offsets and groups; a transactional batch's offsets stay
    pending until its producer's marker (a control batch) commits or aborts them."""

    def apply(batch: DecodedBatch, record: DecodedRecord) -> None:
        if batch.is_control:
            committed = marker_commits(record)
            if committed is not None:
                cache.apply_marker(batch.producer_id, committed)
        elif batch.is_transactional:
            cache.apply_record(record.key, record.value, batch.producer_id)
        else:
            cache.apply_record(record.key, record.value)

    return apply


class Status(Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass
class Shard:
    partition: int
    appender: PartitionAppender
    cache: ShardCache = field(default_factory=ShardCache)
    status: Status = Status.LOADING
    loader: asyncio.Task[None] | None = None


@dataclass(slots=True)
class StoreSettings:
    commit_timeout_ms: int = BROKER_CONFIGS.int("offsets.commit.timeout.ms")
    retention_ms: int = BROKER_CONFIGS.int("offsets.retention.minutes") * 60_000


class OffsetStore:
    def __init__(
        self, node_id: int, metadata: MetadataCache, storage: StoragePool, settings: StoreSettings
    ) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.storage = storage
        self.settings = settings
        self.shards: dict[int, Shard] = {}
        # Highest coordinator epoch seen per shard (LoadShard and writes): fences a
        # previous owner even before our own metadata shows the move.
        self.epochs: dict[int, int] = {}
        self.commits = 0
        # Hooks for metrics: (records appended, seconds) and (offsets committed).
        self.on_append: Callable[[int, float], None] | None = None
        self.on_commit: Callable[[int], None] | None = None

    # -- ownership --------------------------------------------------------------------------
    def owned(self) -> set[int]:
        raw = self.metadata.current.raw
        topic = self.metadata.current.topics.get("__consumer_offsets")
        if topic is None:
            return set()
        out = set()
        for p in topic.partitions:
            node = offset_store_of(raw, p.partition)
            if node is not None and node.node_id == self.node_id:
                out.add(p.partition)
        return out

    async def reconcile(self) -> None:
        owned = self.owned()
        for partition in [p for p in self.shards if p not in owned]:
            shard = self.shards.pop(partition)
            log.info("offsets shard %d no longer ours", partition)
            await self._close(shard)
        for partition in sorted(owned - set(self.shards)):
            self._open(partition)

    def _open(self, partition: int) -> None:
        appender = PartitionAppender(
            self.storage, OFFSETS_TOPIC, partition, self.settings.commit_timeout_ms
        )
        appender.on_append = self.on_append
        shard = Shard(partition, appender)
        self.shards[partition] = shard
        shard.loader = asyncio.get_running_loop().create_task(
            self._load(shard), name=f"offsets-load-{partition}"
        )

    async def _load(self, shard: Shard) -> None:
        backoff = 0.05
        while True:
            cache = ShardCache()
            try:
                started = time.perf_counter()
                n = await read_partition(
                    self.storage, OFFSETS_TOPIC, shard.partition, replayer(cache)
                )
            except LoadError as exc:
                log.debug("offsets shard %d not loadable yet: %s", shard.partition, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("offsets shard %d: load failed", shard.partition)
                await asyncio.sleep(1.0)
                continue
            shard.cache = cache
            shard.status = Status.ACTIVE
            log.info(
                "offsets shard %d loaded: %d records, %d groups, %d offsets in %.3fs",
                shard.partition,
                n,
                len(cache.group_ids()),
                cache.count(),
                time.perf_counter() - started,
            )
            return

    async def _close(self, shard: Shard) -> None:
        if shard.loader is not None:
            shard.loader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await shard.loader
        await shard.appender.close()

    async def close(self) -> None:
        shards = list(self.shards.values())
        self.shards.clear()
        await asyncio.gather(*(self._close(s) for s in shards))

    def _shard(self, partition: int) -> tuple[Shard | None, int]:
        shard = self.shards.get(partition)
        if shard is None:
            return None, ErrorCode.NOT_COORDINATOR
        if shard.status is not Status.ACTIVE:
            return None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return shard, ErrorCode.NONE

    def _shard_for_group(self, group_id: str) -> tuple[Shard | None, int]:
        return self._shard(shard_of(self.metadata.current.raw, group_id))

    def _fenced(self, partition: int, coordinator_id: int, epoch: int) -> bool:
        """A write from a coordinator that no longer owns the shard: the metadata, or a
        newer owner that already loaded the shard from us, shows a higher epoch."""
        owner, current = coordinator_of(self.metadata.current.raw, partition)
        newest = max(current, self.epochs.get(partition, 0))
        if epoch > newest:
            self.epochs[partition] = epoch
        return newest > epoch or (current == epoch and owner not in (-1, coordinator_id))

    # -- commits ----------------------------------------------------------------------------
    async def commit(
        self, request: offsets_pb2.CommitOffsetsRequest
    ) -> offsets_pb2.CommitOffsetsResponse:
        partition = shard_of(self.metadata.current.raw, request.group_id)
        shard, error = self._shard(partition)
        if shard is None:
            return offsets_pb2.CommitOffsetsResponse(error_code=error)
        if request.coordinator_id and self._fenced(
            partition, request.coordinator_id, request.coordinator_epoch
        ):
            return offsets_pb2.CommitOffsetsResponse(error_code=ErrorCode.NOT_COORDINATOR)
        now = int(time.time() * 1000)
        expire = now + request.retention_time_ms if request.retention_time_ms > 0 else -1
        group = request.group_id
        values: list[tuple[str, int, OffsetValue]] = []
        records: list[Record] = []
        for p in request.partitions:
            value = OffsetValue(
                offset=p.offset,
                metadata=p.metadata if p.HasField("metadata") else "",
                commit_timestamp=now,
                leader_epoch=p.leader_epoch,
                expire_timestamp=expire,
            )
            values.append((p.topic, p.partition, value))
            records.append(
                (encode_offset_key(group, p.topic, p.partition), encode_offset_value(value))
            )
        if not records:
            return offsets_pb2.CommitOffsetsResponse()
        cache = shard.cache
        producer = (
            TxnProducer(request.transactional_id, request.producer_id, request.producer_epoch)
            if request.transactional
            else None
        )

        def durable() -> None:
            for topic, index, value in values:
                if producer is not None:
                    cache.put_pending(producer.producer_id, group, topic, index, value)
                else:
                    cache.put_offset(group, topic, index, value)

        code = await shard.appender.append(records, durable, producer=producer)
        error = map_append_error(code) if code else ErrorCode.NONE
        if not error:
            self.commits += len(records)
            if self.on_commit is not None:
                self.on_commit(len(records))
        return offsets_pb2.CommitOffsetsResponse(
            partitions=[
                offsets_pb2.PartitionError(topic=t, partition=i, error_code=error)
                for t, i, _ in values
            ]
        )

    async def delete_offsets(
        self, request: offsets_pb2.DeleteOffsetsRequest
    ) -> offsets_pb2.DeleteOffsetsResponse:
        partition = shard_of(self.metadata.current.raw, request.group_id)
        shard, error = self._shard(partition)
        if shard is None:
            return offsets_pb2.DeleteOffsetsResponse(error_code=error)
        if request.coordinator_id and self._fenced(
            partition, request.coordinator_id, request.coordinator_epoch
        ):
            return offsets_pb2.DeleteOffsetsResponse(error_code=ErrorCode.NOT_COORDINATOR)
        group = request.group_id
        if group not in shard.cache.group_ids():
            return offsets_pb2.DeleteOffsetsResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)
        targets = [
            (p.topic, p.partition)
            for p in request.partitions
            if shard.cache.get(group, p.topic, p.partition) is not None
        ]
        code: int = ErrorCode.NONE
        if targets:
            cache = shard.cache

            def durable() -> None:
                for topic, index in targets:
                    cache.remove_offset(group, topic, index)

            code = await shard.appender.append(
                [(encode_offset_key(group, t, i), None) for t, i in targets], durable
            )
            code = map_append_error(code) if code else ErrorCode.NONE
        return offsets_pb2.DeleteOffsetsResponse(
            partitions=[
                offsets_pb2.PartitionError(topic=p.topic, partition=p.partition, error_code=code)
                for p in request.partitions
            ]
        )

    # -- reads ------------------------------------------------------------------------------
    def fetch(self, request: offsets_pb2.FetchOffsetsRequest) -> offsets_pb2.FetchOffsetsResponse:
        out = offsets_pb2.FetchOffsetsResponse()
        for g in request.groups:
            result = out.groups.add(group_id=g.group_id)
            shard, error = self._shard_for_group(g.group_id)
            if shard is None:
                result.error_code = error
                continue
            committed = shard.cache.committed(g.group_id)
            if g.all_topics:
                wanted: Iterable[tuple[str, int]] = sorted(committed)
            else:
                wanted = [(tp.topic, tp.partition) for tp in g.partitions]
            for topic, index in wanted:
                value = committed.get((topic, index))
                entry = result.offsets.add(topic=topic, partition=index)
                if request.require_stable and shard.cache.has_pending(g.group_id, topic, index):
                    # KIP-447: a transaction holds a commit here; the reader retries.
                    entry.offset = -1
                    entry.leader_epoch = -1
                    entry.metadata = ""
                    entry.commit_timestamp = -1
                    entry.error_code = ErrorCode.UNSTABLE_OFFSET_COMMIT
                elif value is None:
                    entry.offset = -1
                    entry.leader_epoch = -1
                    entry.metadata = ""
                    entry.commit_timestamp = -1
                else:
                    entry.offset = value.offset
                    entry.leader_epoch = value.leader_epoch
                    entry.metadata = value.metadata
                    entry.commit_timestamp = value.commit_timestamp
        return out

    # -- transaction markers ----------------------------------------------------------------
    async def write_txn_markers(
        self, request: transactions_pb2.WriteTxnMarkersRequest
    ) -> transactions_pb2.WriteTxnMarkersResponse:
        """Kafka's WriteTxnMarkers for ``__consumer_offsets`` partitions: each marker is
        appended through the partition's storage leader in its turn among the shard's
        writes, then the producer's pending offsets are materialised or dropped. Errors
        are what the transaction coordinator retries on (Kafka's KafkaApis turns the
        group coordinator's NOT_COORDINATOR/COORDINATOR_LOAD_IN_PROGRESS into
        NOT_LEADER_OR_FOLLOWER); an unknown partition is UNKNOWN_TOPIC_OR_PARTITION."""
        topic = self.metadata.current.topics.get(OFFSETS_TOPIC)
        count = len(topic.partitions) if topic is not None else 0
        timeout_ms = request.timeout_ms or self.settings.commit_timeout_ms
        out = transactions_pb2.WriteTxnMarkersResponse()

        async def one(marker: transactions_pb2.TxnMarker, name: str, partition: int) -> int:
            if name != OFFSETS_TOPIC or not 0 <= partition < count:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            shard = self.shards.get(partition)
            if shard is None or shard.status is not Status.ACTIVE:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            cache = shard.cache

            def settle() -> None:
                n = cache.apply_marker(marker.producer_id, marker.committed)
                log.debug(
                    "shard %d: %s of producer %d settled %d pending offsets",
                    partition,
                    "commit" if marker.committed else "abort",
                    marker.producer_id,
                    n,
                )

            code = await shard.appender.write(
                lambda: write_marker(self.storage, partition, marker, timeout_ms), settle
            )
            return ErrorCode.NOT_LEADER_OR_FOLLOWER if code == ErrorCode.NOT_COORDINATOR else code

        for marker in request.markers:
            targets = [(t.topic, p) for t in marker.topics for p in t.partitions]
            codes = await asyncio.gather(*(one(marker, name, p) for name, p in targets))
            out.markers.add(
                producer_id=marker.producer_id,
                partitions=[
                    transactions_pb2.TxnPartitionError(topic=name, partition=p, error_code=code)
                    for (name, p), code in zip(targets, codes, strict=True)
                ],
            )
        return out

    # -- group metadata ---------------------------------------------------------------------
    async def store_groups(self, request: offsets_pb2.StoreGroupsRequest) -> int:
        shard, error = self._shard(request.shard)
        if shard is None:
            return error
        if self._fenced(request.shard, request.coordinator_id, request.coordinator_epoch):
            return ErrorCode.NOT_COORDINATOR
        cache = shard.cache
        records: list[Record] = []
        updates = []
        for g in request.groups:
            value = group_from_proto(g)
            records.append((encode_group_key(g.group_id), encode_group_value(value)))
            updates.append((g.group_id, value))
        raw: list[tuple[bytes, bytes | None]] = [
            (bytes(r.key), bytes(r.value) if r.HasField("value") else None) for r in request.records
        ]
        records.extend(raw)
        deleted: list[tuple[str, list[OffsetKey]]] = []
        for group in request.deleted_groups:
            keys = [OffsetKey(group, t, p) for (t, p) in cache.committed(group)]
            records.extend((encode_offset_key(k.group, k.topic, k.partition), None) for k in keys)
            consumer_keys = list(cache.consumer_records.get(group, {}))
            records.extend((k, None) for k in consumer_keys)
            raw.extend((k, None) for k in consumer_keys)
            records.append((encode_group_key(group), None))
            deleted.append((group, keys))
        if not records:
            return ErrorCode.NONE

        def durable() -> None:
            for group_id, value in updates:
                cache.put_group(group_id, value)
            for key, record_value in raw:
                # Consumer group records, and classic group metadata written raw when a
                # group changes type (KIP-848 online migration).
                cache.apply_record(key, record_value)
            for group_id, keys in deleted:
                for k in keys:
                    cache.remove_offset(k.group, k.topic, k.partition)
                cache.put_group(group_id, None)

        code = await shard.appender.append(records, durable)
        return map_append_error(code, for_group=True) if code else ErrorCode.NONE

    def load_shard(self, request: offsets_pb2.LoadShardRequest) -> offsets_pb2.LoadShardResponse:
        shard, error = self._shard(request.shard)
        if shard is None:
            return offsets_pb2.LoadShardResponse(error_code=error)
        if self._fenced(request.shard, request.coordinator_id, request.coordinator_epoch):
            return offsets_pb2.LoadShardResponse(error_code=ErrorCode.NOT_COORDINATOR)
        cache = shard.cache
        return offsets_pb2.LoadShardResponse(
            groups=[group_to_proto(g, v) for g, v in sorted(cache.groups.items())],
            offset_groups=cache.offset_only_groups(),
            records=[
                offsets_pb2.CoordinatorRecord(key=k, value=v)
                for _, records in sorted(cache.consumer_records.items())
                for k, v in records.items()
            ],
        )

    # -- retention --------------------------------------------------------------------------
    async def expire(self, now_ms: int | None = None) -> int:
        """Tombstone expired offsets (and Empty groups left without any); returns how
        many offsets expired."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        total = 0
        for shard in list(self.shards.values()):
            if shard.status is not Status.ACTIVE:
                continue
            cache = shard.cache
            gone = cache.expired(now, self.settings.retention_ms)
            if not gone.offsets and not gone.groups:
                continue
            records: list[Record] = [
                (encode_offset_key(k.group, k.topic, k.partition), None) for k in gone.offsets
            ]
            records.extend((encode_group_key(g), None) for g in gone.groups)

            def durable(cache: ShardCache = cache, gone: object = gone) -> None:
                for k in gone.offsets:  # type: ignore[attr-defined]
                    cache.remove_offset(k.group, k.topic, k.partition)
                for g in gone.groups:  # type: ignore[attr-defined]
                    cache.put_group(g, None)

            code = await shard.appender.append(records, durable)
            if code:
                log.warning("expiring offsets in shard %d failed: error %d", shard.partition, code)
            else:
                total += len(gone.offsets)
                log.info(
                    "shard %d: expired %d offsets, removed %d empty groups",
                    shard.partition,
                    len(gone.offsets),
                    len(gone.groups),
                )
        return total
