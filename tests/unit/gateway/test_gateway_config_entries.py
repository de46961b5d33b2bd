"""DescribeConfigs assembly: values, sources and synonyms as Kafka's ConfigHelper reports them."""

from __future__ import annotations

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.definition import ConfigType
from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.gateway.config_entries import (
    BrokerSetting,
    broker_config_entries,
    broker_name_problem,
    broker_settings,
    selected,
    topic_config_entries,
)
from odradek.protocol.errors import ErrorCode
from odradek.topic_config import ConfigSource

DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC = ConfigSource.STATIC_BROKER_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG
TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG


def by_name(entries: list) -> dict:
    return {e.name: e for e in entries}


def test_kafka_defaults_published_by_the_controller_count_as_defaults() -> None:
    # The controller publishes effective values: Kafka's defaults included.
    published = {**BROKER_CONFIGS.defaults(), "log.segment.bytes": "2048", "num.partitions": "3"}
    settings = broker_settings(published)
    assert settings == {
        "log.segment.bytes": BrokerSetting("2048", STATIC),
        "num.partitions": BrokerSetting("3", STATIC),
    }


def test_dynamic_overrides_are_dynamic_default_broker_config() -> None:
    published = {**BROKER_CONFIGS.defaults(), "log.retention.ms": "1000", "num.partitions": "3"}
    settings = broker_settings(published, {"log.retention.ms": "1000"})
    assert settings["log.retention.ms"] == BrokerSetting("1000", DYNAMIC_DEFAULT)
    assert settings["num.partitions"].source is STATIC
    # A dynamic value equal to Kafka's default is still reported as set dynamically.
    settings = broker_settings(
        BROKER_CONFIGS.defaults(),
        {"log.segment.bytes": BROKER_CONFIGS.defaults()["log.segment.bytes"]},
    )
    assert settings["log.segment.bytes"].source is DYNAMIC_DEFAULT


def test_untouched_topic_lists_every_config_with_its_default_source() -> None:
    entries = topic_config_entries(
        {}, broker_settings(BROKER_CONFIGS.defaults()), include_synonyms=True
    )
    assert [e.name for e in entries] == sorted(TOPIC_CONFIGS)
    for e in entries:
        assert e.source is DEFAULT and e.is_default, e
        assert not e.read_only and not e.is_sensitive
    retention = by_name(entries)["retention.ms"]
    assert retention.value == "604800000"
    assert retention.config_type is ConfigType.LONG
    assert retention.documentation
    # Kafka lists the broker default that would apply as a DEFAULT_CONFIG synonym.
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.hours", "168", DEFAULT)
    ]


def test_sources_and_synonym_order_for_override_dynamic_and_static() -> None:
    settings = {
        "log.retention.ms": BrokerSetting("5000", DYNAMIC_DEFAULT),
        "log.segment.bytes": BrokerSetting("4096", STATIC),
    }
    entries = by_name(
        topic_config_entries(
            {"retention.ms": "1000", "cleanup.policy": "compact"}, settings, include_synonyms=True
        )
    )
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == ("1000", TOPIC, False)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", TOPIC),
        ("log.retention.ms", "5000", DYNAMIC_DEFAULT),
        ("log.retention.hours", "168", DEFAULT),
    ]
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == ("4096", STATIC)
    assert [s.source for s in segment.synonyms] == [STATIC, DEFAULT]
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source is TOPIC


def test_dynamic_broker_value_applies_to_topics_without_override() -> None:
    settings = {"log.retention.ms": BrokerSetting("5000", DYNAMIC_DEFAULT)}
    retention = by_name(topic_config_entries({}, settings, include_synonyms=False))["retention.ms"]
    assert (retention.value, retention.source, retention.synonyms) == ("5000", DYNAMIC_DEFAULT, ())


def test_configuration_keys_filter_none_and_empty_mean_all() -> None:
    assert selected(None) is None
    assert selected([]) is None
    keys = selected(["retention.ms", "no.such.config"])
    entries = topic_config_entries({}, {}, include_synonyms=False, keys=keys)
    assert [e.name for e in entries] == ["retention.ms"]


def test_broker_entries_mark_static_only_configs_read_only() -> None:
    settings = {
        "num.partitions": BrokerSetting("3", STATIC),
        "log.retention.ms": BrokerSetting("5000", DYNAMIC_DEFAULT),
    }
    entries = by_name(broker_config_entries(settings, include_synonyms=True))
    assert set(entries) == set(BROKER_CONFIGS)
    num = entries["num.partitions"]
    assert (num.value, num.source, num.read_only) == ("3", STATIC, True)
    assert [(s.value, s.source) for s in num.synonyms] == [("3", STATIC), ("1", DEFAULT)]
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source, retention.read_only) == (
        "5000",
        DYNAMIC_DEFAULT,
        False,
    )
    # A config without a Kafka default is listed with a null value.
    jitter = entries["log.roll.jitter.ms"]
    assert (jitter.value, jitter.source, jitter.is_default) == (None, DEFAULT, True)
    assert entries["log.cleaner.min.cleanable.ratio"].config_type is ConfigType.DOUBLE


def test_cluster_default_resource_lists_only_dynamic_defaults() -> None:
    settings = {
        "num.partitions": BrokerSetting("3", STATIC),
        "log.retention.ms": BrokerSetting("5000", DYNAMIC_DEFAULT),
    }
    entries = broker_config_entries(settings, include_synonyms=True, dynamic_defaults_only=True)
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.retention.ms", "5000", DYNAMIC_DEFAULT)
    ]
    assert [s.source for s in entries[0].synonyms] == [DYNAMIC_DEFAULT]


def test_broker_resource_names_on_a_brokers_port() -> None:
    """As on a Kafka broker: the name is empty or the addressed broker's id."""
    assert broker_name_problem("", 101, [100, 101], alter=False) is None
    assert broker_name_problem("101", 101, [100, 101], alter=False) is None
    assert broker_name_problem("100", 101, [100, 101], alter=False) == (
        ErrorCode.INVALID_REQUEST,
        "Unexpected broker id, expected 101 or empty string, but received 100",
    )
    assert broker_name_problem("100", 101, None, alter=True) == (
        ErrorCode.INVALID_REQUEST,
        "Unexpected broker id, expected 101, but received 100",
    )
    assert broker_name_problem("x", 101, None, alter=False) == (
        ErrorCode.INVALID_REQUEST,
        "Broker id must be an integer, but it is: x",
    )
    assert broker_name_problem("x", 101, None, alter=True) == (
        ErrorCode.INVALID_REQUEST,
        "Node id must be an integer, but it is: x",
    )


def test_broker_resource_names_on_the_bootstrap_listener() -> None:
    """No broker is addressed: any registered storage node is, else Kafka's controller error."""
    assert broker_name_problem("100", None, [100, 101], alter=False) is None
    assert broker_name_problem("7", None, [100, 101], alter=False) == (
        ErrorCode.BROKER_ID_NOT_REGISTERED,
        "No node with id 7 found.",
    )
    # Alters leave the registration check to the controller.
    assert broker_name_problem("7", None, None, alter=True) is None


def test_per_broker_settings_rank_above_the_cluster_default() -> None:
    published = {**BROKER_CONFIGS.defaults(), "log.retention.ms": "60000", "num.partitions": "3"}
    settings = broker_settings(
        published, {"log.retention.ms": "60000"}, {"log.retention.ms": "5000"}
    )
    retention = settings["log.retention.ms"]
    assert retention == BrokerSetting("5000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in retention.hidden] == [("60000", DYNAMIC_DEFAULT)]
    entries = by_name(broker_config_entries(settings, include_synonyms=True))
    assert [(s.value, s.source) for s in entries["log.retention.ms"].synonyms] == [
        ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("60000", DYNAMIC_DEFAULT),
    ]
    assert [(s.value, s.source) for s in entries["num.partitions"].synonyms] == [
        ("3", STATIC),
        ("1", DEFAULT),
    ]
