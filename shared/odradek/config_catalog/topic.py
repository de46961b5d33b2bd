"""Topic-level configs by Kafka's names (Kafka's ``LogConfig``/``TopicConfig``):
types, defaults, valid values and broker synonyms.

:mod:`odradek.topic_config` resolves a topic's effective values from these (override,
broker synonym, default); the log layer reads them as :class:`odradek.topic_config.
LogConfig`, whose field defaults come from here.
"""

from __future__ import annotations

from odradek.config_catalog.definition import (
    LONG_MAX,
    BrokerSynonym,
    Catalog,
    ConfigDef,
    ConfigType,
    TypedValue,
    to_config_string,
)


def _def(
    name: str,
    type_: ConfigType,
    default: TypedValue,
    doc: str,
    synonyms: tuple[str | BrokerSynonym, ...] = (),
    *,
    at_least: float | None = None,
    at_most: float | None = None,
    one_of: tuple[str, ...] | None = None,
    case_insensitive: bool = False,
    note: str = "",
    readers: tuple[str, ...] = (),
) -> ConfigDef:
    syns = tuple(s if isinstance(s, BrokerSynonym) else BrokerSynonym(s) for s in synonyms)
    default_synonym = None
    if syns:
        # Kafka names the broker config that holds a default: the coarsest unit
        # (log.retention.hours, not log.retention.ms, whose default is null).
        coarsest = max(syns, key=lambda s: s.scale)
        value = (
            default // coarsest.scale
            if coarsest.scale > 1 and isinstance(default, int)
            else default
        )
        default_synonym = (coarsest.name, to_config_string(value))
    return ConfigDef(
        name,
        type_,
        default,
        doc,
        syns,
        at_least,
        at_most,
        one_of,
        case_insensitive,
        default_synonym,
        readers=readers,
        note=note,
    )


_L, _I, _D, _B, _S, _LIST = (
    ConfigType.LONG,
    ConfigType.INT,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
)
# Where Odradek keeps Kafka 3's behaviour (tests/unit/test_config_catalog.py pins both).
SEGMENT_BYTES_NOTE = (
    "Kafka 4 requires at least 1048576 (KIP-1030); Odradek accepts Kafka 3's 14, "
    "so small segments can be rolled in tests."
)

_MINUTE = 60_000
_HOUR = 60 * _MINUTE
_WEEK = 7 * 24 * _HOUR

TOPIC_CONFIGS = Catalog(
    "Topic configs",
    "Per-topic settings (CreateTopics, AlterConfigs, `odradek topics --config`). A topic "
    "without an override takes the first broker synonym that is set (a cluster-wide "
    "broker config below, or the storage node's own config file), else this default.",
    ("storage",),
    (
        _def(
            "cleanup.policy",
            _LIST,
            ["delete"],
            "Retention policy: delete old segments and/or compact by key.",
            ("log.cleanup.policy",),
            one_of=("compact", "delete"),
        ),
        _def(
            "compression.type",
            _S,
            "producer",
            "Final codec of stored batches; 'producer' keeps the producer's.",
            ("compression.type",),
            one_of=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            case_insensitive=True,
        ),
        _def(
            "compression.gzip.level",
            _I,
            -1,
            "gzip level when compression.type=gzip.",
            ("compression.gzip.level",),
            at_least=-1,
            at_most=9,
        ),
        _def(
            "compression.lz4.level",
            _I,
            9,
            "lz4 level when compression.type=lz4.",
            ("compression.lz4.level",),
            at_least=1,
            at_most=17,
        ),
        _def(
            "compression.zstd.level",
            _I,
            3,
            "zstd level when compression.type=zstd.",
            ("compression.zstd.level",),
            at_least=-131072,
            at_most=22,
        ),
        _def(
            "delete.retention.ms",
            _L,
            86_400_000,
            "How long tombstones survive in compacted topics.",
            ("log.cleaner.delete.retention.ms",),
            at_least=0,
        ),
        _def(
            "file.delete.delay.ms",
            _L,
            60_000,
            "Delay before a .deleted segment file is removed.",
            ("log.segment.delete.delay.ms",),
            at_least=0,
        ),
        _def(
            "flush.messages",
            _L,
            LONG_MAX,
            "fsync after this many messages.",
            ("log.flush.interval.messages",),
            at_least=1,
        ),
        _def(
            "flush.ms",
            _L,
            LONG_MAX,
            "fsync when data is older than this.",
            ("log.flush.interval.ms",),
            at_least=0,
        ),
        _def(
            "follower.replication.throttled.replicas",
            _LIST,
            [],
            "Throttled follower replicas.",
            ("follower.replication.throttled.replicas",),
        ),
        _def(
            "index.interval.bytes",
            _I,
            4096,
            "Bytes of log between offset index entries.",
            ("log.index.interval.bytes",),
            at_least=0,
        ),
        _def(
            "leader.replication.throttled.replicas",
            _LIST,
            [],
            "Throttled leader replicas.",
            ("leader.replication.throttled.replicas",),
        ),
        _def(
            "max.compaction.lag.ms",
            _L,
            LONG_MAX,
            "Longest a record may stay uncompacted.",
            ("log.cleaner.max.compaction.lag.ms",),
            at_least=1,
        ),
        _def(
            "max.message.bytes",
            _I,
            1_048_588,
            "Largest record batch the topic accepts.",
            ("message.max.bytes",),
            at_least=0,
        ),
        _def(
            "message.timestamp.after.max.ms",
            _L,
            3_600_000,
            "Largest allowed lead of a CreateTime over the broker clock (Kafka 4's "
            "default, KIP-1030: one hour).",
            ("log.message.timestamp.after.max.ms",),
            at_least=0,
        ),
        _def(
            "message.timestamp.before.max.ms",
            _L,
            LONG_MAX,
            "Largest allowed lag of a CreateTime behind the broker clock.",
            ("log.message.timestamp.before.max.ms",),
            at_least=0,
        ),
        _def(
            "message.timestamp.type",
            _S,
            "CreateTime",
            "Whether batches keep CreateTime or get LogAppendTime.",
            ("log.message.timestamp.type",),
            one_of=("CreateTime", "LogAppendTime"),
        ),
        _def(
            "min.cleanable.dirty.ratio",
            _D,
            0.5,
            "Dirty fraction of the log that triggers compaction.",
            ("log.cleaner.min.cleanable.ratio",),
            at_least=0.0,
            at_most=1.0,
        ),
        _def(
            "min.compaction.lag.ms",
            _L,
            0,
            "Records younger than this are not compacted.",
            ("log.cleaner.min.compaction.lag.ms",),
            at_least=0,
        ),
        _def(
            "min.insync.replicas",
            _I,
            1,
            "Replicas that must acknowledge an acks=all write.",
            ("min.insync.replicas",),
            at_least=1,
        ),
        _def(
            "preallocate",
            _B,
            False,
            "Preallocate segment files at roll.",
            ("log.preallocate",),
        ),
        _def(
            "retention.bytes",
            _L,
            -1,
            "Size above which old segments are deleted (-1: no limit).",
            ("log.retention.bytes",),
        ),
        _def(
            "retention.ms",
            _L,
            _WEEK,
            "Age after which old segments are deleted (-1: no limit).",
            (
                "log.retention.ms",
                BrokerSynonym("log.retention.minutes", _MINUTE),
                BrokerSynonym("log.retention.hours", _HOUR),
            ),
            at_least=-1,
        ),
        _def(
            "segment.bytes",
            _I,
            1_073_741_824,
            "Size at which a segment is rolled.",
            ("log.segment.bytes",),
            at_least=14,
            note=SEGMENT_BYTES_NOTE,
        ),
        _def(
            "segment.index.bytes",
            _I,
            10_485_760,
            "Preallocated size of each segment's indexes.",
            ("log.index.size.max.bytes",),
            at_least=4,
        ),
        _def(
            "segment.jitter.ms",
            _L,
            0,
            "Random jitter subtracted from segment.ms.",
            ("log.roll.jitter.ms", BrokerSynonym("log.roll.jitter.hours", _HOUR)),
            at_least=0,
        ),
        _def(
            "segment.ms",
            _L,
            _WEEK,
            "Age at which a segment is rolled.",
            ("log.roll.ms", BrokerSynonym("log.roll.hours", _HOUR)),
            at_least=1,
        ),
        _def(
            "unclean.leader.election.enable",
            _B,
            False,
            "Allow out-of-sync replicas to become leader.",
            ("unclean.leader.election.enable",),
            readers=("controller",),
        ),
    ),
)
