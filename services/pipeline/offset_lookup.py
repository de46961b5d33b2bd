"""Driver-side questions to the cluster: which partitions a subscription covers and
what their earliest, latest or by-timestamp offsets are (Metadata and ListOffsets
through a confluent-kafka AdminClient, one batched ListOffsets per question).

The first question waits for ``bootstrap_check``, so a wrong address fails in seconds
with its reason. Transient failures are retried ``fetchOffset.numRetries`` times,
``fetchOffset.retryIntervalMs`` apart, as Spark's offset reader does. A ``subscribe``
topic or ``assign`` partition that does not exist fails with its name, as Spark's
(AdminClient-based) offset reader does; a ``subscribePattern`` may match nothing yet.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.pipeline.bootstrap_check import check_bootstrap
from odradek.pipeline.client_config import admin_config, is_read_committed
from odradek.pipeline.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    OptionError,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
)
from odradek.pipeline.options import (
    OffsetSpec as SourceOffsetSpec,
)
from odradek.pipeline.spark_offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    TopicPartition,
    describe,
)
from odradek.pipeline.topics import metadata_client

T = TypeVar("T")

# Topics a pattern never matches, as the Java consumer's exclude.internal.topics does.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class UnknownTopicError(ValueError):
    """A topic or partition named in ``subscribe``/``assign`` does not exist."""


class OffsetLookup:
    """One set of clients for a reader's lifetime (a stream reader asks every trigger)."""

    def __init__(self, opts: SourceOptions, *, timeout_s: float = 30.0):
        self._opts = opts
        conf = admin_config(opts)
        self._retries = opts.fetch_offset_retries
        self._interval_s = opts.fetch_offset_retry_interval_ms / 1000.0
        check_bootstrap(conf, (self._retries + 1) * self._interval_s, "source")
        self._admin = AdminClient(conf)
        # Metadata through a consumer-type client: asking an admin client about a
        # missing topic would auto-create it.
        self._meta = metadata_client(conf)
        self._timeout = timeout_s
        self._isolation = (
            IsolationLevel.READ_COMMITTED
            if is_read_committed(opts)
            else IsolationLevel.READ_UNCOMMITTED
        )

    def close(self) -> None:
        self._meta.close()

    def _retry(self, what: str, call: Callable[[], T]) -> T:
        """Spark's fetchOffset.numRetries: transient metadata errors are retried."""
        for attempt in range(self._retries + 1):
            try:
                return call()
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                retriable = isinstance(err, KafkaError) and (
                    err.retriable() or err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
                )
                if not retriable or attempt == self._retries:
                    raise RuntimeError(
                        f"{what} failed after {attempt + 1} attempt(s) "
                        f"(kafka.bootstrap.servers={self._opts.bootstrap_servers}): {exc}"
                    ) from exc
                time.sleep(self._interval_s)
        raise AssertionError("unreachable")

    # -- partitions --------------------------------------------------------------

    def partitions(
        self, subscription: Subscription | None = None, *, missing_ok: bool = False
    ) -> list[TopicPartition]:
        """Partitions the subscription covers right now, sorted. A named topic or assigned
        partition that does not exist raises ``UnknownTopicError`` unless ``missing_ok``
        (a running query, where a vanished topic is data loss, judged by the caller)."""
        sub = subscription or self._opts.subscription
        if sub.kind == "assign":
            if not missing_ok:
                self._check_assigned(sub.partitions)
            return sorted(sub.partitions)
        if sub.kind == "subscribe":
            out: list[TopicPartition] = []
            for topic in sub.topics:
                found = self._topic_partitions(topic)
                if not found and not missing_ok:
                    raise UnknownTopicError(
                        f"Topic {topic} (option 'subscribe') does not exist on "
                        f"{self._opts.bootstrap_servers}"
                    )
                out += found
            return sorted(out)
        pattern = re.compile(sub.pattern)
        md = self._retry("Metadata", lambda: self._meta.list_topics(timeout=self._timeout))
        return sorted(
            (name, p)
            for name, tmd in md.topics.items()
            if name not in INTERNAL_TOPICS and tmd.error is None and pattern.fullmatch(name)
            for p in tmd.partitions
        )

    def _check_assigned(self, partitions: Iterable[TopicPartition]) -> None:
        for topic in sorted({t for t, _ in partitions}):
            have = {p for _, p in self._topic_partitions(topic)}
            wanted = sorted(p for t, p in partitions if t == topic)
            if not have:
                raise UnknownTopicError(
                    f"Topic {topic} (option 'assign') does not exist on "
                    f"{self._opts.bootstrap_servers}"
                )
            missing = [p for p in wanted if p not in have]
            if missing:
                raise UnknownTopicError(
                    f"Partition(s) {', '.join(f'{topic}-{p}' for p in missing)} (option "
                    f"'assign') do not exist: {topic} has {len(have)} partition(s)"
                )

    def _topic_partitions(self, topic: str) -> list[TopicPartition]:
        # One topic per request: no metadata for the whole cluster just to find a few.
        md = self._retry(
            f"Metadata for {topic}",
            lambda: self._meta.list_topics(topic=topic, timeout=self._timeout),
        )
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            return []
        return [(topic, p) for p in sorted(tmd.partitions)]

    # -- offsets -------------------------------------------------------------------

    def _list_offsets(
        self, specs: Mapping[TopicPartition, OffsetSpec]
    ) -> dict[TopicPartition, int]:
        if not specs:
            return {}

        def call() -> dict[TopicPartition, int]:
            futures = self._admin.list_offsets(
                {KafkaTopicPartition(t, p): spec for (t, p), spec in specs.items()},
                isolation_level=self._isolation,
                request_timeout=self._timeout,
            )
            return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

        return self._retry("ListOffsets", call)

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self._list_offsets({tp: OffsetSpec.earliest() for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        """High watermarks (last stable offsets under read_committed)."""
        return self._list_offsets({tp: OffsetSpec.latest() for tp in tps})

    def by_timestamp(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """First offset whose timestamp is at or after the given one; -1 when none is."""
        return self._list_offsets(
            {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps.items()}
        )

    # -- option resolution ------------------------------------------------------------

    def resolve(
        self,
        spec: SourceOffsetSpec,
        tps: list[TopicPartition],
        *,
        option: str,
        timestamp_strategy: str = "error",
    ) -> PartitionOffsets:
        """Concrete offsets for ``startingOffsets``-style options over ``tps``."""
        if isinstance(spec, Earliest):
            return self.earliest(tps)
        if isinstance(spec, Latest):
            return self.latest(tps)
        if isinstance(spec, SpecificOffsets):
            given = spec.offsets
            if set(given) != set(tps):
                raise OptionError(
                    f"If {option} contains specific offsets, you must specify all "
                    "TopicPartitions. Use -1 for latest, -2 for earliest. "
                    f"Specified: {sorted(map(describe, given))} "
                    f"Assigned: {sorted(map(describe, tps))}"
                )
            lo = self.earliest([tp for tp, o in given.items() if o == EARLIEST])
            hi = self.latest([tp for tp, o in given.items() if o == LATEST])
            return {tp: lo.get(tp, hi.get(tp, o)) for tp, o in given.items()}
        if isinstance(spec, GlobalTimestamp):
            stamps = {tp: spec.timestamp_ms for tp in tps}
        else:
            assert isinstance(spec, SpecificTimestamps)
            if set(spec.timestamps) != set(tps):
                raise OptionError(
                    f"If {option}OffsetsByTimestamp is set, you must specify all "
                    f"TopicPartitions. Specified: {sorted(map(describe, spec.timestamps))} "
                    f"Assigned: {sorted(map(describe, tps))}"
                )
            stamps = dict(spec.timestamps)
        found = self.by_timestamp(stamps)
        missing = [tp for tp, o in found.items() if o < 0]
        if missing:
            if option.startswith("starting") and timestamp_strategy == "error":
                raise RuntimeError(
                    "No offset matched the starting timestamp for "
                    f"{', '.join(describe(tp) + '@' + str(stamps[tp]) for tp in sorted(missing))}; "
                    "set startingOffsetsByTimestampStrategy=latest to start those at latest"
                )
            hi = self.latest(missing)
            found.update(hi)
        return found
