"""The settings catalog against Apache Kafka 4's documented defaults, and its own rules.

Expected values are written here from Kafka 4.0's config definitions (the broker and
topic config tables of https://kafka.apache.org/40/documentation.html, generated from
``LogConfig``/``TopicConfig``, ``ServerLogConfigs``, ``ReplicationConfigs``,
``GroupCoordinatorConfig``, ``CleanerConfig``, ``SocketServerConfigs``, ``KRaftConfigs``,
``ServerConfigs`` and ``TransactionLogConfig``), not read from the catalog, so a
default that drifts fails here. Where Odradek deliberately differs, the setting is
listed in ``DEVIATIONS`` and its catalog entry must say so in ``note`` (which
``docs/configuration.md`` shows).
"""

from __future__ import annotations

import dataclasses

import pytest

from odradek.config import Config, ConfigError
from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.definition import ConfigDef
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.config_catalog.index import CATALOGS
from odradek.config_catalog.process import process_settings
from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.coordinator.service import DEFAULTS as COORDINATOR_DEFAULTS
from odradek.coordinator.shard import GroupConfig
from odradek.gateway.connection import ConnectionLimits
from odradek.gateway.gateway import DEFAULTS as GATEWAY_DEFAULTS
from odradek.log.segment import SegmentSettings
from odradek.offsets.store import StoreSettings
from odradek.topic_config import LogConfig

LONG_MAX = str(2**63 - 1)
INT_MAX = str(2**31 - 1)

# Kafka 4.0 defaults in their string form (as DescribeConfigs shows them); None: unset.
KAFKA_4_DEFAULTS: dict[str, str | None] = {
    # topic configs (LogConfig / TopicConfig)
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "max.compaction.lag.ms": LONG_MAX,
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
    # broker: ServerLogConfigs, ReplicationConfigs, ServerConfigs, CleanerConfig
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "message.max.bytes": "1048588",
    "replica.lag.time.max.ms": "30000",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "leader.imbalance.per.broker.percentage": "10",
    "log.dirs": None,
    "log.segment.bytes": "1073741824",
    "log.retention.hours": "168",
    "log.retention.minutes": None,
    "log.retention.ms": None,
    "log.retention.bytes": "-1",
    "log.roll.hours": "168",
    "log.roll.ms": None,
    "log.roll.jitter.hours": "0",
    "log.roll.jitter.ms": None,
    "log.cleanup.policy": "delete",
    "log.index.size.max.bytes": "10485760",
    "log.index.interval.bytes": "4096",
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": LONG_MAX,
    "log.message.timestamp.after.max.ms": "3600000",
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.dedupe.buffer.size": "134217728",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": LONG_MAX,
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.segment.delete.delay.ms": "60000",
    "log.preallocate": "false",
    "log.retention.check.interval.ms": "300000",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.backoff.ms": "1000",
    "num.replica.fetchers": "1",
    "leader.replication.throttled.rate": LONG_MAX,  # QuotaConfig
    "follower.replication.throttled.rate": LONG_MAX,
    "replica.alter.log.dirs.io.max.bytes.per.second": LONG_MAX,
    "controlled.shutdown.enable": "true",
    "producer.id.expiration.ms": "86400000",  # TransactionLogConfig
    # GroupCoordinatorConfig
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": INT_MAX,
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.max.size": INT_MAX,
    "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    "group.consumer.migration.policy": "bidirectional",
    # TransactionLogConfig, TransactionStateManagerConfig
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.segment.bytes": "104857600",
    "transaction.state.log.load.buffer.size": "5242880",
    "transaction.max.timeout.ms": "900000",
    "transaction.partition.verification.enable": "true",
    # connection limits (SocketServerConfigs)
    "max.connections": "2147483647",
    "connections.max.reauth.ms": "0",
    "max.connection.creation.rate": "2147483647",
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
    "controller.quota.window.num": "11",
    "controller.quota.window.size.seconds": "1",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",
    # security (SocketServerConfigs, BrokerSecurityConfigs, SslConfigs, StandardAuthorizer)
    "listener.security.protocol.map": (
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
    ),
    "sasl.enabled.mechanisms": "GSSAPI",
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.keystore.key": None,
    "ssl.key.password": None,
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": None,
    "ssl.truststore.certificates": None,
    "ssl.client.auth": "none",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "authorizer.class.name": "",
    "super.users": None,
    "allow.everyone.if.no.acl.found": "false",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    # SocketServerConfigs, ServerConfigs
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": None,
    "broker.rack": None,
    "socket.request.max.bytes": "104857600",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "queued.max.requests": "500",
    "queued.max.request.bytes": "-1",
    "connections.max.idle.ms": "600000",
    "request.timeout.ms": "30000",
    # KRaftConfigs (node.id's -1 means "not set")
    "node.id": None,
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
}

# Kafka-named settings whose Odradek default differs on purpose (see each note).
DEVIATIONS = {
    "group.consumer.assignors",
    "log.dirs",
    "listeners",
    "queued.max.request.bytes",
    "node.id",
    "broker.session.timeout.ms",
    "sasl.enabled.mechanisms",  # GSSAPI (Kerberos) is not served
    "ssl.keystore.type",  # PEM files only
    "ssl.truststore.type",
}


def kafka_named() -> list[tuple[str, ConfigDef]]:
    return [(c.title, d) for c in CATALOGS for d in c.values() if d.kafka]


@pytest.mark.parametrize(
    ("catalog", "definition"),
    kafka_named(),
    ids=[f"{title}:{d.name}" for title, d in kafka_named()],
)
def test_kafka_named_defaults_are_kafka_4s(catalog: str, definition: ConfigDef) -> None:
    assert definition.name in KAFKA_4_DEFAULTS, f"{definition.name}: pin Kafka's default here"
    kafka = KAFKA_4_DEFAULTS[definition.name]
    if definition.name in DEVIATIONS and definition.default_text != kafka:
        assert definition.note, f"{definition.name} differs from Kafka ({kafka}) without a note"
    else:
        assert definition.default_text == kafka


def test_every_listed_deviation_still_deviates_somewhere() -> None:
    for name in DEVIATIONS:
        ours = {d.default_text for _, d in kafka_named() if d.name == name}
        assert ours and ours != {KAFKA_4_DEFAULTS[name]}, name


def test_a_setting_is_defined_in_one_catalog() -> None:
    seen: dict[str, str] = {}
    per_process = {d.name for d in process_settings(0)} | {"request.timeout.ms"}
    # Kafka names some broker configs like the topic config they set (min.insync.replicas).
    same_named = {s.name for t in TOPIC_CONFIGS.values() for s in t.synonyms if s.name == t.name}
    for catalog in CATALOGS:
        for name in catalog:
            if name in per_process:
                continue  # one definition (odradek.config_catalog.process)
            if catalog is BROKER_CONFIGS and name in same_named:
                continue
            assert name not in seen, f"{name} in {seen.get(name)} and {catalog.title}"
            seen[name] = catalog.title


def test_every_setting_is_documented_and_has_readers() -> None:
    for catalog in CATALOGS:
        for d in catalog.values():
            assert d.doc and d.readers, d.name
            assert set(d.readers) <= {
                "gateway",
                "storage",
                "controller",
                "coordinator",
                "offsets",
                "transactions",
            }
            if d.default is not None:
                assert d.parse(d.default_text) == d.default, d.name  # the default is valid


def test_broker_synonyms_default_to_their_topic_configs_default() -> None:
    for topic in TOPIC_CONFIGS.values():
        for synonym in topic.synonyms:
            broker = (
                BROKER_CONFIGS[synonym.name].default if synonym.name in BROKER_CONFIGS else None
            )
            if broker is not None:
                assert broker * synonym.scale == topic.default, synonym.name  # type: ignore[operator]
        if topic.default_synonym is not None:
            name, text = topic.default_synonym
            if name in BROKER_CONFIGS and BROKER_CONFIGS[name].default is not None:
                assert BROKER_CONFIGS[name].default_text == text


def _field_defaults(cls: type) -> dict[str, object]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def test_dataclass_defaults_follow_the_catalog() -> None:
    log = _field_defaults(LogConfig)
    for name, d in TOPIC_CONFIGS.items():
        value = log[name.replace(".", "_")]
        assert (list(value) if isinstance(value, tuple) else value) == d.default, name
    segment = SegmentSettings()
    assert segment.segment_bytes == TOPIC_CONFIGS.int("segment.bytes")
    assert segment.max_index_size == TOPIC_CONFIGS.int("segment.index.bytes")
    groups = GroupConfig()
    assert groups.max_session_timeout_ms == BROKER_CONFIGS.int("group.max.session.timeout.ms")
    assert StoreSettings().retention_ms == BROKER_CONFIGS.int("offsets.retention.minutes") * 60_000
    assert ConnectionLimits().max_inflight_bytes == GATEWAY_CONFIGS.int(
        "connection.max.queued.request.bytes"
    )


def test_services_start_from_their_catalog_defaults() -> None:
    assert GATEWAY_DEFAULTS == GATEWAY_CONFIGS.defaults()
    assert COORDINATOR_DEFAULTS["node.id"] == "200"


def test_reading_a_setting_enforces_the_catalogued_bound() -> None:
    config = Config(
        GATEWAY_CONFIGS.defaults(), environ={}, overrides={"socket.request.max.bytes": "100"}
    )
    with pytest.raises(ConfigError, match="at least 1024"):
        GATEWAY_CONFIGS.read_int(config, "socket.request.max.bytes")
    assert GATEWAY_CONFIGS.read_int(Config({}, environ={}), "queued.max.requests") == 500
