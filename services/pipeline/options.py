"""Source and sink options, named and validated the way Spark's Kafka connector does.

A job written for ``format("kafka")`` switches to ``format("odradek")`` without
touching its options: ``kafka.bootstrap.servers``, ``subscribe`` / ``subscribePattern``
/ ``assign``, ``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or
JSON with -2/-1), ``startingTimestamp`` / ``startingOffsetsByTimestamp`` /
``endingTimestamp`` / ``endingOffsetsByTimestamp``,
``startingOffsetsByTimestampStrategy``, ``maxOffsetsPerTrigger``, ``minPartitions``,
``maxRecordsPerPartition``, ``includeHeaders``, ``failOnDataLoss``,
``kafkaConsumer.pollTimeoutMs``, ``groupIdPrefix`` and ``kafka.*`` client settings.
Spark's keys are case-insensitive, so lookups here are too. ``kafka.*`` settings go to
librdkafka (confluent-kafka), whose property names mostly equal the Java client's.

Pure code: parsing and validation only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from odradek.pipeline.offsets import EARLIEST, LATEST, PartitionOffsets, from_json

KAFKA_PREFIX = "kafka."
DEFAULT_POLL_TIMEOUT_MS = 120_000

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
    "transactional.id": "the sink uses idempotent, non-transactional producers",
}
_UNSUPPORTED_SOURCE = ("minoffsetspertrigger", "maxtriggerdelay", "maxbytespertrigger")


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
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    group_id_prefix: str = "spark-kafka-source"
    kafka_params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    kafka_params: dict[str, str] = field(default_factory=dict)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _kafka_params(
    opts: Mapping[str, str], reserved: Mapping[str, str], role: str
) -> dict[str, str]:
    params = {k[len(KAFKA_PREFIX) :]: v for k, v in opts.items() if k.startswith(KAFKA_PREFIX)}
    for key, advice in reserved.items():
        if key in params:
            raise OptionError(f"Kafka option 'kafka.{key}' is not supported: {advice}")
    if not params.get("bootstrap.servers"):
        raise OptionError(
            f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}"
        )
    return params


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


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate options for ``spark.read`` (``streaming=False``) or ``spark.readStream``."""
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
    else:
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
    return SourceOptions(
        bootstrap_servers=params["bootstrap.servers"],
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        include_headers=_bool(opts, "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        poll_timeout_ms=poll_timeout,
        group_id_prefix=opts.get("groupidprefix", default_prefix),
        kafka_params=params,
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate options for ``df.write`` / ``df.writeStream``."""
    opts = _lower(options)
    params = _kafka_params(opts, _RESERVED_PRODUCER, "producer")
    topic = opts.get("topic")
    return SinkOptions(
        bootstrap_servers=params["bootstrap.servers"],
        topic=topic.strip() if topic and topic.strip() else None,
        kafka_params=params,
    )
