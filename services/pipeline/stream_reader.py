"""``spark.readStream.format("odradek")``: micro-batches over per-partition offsets.

The stream offset is Spark's Kafka JSON (``{"topic": {"0": 23}}``), so Spark's
checkpoint holds exactly which records each batch covered and a restarted query
replays a batch over the same ranges. ``latestOffset`` asks ListOffsets for the
high watermarks on every trigger, then applies ``maxOffsetsPerTrigger`` (or the
engine's limit) in proportion to each partition's lag.

Partitions that appear after the query started (new topics matching a pattern,
CreatePartitions) join the offsets at their earliest offset in the next batch and
are read from then on: their start is written to the checkpoint before any of
their records are read, so a replay never has to guess where they began.

Data loss (``failOnDataLoss``): a partition that vanished, or whose log now ends
before the offset the query had reached, fails the query with a message naming
it; with ``failOnDataLoss=false`` it is dropped or continues from the new end.
Offsets deleted below the log start are found by the executors (see
``range_reader``).

With ``startingOffsets=latest`` (the streaming default) the first batch's start is
resolved when the query first starts; if the query dies before that batch commits,
Spark asks again on restart and "latest" may have moved. Use ``earliest`` or JSON
offsets where the first batch must be exact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.pipeline.offset_lookup import OffsetLookup
from odradek.pipeline.options import SourceOptions
from odradek.pipeline.range_reader import DataLossError, data_loss_message
from odradek.pipeline.scan import RangePartition, ScanSettings
from odradek.pipeline.spark_offsets import (
    PartitionOffsets,
    TopicPartition,
    describe,
    from_json,
    plan_ranges,
    rate_limit,
    to_json,
)

log = logging.getLogger(__name__)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.scan = ScanSettings.create(opts, schema, "executor")
        self._lookup: OffsetLookup | None = None
        self._target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._last_batch_at = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        # Executors get the reader pickled; the admin client stays on the driver.
        state = dict(self.__dict__)
        state["_lookup"] = None
        return state

    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.opts)
        return self._lookup

    # -- offsets ----------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = self.lookup.partitions()
        offsets = self.lookup.resolve(
            self.opts.starting,
            tps,
            option="startingOffsets",
            timestamp_strategy=self.opts.timestamp_strategy,
        )
        return to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an ``availableNow`` run: the high watermarks as of now."""
        self._target = self.lookup.latest(self.lookup.partitions(missing_ok=True))

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        tps = self.lookup.partitions(missing_ok=True)
        high = self.lookup.latest(tps)
        self._latest = high
        self._check_vanished(begin, high)

        target = self._target
        known = [tp for tp in tps if tp in begin]
        new = [tp for tp in tps if tp not in begin and (target is None or tp in target)]
        bound: PartitionOffsets = {}
        end: PartitionOffsets = {}
        for tp in known:
            cap = high[tp] if target is None else min(high[tp], target.get(tp, begin[tp]))
            if high[tp] < begin[tp]:
                end[tp] = self._moved_back(tp, begin[tp], high[tp])
            else:
                bound[tp] = max(cap, begin[tp])
        if self._too_few(begin, bound, target is not None):
            return start  # Spark's minOffsetsPerTrigger: no batch until enough or too late
        if isinstance(limit, ReadMaxRows):
            end.update(rate_limit({tp: begin[tp] for tp in bound}, bound, limit.max_rows))
        else:
            end.update(bound)
        if new:
            end.update(self.lookup.earliest(new))
            log.info("new partitions %s join at their earliest offsets", sorted(map(describe, new)))
        return to_json(end)

    def _too_few(
        self, begin: PartitionOffsets, bound: PartitionOffsets, available_now: bool
    ) -> bool:
        """Whether ``minOffsetsPerTrigger`` holds this trigger back: fewer new offsets
        than asked for, and less than ``maxTriggerDelay`` since the last batch ran.
        ``availableNow`` runs ignore it (they must finish), as in Spark."""
        least = self.opts.min_offsets_per_trigger
        now = time.monotonic()
        if least is None or available_now:
            self._last_batch_at = now
            return False
        waiting = sum(max(0, bound[tp] - begin[tp]) for tp in bound)
        overdue = (now - self._last_batch_at) * 1000 >= self.opts.max_trigger_delay_ms
        if waiting >= least or (overdue and waiting > 0):
            self._last_batch_at = now
            return False
        return True

    def _check_vanished(self, begin: PartitionOffsets, high: PartitionOffsets) -> None:
        gone = sorted(tp for tp in begin if tp not in high)
        if not gone:
            return
        names = ", ".join(map(describe, gone))
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                data_loss_message(
                    gone[0][0],
                    gone[0][1],
                    f"Partitions {names} are gone (topic deleted?) before the query read "
                    "all of their records",
                )
            )
        log.warning("partitions %s are gone; the query stops reading them", names)

    def _moved_back(self, tp: TopicPartition, begin: int, high: int) -> int:
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                data_loss_message(
                    tp[0],
                    tp[1],
                    f"The log now ends at offset {high} but the query had reached {begin} "
                    "(topic re-created or truncated)",
                )
            )
        log.warning(
            "%s moved back from %d to %d; continuing from %d", describe(tp), begin, high, high
        )
        return high

    # -- planning and reading ---------------------------------------------------

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        # Ranges that run backwards were reported in latestOffset; they read nothing.
        ranges = plan_ranges(
            from_json(start),
            from_json(end),
            min_partitions=self.opts.min_partitions,
            max_records_per_partition=self.opts.max_records_per_partition,
        )
        return [RangePartition.of(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.scan.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None
