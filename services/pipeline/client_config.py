"""librdkafka settings for the consumers, producers and admin clients the connector
creates. User ``kafka.*`` settings come first; the connector then pins what its
correctness depends on (no auto-commit, no auto-reset, end-of-partition events)
and fills in throughput defaults the user did not set.

librdkafka's own log goes to stderr and repeats every failed connection attempt;
the connector collects errors through ``error_cb`` and reports them in its
exceptions instead, so the log is cut to critical messages unless the user sets
``kafka.log_level`` (or ``kafka.debug``).
"""

from __future__ import annotations

from odradek.pipeline.options import SinkOptions, SourceOptions
from odradek.pipeline.sink_columns import SinkColumns

# Consumer-only settings that an AdminClient would warn about and ignore.
_CONSUMER_ONLY = {
    "group.id",
    "isolation.level",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "max.partition.fetch.bytes",
    "fetch.message.max.bytes",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "check.crcs",
    "client.rack",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "group.instance.id",
    "auto.commit.interval.ms",
    "enable.partition.eof",
}


QUIET = {"log_level": 2, "log.connection.close": False}


def quiet(conf: dict[str, str | int | bool], user: dict[str, str]) -> dict[str, str | int | bool]:
    """``conf`` with librdkafka's log cut down, unless the user asked for it."""
    if "log_level" in user or "debug" in user:
        return conf
    return {**QUIET, **conf}


def consumer_config(opts: SourceOptions, group_id: str) -> dict[str, str | int | bool]:
    """An assign-only consumer: it never subscribes, joins a group or commits, so
    ``group.id`` (required by librdkafka) is just a label, like Spark's generated one."""
    conf: dict[str, str | int | bool] = {
        # Big fetches: records are read once, in order, by one task per range.
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "queued.max.messages.kbytes": 128 * 1024,
        # Ranges end at or below the high watermark, so a fetch never needs to wait
        # for new data; a short wait also frees a pooled consumer quickly when it
        # moves to its next range (librdkafka has one fetch in flight per broker).
        "fetch.wait.max.ms": 10,
        **opts.kafka_params,
        "group.id": opts.kafka_params.get("group.id", group_id),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    }
    return quiet(conf, opts.kafka_params)


def admin_config(opts: SourceOptions | SinkOptions) -> dict[str, str | int | float | bool]:
    conf: dict[str, str | int | bool] = {
        k: v for k, v in opts.kafka_params.items() if k not in _CONSUMER_ONLY
    }
    return dict(quiet(conf, opts.kafka_params))


def producer_config(opts: SinkOptions) -> dict[str, str | int | bool]:
    """An idempotent producer: retries cannot duplicate or reorder records within
    one task. Keys are hashed like the Java client (murmur2), so a key lands on the
    same partition as it would through Spark's own Kafka sink."""
    conf: dict[str, str | int | bool] = {
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "batch.size": 1024 * 1024,
        "compression.type": "none",
        **opts.kafka_params,
        # Successful deliveries need no Python callback; failures still get one.
        "delivery.report.only.error": True,
    }
    return quiet(conf, opts.kafka_params)


def is_read_committed(opts: SourceOptions) -> bool:
    return opts.kafka_params.get("isolation.level", "").lower() == "read_committed"


def direct_fetch_ok(opts: SourceOptions) -> bool:
    """Whether executors may read with their own Fetch connection (``partition_fetcher``):
    plaintext and read_uncommitted only; anything else goes through librdkafka."""
    protocol = opts.kafka_params.get("security.protocol", "plaintext").lower()
    return protocol == "plaintext" and not is_read_committed(opts)


# Producer settings the direct (Arrow) producer honours as librdkafka would.
_DIRECT_PRODUCER_OK = {
    "bootstrap.servers",
    "client.id",
    "linger.ms",
    "batch.size",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "partitioner",
    "log_level",
    "log.connection.close",
    "delivery.report.only.error",
    "enable.idempotence",
    "acks",
    "compression.type",
}


def direct_produce_ok(opts: SinkOptions, cols: SinkColumns) -> bool:
    """Whether write tasks may produce Arrow batches themselves (``arrow_producer``):
    plaintext, idempotent with ``acks=all``, uncompressed, no headers, and no setting
    that only librdkafka would honour."""
    conf = producer_config(opts)
    return (
        not opts.exactly_once
        and cols.headers is None
        and str(conf.get("security.protocol", "plaintext")).lower() == "plaintext"
        and str(conf.get("acks")).lower() in ("all", "-1")
        and str(conf.get("enable.idempotence")).lower() == "true"
        and str(conf.get("compression.type", "none")).lower() == "none"
        and str(conf.get("partitioner")) == "murmur2_random"
        and all(k in _DIRECT_PRODUCER_OK for k in conf)
    )
