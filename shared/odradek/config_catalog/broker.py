"""Cluster-wide broker configs: set on the controller, published to every service.

The controller reads these from its own config (Kafka's ``server.properties`` role),
validates them and publishes the effective values in ``ClusterMetadata.cluster_configs``
so every gateway, storage node, coordinator and offset store applies the same
``num.partitions``, ``min.insync.replicas``, ``log.*`` defaults and so on. The
``dynamic`` ones may change at run time through AlterConfigs on the default broker
resource ("cluster-wide" update mode in Kafka's docs). Names and defaults are Kafka's
(``ServerLogConfigs``, ``ReplicationConfigs``, ``GroupCoordinatorConfig``,
``CleanerConfig``); a ``log.*`` synonym of a topic config takes its default from
:data:`odradek.config_catalog.topic.TOPIC_CONFIGS`, as Kafka's ``LogConfig`` does.
"""

from __future__ import annotations

from odradek.config_catalog.definition import (
    INT_MAX,
    LONG_MAX,
    Catalog,
    ConfigDef,
    ConfigType,
    TypedValue,
)
from odradek.config_catalog.topic import SEGMENT_BYTES_NOTE, TOPIC_CONFIGS

_INT, _LONG, _SHORT, _BOOL, _DOUBLE, _STRING, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.SHORT,
    ConfigType.BOOLEAN,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
)
_HOUR = 3_600_000
_GROUPS = ("coordinator",)
_LOG = ("storage",)
_CONTROLLER = ("controller",)
_TXN = ("transactions",)


def _c(
    name: str,
    type_: ConfigType,
    default: TypedValue | None,
    doc: str,
    readers: tuple[str, ...],
    *,
    dynamic: bool = False,
    at_least: int | None = None,
    note: str = "",
) -> ConfigDef:
    return ConfigDef(
        name, type_, default, doc, at_least=at_least, dynamic=dynamic, readers=readers, note=note
    )


def _topic(name: str, unit: int = 1) -> TypedValue:
    """The default of the topic config this broker config is a synonym of (in ``unit``s)."""
    value = TOPIC_CONFIGS.value(name)
    return value // unit if unit > 1 and isinstance(value, int) else value


BROKER_CONFIGS = Catalog(
    "Cluster-wide broker configs",
    "Set in the controller's config file (or `ODRADEK_*`/`--set`); the controller "
    "publishes them to every service. *dynamic* ones can also be changed at run time "
    "with AlterConfigs on the default broker resource "
    "(`kafka-configs.sh --entity-type brokers --entity-default --alter`).",
    _CONTROLLER,
    (
        # topics and partitions
        _c(
            "num.partitions",
            _INT,
            1,
            "Partitions of a topic created without a count (CreateTopics -1, auto-creation).",
            _CONTROLLER,
            at_least=1,
        ),
        _c(
            "default.replication.factor",
            _SHORT,
            1,
            "Replicas of a topic created without a replication factor.",
            _CONTROLLER,
            at_least=1,
        ),
        _c(
            "auto.create.topics.enable",
            _BOOL,
            True,
            "Create a topic when a client asks for its metadata and it does not exist.",
            ("gateway",),
        ),
        _c(
            "delete.topic.enable",
            _BOOL,
            True,
            "Allow DeleteTopics.",
            _CONTROLLER,
        ),
        _c(
            "min.insync.replicas",
            _INT,
            _topic("min.insync.replicas"),
            "Default of the topic config min.insync.replicas.",
            _LOG,
            dynamic=True,
            at_least=1,
        ),
        _c(
            "unclean.leader.election.enable",
            _BOOL,
            _topic("unclean.leader.election.enable"),
            "Default of the topic config unclean.leader.election.enable.",
            _CONTROLLER,
            dynamic=True,
        ),
        _c(
            "message.max.bytes",
            _INT,
            _topic("max.message.bytes"),
            "Default of the topic config max.message.bytes (largest record batch).",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "compression.type",
            _STRING,
            _topic("compression.type"),
            "Default of the topic config compression.type.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "replica.lag.time.max.ms",
            _LONG,
            30_000,
            "A follower that has not caught up for this long leaves the ISR.",
            _LOG,
            at_least=1,
        ),
        _c(
            "auto.leader.rebalance.enable",
            _BOOL,
            True,
            "Move leadership back to preferred replicas in the background.",
            _CONTROLLER,
        ),
        _c(
            "leader.imbalance.check.interval.seconds",
            _LONG,
            300,
            "How often the controller checks leader balance.",
            _CONTROLLER,
            at_least=1,
        ),
        _c(
            "leader.imbalance.per.broker.percentage",
            _INT,
            10,
            "Share of a node's partitions led elsewhere that triggers a rebalance.",
            _CONTROLLER,
            at_least=0,
        ),
        # replication throttles (kafka-reassign-partitions.sh --throttle sets them per broker)
        _c(
            "leader.replication.throttled.rate",
            _LONG,
            LONG_MAX,
            "Bytes/s a leader sends to the followers of the replicas its topics list in "
            "leader.replication.throttled.replicas.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "follower.replication.throttled.rate",
            _LONG,
            LONG_MAX,
            "Bytes/s a follower fetches for the replicas its topics list in "
            "follower.replication.throttled.replicas.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "replica.alter.log.dirs.io.max.bytes.per.second",
            _LONG,
            LONG_MAX,
            "Bytes/s a storage node copies between its own log directories (AlterReplicaLogDirs).",
            _LOG,
            dynamic=True,
            at_least=1,
        ),
        # consumer groups
        _c(
            "offsets.topic.num.partitions",
            _INT,
            50,
            "Partitions of __consumer_offsets, and so shards of the group coordinator.",
            ("controller", "coordinator", "offsets", "gateway"),
            at_least=1,
        ),
        _c(
            "offsets.topic.replication.factor",
            _SHORT,
            3,
            "Replicas of __consumer_offsets (capped by the storage nodes alive at creation).",
            ("offsets",),
            at_least=1,
        ),
        _c(
            "offsets.topic.segment.bytes",
            _INT,
            104_857_600,
            "segment.bytes of __consumer_offsets.",
            ("offsets",),
            at_least=1,
        ),
        _c(
            "offsets.retention.minutes",
            _INT,
            10_080,
            "Committed offsets of an empty group expire after this long.",
            ("offsets",),
            at_least=1,
        ),
        _c(
            "offsets.commit.timeout.ms",
            _INT,
            5_000,
            "How long an offset commit waits for __consumer_offsets to acknowledge it.",
            ("offsets",),
            at_least=1,
        ),
        _c(
            "group.initial.rebalance.delay.ms",
            _INT,
            3_000,
            "How long a new group waits for more members before its first rebalance.",
            ("coordinator", "gateway"),
            at_least=0,
        ),
        _c(
            "group.min.session.timeout.ms",
            _INT,
            6_000,
            "Smallest session timeout a classic group member may ask for.",
            _GROUPS,
            at_least=0,
        ),
        _c(
            "group.max.session.timeout.ms",
            _INT,
            1_800_000,
            "Largest session timeout a classic group member may ask for.",
            _GROUPS,
            at_least=0,
        ),
        _c(
            "group.max.size",
            _INT,
            INT_MAX,
            "Most members a classic group may have.",
            _GROUPS,
            at_least=1,
        ),
        # KIP-848 consumer groups (Kafka's GroupCoordinatorConfig)
        _c(
            "group.consumer.session.timeout.ms",
            _INT,
            45_000,
            "A consumer-protocol member that sends no heartbeat for this long is removed.",
            _GROUPS,
            at_least=1,
        ),
        _c(
            "group.consumer.heartbeat.interval.ms",
            _INT,
            5_000,
            "How often consumer-protocol members are told to heartbeat.",
            _GROUPS,
            at_least=1,
        ),
        _c(
            "group.consumer.max.size",
            _INT,
            INT_MAX,
            "Most members a consumer-protocol group may have.",
            _GROUPS,
            at_least=1,
        ),
        _c(
            "group.consumer.assignors",
            _LIST,
            ["uniform", "range"],
            "Server-side assignors consumer-protocol members may name; the first is the default.",
            _GROUPS,
            note="Assignor names, not classes: Kafka lists its UniformAssignor and "
            "RangeAssignor classes, whose names are uniform and range.",
        ),
        _c(
            "group.consumer.migration.policy",
            _STRING,
            "bidirectional",
            "Online conversion of non-empty groups between the classic and the consumer "
            "protocol: bidirectional, upgrade (classic to consumer only), downgrade "
            "(consumer to classic only) or disabled.",
            _GROUPS,
        ),
        # transactions (Kafka's TransactionLogConfig, TransactionStateManagerConfig)
        _c(
            "transaction.state.log.num.partitions",
            _INT,
            50,
            "Partitions of __transaction_state, and so shards of the transaction coordinator.",
            ("controller", "transactions", "gateway", "storage"),
            at_least=1,
        ),
        _c(
            "transaction.state.log.replication.factor",
            _SHORT,
            3,
            "Replicas of __transaction_state (capped by the storage nodes alive at creation).",
            _TXN,
            at_least=1,
        ),
        _c(
            "transaction.state.log.min.isr",
            _INT,
            2,
            "min.insync.replicas of __transaction_state (capped by its replication factor).",
            _TXN,
            at_least=1,
        ),
        _c(
            "transaction.state.log.segment.bytes",
            _INT,
            104_857_600,
            "segment.bytes of __transaction_state.",
            _TXN,
            at_least=1,
        ),
        _c(
            "transaction.state.log.load.buffer.size",
            _INT,
            5_242_880,
            "Bytes read per fetch while a transaction coordinator loads a shard.",
            _TXN,
            at_least=1,
        ),
        _c(
            "transaction.max.timeout.ms",
            _INT,
            900_000,
            "Largest transaction.timeout.ms a producer may ask for (InitProducerId with a "
            "larger one: INVALID_TRANSACTION_TIMEOUT).",
            _TXN,
            at_least=1,
        ),
        _c(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            _INT,
            10_000,
            "How often transactions open longer than their timeout are aborted.",
            _TXN,
            at_least=1,
        ),
        _c(
            "transactional.id.expiration.ms",
            _INT,
            604_800_000,
            "A transactional id without transaction updates for this long is removed.",
            _TXN,
            at_least=1,
        ),
        _c(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            _INT,
            3_600_000,
            "How often expired transactional ids are removed.",
            _TXN,
            at_least=1,
        ),
        # log defaults (topic-level synonyms)
        _c(
            "log.segment.bytes",
            _INT,
            _topic("segment.bytes"),
            "Default of segment.bytes.",
            _LOG,
            dynamic=True,
            at_least=14,
            note=SEGMENT_BYTES_NOTE,
        ),
        _c(
            "log.retention.hours",
            _INT,
            _topic("retention.ms", _HOUR),
            "Default of retention.ms, in hours (after log.retention.ms and .minutes).",
            _LOG,
        ),
        _c(
            "log.retention.minutes",
            _INT,
            None,
            "Default of retention.ms, in minutes (after log.retention.ms).",
            _LOG,
        ),
        _c(
            "log.retention.ms",
            _LONG,
            None,
            "Default of retention.ms.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.retention.bytes",
            _LONG,
            _topic("retention.bytes"),
            "Default of retention.bytes.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.roll.hours",
            _INT,
            _topic("segment.ms", _HOUR),
            "Default of segment.ms, in hours (after log.roll.ms).",
            _LOG,
            at_least=1,
        ),
        _c("log.roll.ms", _LONG, None, "Default of segment.ms.", _LOG, dynamic=True),
        _c(
            "log.roll.jitter.hours",
            _INT,
            _topic("segment.jitter.ms", _HOUR),
            "Default of segment.jitter.ms, in hours (after log.roll.jitter.ms).",
            _LOG,
            at_least=0,
        ),
        _c(
            "log.roll.jitter.ms",
            _LONG,
            None,
            "Default of segment.jitter.ms.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.cleanup.policy",
            _LIST,
            _topic("cleanup.policy"),
            "Default of cleanup.policy.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.index.size.max.bytes",
            _INT,
            _topic("segment.index.bytes"),
            "Default of segment.index.bytes.",
            _LOG,
            dynamic=True,
            at_least=4,
        ),
        _c(
            "log.index.interval.bytes",
            _INT,
            _topic("index.interval.bytes"),
            "Default of index.interval.bytes.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "log.flush.interval.messages",
            _LONG,
            _topic("flush.messages"),
            "Default of flush.messages.",
            _LOG,
            dynamic=True,
            at_least=1,
        ),
        _c(
            "log.flush.interval.ms",
            _LONG,
            None,
            "Default of flush.ms.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.message.timestamp.type",
            _STRING,
            _topic("message.timestamp.type"),
            "Default of message.timestamp.type.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.message.timestamp.before.max.ms",
            _LONG,
            _topic("message.timestamp.before.max.ms"),
            "Default of message.timestamp.before.max.ms.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "log.message.timestamp.after.max.ms",
            _LONG,
            _topic("message.timestamp.after.max.ms"),
            "Default of message.timestamp.after.max.ms.",
            _LOG,
            dynamic=True,
            at_least=0,
            note=TOPIC_CONFIGS["message.timestamp.after.max.ms"].note,
        ),
        _c(
            "log.cleaner.enable",
            _BOOL,
            True,
            "Run the log cleaner (compaction of cleanup.policy=compact topics).",
            _LOG,
        ),
        _c(
            "log.cleaner.backoff.ms",
            _LONG,
            15_000,
            "How long the cleaner sleeps when no log needs cleaning.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "log.cleaner.delete.retention.ms",
            _LONG,
            _topic("delete.retention.ms"),
            "Default of delete.retention.ms.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "log.cleaner.min.compaction.lag.ms",
            _LONG,
            _topic("min.compaction.lag.ms"),
            "Default of min.compaction.lag.ms.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "log.cleaner.max.compaction.lag.ms",
            _LONG,
            _topic("max.compaction.lag.ms"),
            "Default of max.compaction.lag.ms.",
            _LOG,
            dynamic=True,
            at_least=1,
        ),
        _c(
            "log.cleaner.min.cleanable.ratio",
            _DOUBLE,
            _topic("min.cleanable.dirty.ratio"),
            "Default of min.cleanable.dirty.ratio.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.segment.delete.delay.ms",
            _LONG,
            _topic("file.delete.delay.ms"),
            "Default of file.delete.delay.ms.",
            _LOG,
            dynamic=True,
            at_least=0,
        ),
        _c(
            "log.preallocate",
            _BOOL,
            _topic("preallocate"),
            "Default of preallocate.",
            _LOG,
            dynamic=True,
        ),
        _c(
            "log.retention.check.interval.ms",
            _LONG,
            300_000,
            "How often the storage node deletes segments past retention.",
            _LOG,
            at_least=1,
        ),
    ),
)
