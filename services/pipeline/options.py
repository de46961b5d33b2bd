"""Source and sink options, named and validated the way Spark's Kafka connector does.

A job written for ``format("kafka")`` switches to ``format("odradek")`` without
touching its options: ``kafka.bootstrap.servers``, ``subscribe`` / ``subscribePattern``
/ ``assign``, ``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or
JSON with -2/-1), ``startingTimestamp`` / ``startingOffsetsByTimestamp`` /
``endingTimestamp`` / ``endingOffsetsByTimestamp``,
``startingOffsetsByTimestampStrategy``, ``maxOffsetsPerTrigger``,
``minOffsetsPerTrigger`` / ``maxTriggerDelay``, ``minPartitions``,
``maxRecordsPerPartition``, ``includeHeaders``, ``failOnDataLoss``,
``kafkaConsumer.pollTimeoutMs``, ``fetchOffset.numRetries`` /
``fetchOffset.retryIntervalMs``, ``groupIdPrefix`` and ``kafka.*`` client settings.
Spark's keys are case-insensitive, so lookups here are too. ``kafka.*`` settings are
the Java client's; :mod:`odradek.pipeline.kafka_properties` translates them for
librdkafka (confluent-kafka).

The sink adds ``deliveryGuarantee`` (``at-least-once``, the default and Spark's, or
``exactly-once``) and ``transactionalIdPrefix`` (see :mod:`odradek.pipeline.sink`).

Pure code: parsing and validation only.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from odradek.pipeline.kafka_properties import PropertyNotes, translate_consumer, translate_producer
from odradek.pipeline.spark_offsets import EARLIEST, LATEST, PartitionOffsets, from_json

log = logging.getLogger("odradek.pipeline")

KAFKA_PREFIX = "kafka."
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_FETCH_OFFSET_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"

# Settings the connector owns; Spark rejects the same ones with the same advice.
_RESERVED_CONSUMER = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "offsets are tracked by Spark's checkpoint, not committed to Kafka",
    "key.deserializer": "keys are always read as bytes; cast them in a query",
    "value.deserializer": "values are always read as bytes; cast them in a query",
    "interceptor.classes": "interceptors are not supported",
}
_RESERVED_PRODUCER = {
    "key.serializer": "keys are written as bytes (a string column is encoded as UTF-8)",
    "value.serializer": "values are written as bytes (a string column is encoded as UTF-8)",
    "transactional.id": (
        "set the sink option deliveryGuarantee=exactly-once (and transactionalIdPrefix) "
        "instead: each write task then uses its own transactional id"
    ),
}
_UNSUPPORTED_SOURCE = ("maxbytespertrigger",)
_DURATION_UNITS_MS = {
    "ms": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}


class OptionError(ValueError):
    """A source or sink option that Spark's Kafka connector would also reject."""


@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets; values may be ``EARLIEST`` (-2) or ``LATEST`` (-1)."""

    offsets: PartitionOffsets


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset at or after ``timestamp_ms`` in every partition."""

    timestamp_ms: int


@dataclass(frozen=True)
class SpecificTimestamps:
    timestamps: PartitionOffsets


OffsetSpec = Earliest | Latest | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: named topics, a Java-style regex (whole-name match),
    or an explicit partition list (``assign``)."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: Literal["error", "latest"] = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_retries: int = DEFAULT_FETCH_OFFSET_RETRIES
    fetch_offset_retry_interval_ms: int = DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
    group_id_prefix: str = "spark-kafka-source"
    kafka_params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    kafka_params: dict[str, str] = field(default_factory=dict)
    delivery_guarantee: str = AT_LEAST_ONCE
    transactional_id_prefix: str | None = None

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _kafka_params(
    opts: Mapping[str, str], reserved: Mapping[str, str], role: str
) -> dict[str, str]:
    """The ``kafka.*`` options as librdkafka settings (Java names translated)."""
    params = {k[len(KAFKA_PREFIX) :]: v for k, v in opts.items() if k.startswith(KAFKA_PREFIX)}
    for key, advice in reserved.items():
        if key in params:
            raise OptionError(f"Kafka option 'kafka.{key}' is not supported: {advice}")
    if not params.get("bootstrap.servers"):
        raise OptionError(
            f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}"
        )
    translate = translate_consumer if role == "consumer" else translate_producer
    notes = PropertyNotes()
    try:
        out = translate(params, notes)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    for line in notes.lines:
        log.info("%s setting %s", role, line)
    return out


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise OptionError(f"Option '{key}' must be true or false, got {raw!r}")


def _positive_int(opts: Mapping[str, str], key: str) -> int | None:
    raw = opts.get(key.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"Option '{key}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"Option '{key}' must be a positive integer, got {raw!r}")
    return value


def _non_negative_int(opts: Mapping[str, str], key: str, default: int) -> int:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise OptionError(f"Option '{key}' must be a non-negative integer, got {raw!r}")
    return value


def parse_duration_ms(key: str, raw: str) -> int:
    """Spark's interval strings as ``maxTriggerDelay`` takes them: ``15m``, ``30 seconds``,
    ``500ms``, ``1h`` (a bare number is milliseconds)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", raw)
    unit = m.group(2).lower() if m else ""
    if m is None or (unit and unit not in _DURATION_UNITS_MS):
        raise OptionError(
            f"Option '{key}' must be a duration like 15m, 30s, 500ms or 1h, got {raw!r}"
        )
    return int(m.group(1)) * _DURATION_UNITS_MS.get(unit, 1)


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise OptionError(
            "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' "
            f"must be specified for the odradek source (got {len(given)})"
        )
    key = given[0]
    raw = opts[key].strip()
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified in 'subscribe': {raw!r}")
        return Subscription("subscribe", topics=topics)
    if key == "subscribepattern":
        if not raw:
            raise OptionError("Pattern to subscribe is empty as specified in 'subscribePattern'")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(
                f"Option 'subscribePattern' is not a valid regular expression: {raw!r} ({exc})"
            ) from None
        return Subscription("subscribePattern", pattern=raw)
    try:
        doc = json.loads(raw)
        parts = tuple(
            sorted((str(t), int(p)) for t, plist in doc.items() for p in plist)  # type: ignore[union-attr]
        )
    except (ValueError, TypeError, AttributeError):
        raise OptionError(
            f'Option \'assign\' must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {raw!r}'
        ) from None
    if not parts:
        raise OptionError("No partitions to assign as specified in 'assign'")
    return Subscription("assign", partitions=parts)


def _offset_json(key: str, raw: str) -> PartitionOffsets:
    try:
        return from_json(json.loads(raw))
    except ValueError as exc:
        raise OptionError(
            f'Option \'{key}\' must be earliest, latest or JSON like {{"topicA":{{"0":23,"1":-1}}}}: {exc}'
        ) from None


def _offset_spec(
    opts: Mapping[str, str], prefix: Literal["starting", "ending"], default: OffsetSpec
) -> OffsetSpec:
    # Spark's precedence: global timestamp, then per-partition timestamps, then offsets.
    ts_key = f"{prefix}timestamp"
    if ts_key in opts:
        try:
            return GlobalTimestamp(int(opts[ts_key]))
        except ValueError:
            raise OptionError(
                f"Option '{prefix}Timestamp' must be milliseconds since the epoch, got {opts[ts_key]!r}"
            ) from None
    by_ts_key = f"{prefix}offsetsbytimestamp"
    if by_ts_key in opts:
        return SpecificTimestamps(_offset_json(f"{prefix}OffsetsByTimestamp", opts[by_ts_key]))
    raw = opts.get(f"{prefix}offsets")
    if raw is None:
        return default
    word = raw.strip().lower()
    if word == "earliest":
        return Earliest()
    if word == "latest":
        return Latest()
    return SpecificOffsets(_offset_json(f"{prefix}Offsets", raw))


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate options for ``spark.read`` (``streaming=False``) or ``spark.readStream``
    (``True``); ``None`` checks what both share, as ``load()`` can before it knows which."""
    opts = _lower(options)
    for key in _UNSUPPORTED_SOURCE:
        if key in opts:
            raise OptionError(f"Option '{key}' of Spark's Kafka source is not supported by odradek")
    params = _kafka_params(opts, _RESERVED_CONSUMER, "consumer")
    starting = _offset_spec(opts, "starting", Latest() if streaming else Earliest())
    ending = _offset_spec(opts, "ending", Latest())
    if streaming:
        if any(k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")):
            raise OptionError("Ending offset not valid in streaming queries")
    elif streaming is False:
        for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if key.lower() in opts:
                raise OptionError(f"Option '{key}' is only valid in streaming queries")
        if isinstance(starting, Latest) or (
            isinstance(starting, SpecificOffsets) and LATEST in starting.offsets.values()
        ):
            raise OptionError(
                "Starting offset can't be latest for batch queries on Kafka "
                "(use -2 for earliest, or a specific offset)"
            )
        if isinstance(ending, Earliest) or (
            isinstance(ending, SpecificOffsets) and EARLIEST in ending.offsets.values()
        ):
            raise OptionError(
                "Ending offset can't be earliest for batch queries on Kafka "
                "(use -1 for latest, or a specific offset)"
            )
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"Option 'startingOffsetsByTimestampStrategy' must be error or latest, got {strategy!r}"
        )
    poll_timeout = _positive_int(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS
    default_prefix = "spark-kafka-source" if streaming else "spark-kafka-relation"
    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    min_per_trigger = _positive_int(opts, "minOffsetsPerTrigger")
    if max_per_trigger and min_per_trigger and min_per_trigger > max_per_trigger:
        raise OptionError(
            f"minOffsetsPerTrigger ({min_per_trigger}) must not exceed "
            f"maxOffsetsPerTrigger ({max_per_trigger})"
        )
    delay_raw = opts.get("maxtriggerdelay")
    delay_ms = (
        parse_duration_ms("maxTriggerDelay", delay_raw)
        if delay_raw is not None
        else DEFAULT_MAX_TRIGGER_DELAY_MS
    )
    return SourceOptions(
        bootstrap_servers=params["bootstrap.servers"],
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay_ms,
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        include_headers=_bool(opts, "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        poll_timeout_ms=poll_timeout,
        fetch_offset_retries=_non_negative_int(
            opts, "fetchOffset.numRetries", DEFAULT_FETCH_OFFSET_RETRIES
        ),
        fetch_offset_retry_interval_ms=_non_negative_int(
            opts, "fetchOffset.retryIntervalMs", DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
        ),
        group_id_prefix=opts.get("groupidprefix", default_prefix),
        kafka_params=params,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate options for ``df.write`` / ``df.writeStream``."""
    opts = _lower(options)
    params = _kafka_params(opts, _RESERVED_PRODUCER, "producer")
    topic = opts.get("topic")
    guarantee = opts.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower().replace("_", "-")
    if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise OptionError(
            f"Option 'deliveryGuarantee' must be {AT_LEAST_ONCE} or {EXACTLY_ONCE}, got {guarantee!r}"
        )
    prefix = opts.get("transactionalidprefix", "").strip() or None
    if guarantee == EXACTLY_ONCE:
        acks = params.get("acks", "all").lower()
        if acks not in ("all", "-1"):
            raise OptionError(
                f"deliveryGuarantee=exactly-once writes with transactions, which need "
                f"acks=all; got kafka.acks={params['acks']}"
            )
        if prefix is None:
            raise OptionError(
                "deliveryGuarantee=exactly-once needs the option 'transactionalIdPrefix': a "
                "name unique to this query and kept across its restarts (write task p uses "
                "the transactional id <prefix>-<p>)"
            )
    elif prefix is not None:
        raise OptionError("Option 'transactionalIdPrefix' needs deliveryGuarantee=exactly-once")
    return SinkOptions(
        bootstrap_servers=params["bootstrap.servers"],
        topic=topic.strip() if topic and topic.strip() else None,
        kafka_params=params,
        delivery_guarantee=guarantee,
        transactional_id_prefix=prefix,
    )
