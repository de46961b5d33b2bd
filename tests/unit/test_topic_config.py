"""Topic config catalog: validation messages, broker synonyms, DescribeConfigs sources, LogConfig."""

from __future__ import annotations

import pytest

from odradek.config_catalog.definition import LONG_MAX, InvalidConfigError
from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.topic_config import ConfigSource, LogConfig, describe, resolve, validate_topic_configs


def test_validate_types_and_values() -> None:
    typed = validate_topic_configs(
        {
            "cleanup.policy": "compact,delete",
            "retention.ms": "-1",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "TRUE",
            "compression.type": "zstd",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert typed == {
        "cleanup.policy": ["compact", "delete"],
        "retention.ms": -1,
        "min.cleanable.dirty.ratio": 0.1,
        "preallocate": True,
        "compression.type": "zstd",
        "message.timestamp.type": "LogAppendTime",
    }


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "retention.ms",
            "abc",
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        ),
        (
            "segment.bytes",
            "3000000000",
            "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT",
        ),
        (
            "segment.ms",
            "0",
            "Invalid value 0 for configuration segment.ms: Value must be at least 1",
        ),
        (
            "cleanup.policy",
            "purge",
            "Invalid value purge for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            "message.timestamp.type",
            "createtime",
            "String must be one of: CreateTime, LogAppendTime",
        ),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1.0"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ],
)
def test_kafka_like_error_messages(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        validate_topic_configs({name: value})
    assert message in str(info.value)
    assert info.value.name == name
    assert info.value.kafka_error == "INVALID_CONFIG"


def test_cross_field_check() -> None:
    with pytest.raises(InvalidConfigError, match=r"min\.compaction\.lag\.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_broker_synonyms_in_precedence_order() -> None:
    assert resolve({}, {})["retention.ms"] == 604_800_000
    assert resolve({}, {"log.retention.hours": "1"})["retention.ms"] == 3_600_000
    assert (
        resolve({}, {"log.retention.hours": "1", "log.retention.minutes": "2"})["retention.ms"]
        == 120_000
    )
    assert resolve({}, {"log.retention.minutes": "2", "log.retention.ms": "7"})["retention.ms"] == 7
    assert resolve({"retention.ms": "9"}, {"log.retention.ms": "7"})["retention.ms"] == 9
    assert resolve({}, {"message.max.bytes": "2000"})["max.message.bytes"] == 2000
    assert resolve({}, {"log.segment.bytes": "1048576"})["segment.bytes"] == 1_048_576
    assert resolve({}, {"log.roll.hours": "2"})["segment.ms"] == 7_200_000


def test_describe_sources_and_synonyms() -> None:
    entries = {
        e.name: e for e in describe({"cleanup.policy": "compact"}, {"log.retention.hours": "24"})
    }
    assert set(entries) == set(TOPIC_CONFIGS)
    cp = entries["cleanup.policy"]
    assert (cp.value, cp.source, cp.is_default) == (
        "compact",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        False,
    )
    assert [(s.name, s.source) for s in cp.synonyms] == [
        ("cleanup.policy", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", ConfigSource.DEFAULT_CONFIG),
    ]
    rm = entries["retention.ms"]
    assert (rm.value, rm.source, rm.is_default) == (
        "86400000",
        ConfigSource.STATIC_BROKER_CONFIG,
        False,
    )
    assert [(s.name, s.value, int(s.source)) for s in rm.synonyms] == [
        ("log.retention.hours", "24", 4),
        ("log.retention.hours", "168", 5),
    ]
    mmb = entries["max.message.bytes"]
    assert (mmb.value, int(mmb.source), mmb.is_default) == ("1048588", 5, True)
    name, value, source, is_default, is_sensitive, read_only, synonyms = mmb
    assert (name, value, source, is_default) == ("max.message.bytes", "1048588", 5, True)
    assert (is_sensitive, read_only) == (False, False)
    assert [(s.name, s.source) for s in synonyms] == [("message.max.bytes", 5)]
    assert entries["flush.messages"].value == str(LONG_MAX)


def test_log_config_from_topic_configs() -> None:
    cfg = LogConfig.from_topic_configs(
        {"cleanup.policy": "compact,delete", "segment.bytes": "1048576"},
        {"log.retention.hours": "1"},
    )
    assert cfg.compact and cfg.delete
    assert cfg.segment_bytes == 1_048_576
    assert cfg.retention_ms == 3_600_000
    assert cfg.max_message_bytes == 1_048_588
    assert cfg.segment_index_bytes == 10_485_760
    assert LogConfig() == LogConfig.from_topic_configs({}, {})
    assert not LogConfig().log_append_time
