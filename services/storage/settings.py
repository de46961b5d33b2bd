"""The storage node's settings, read once from :class:`odradek.config.Config`.

Kafka's broker names where Kafka has one (``replica.lag.time.max.ms``,
``replica.fetch.*``, ``num.replica.fetchers``, ``log.dirs``...). Everything else in the
config map (``log.segment.bytes``, ``message.max.bytes``, ``min.insync.replicas``...) is
passed to the log layer as static broker defaults; the controller's dynamic
``cluster_configs`` override those at run time, as Kafka's dynamic cluster-wide
defaults override ``server.properties``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from odradek.config import Config, ConfigError
from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.storage import STORAGE_CONFIGS

DEFAULTS: dict[str, str] = STORAGE_CONFIGS.defaults()


@dataclass(frozen=True)
class StorageSettings:
    node_id: int
    host: str
    grpc_port: int
    metrics_port: int
    controller_address: str
    log_dirs: list[Path]
    rack: str = STORAGE_CONFIGS.str("rack")
    data_port: int = STORAGE_CONFIGS.int("data.port")
    data_socket_path: str = STORAGE_CONFIGS.str("data.socket.path")
    replica_lag_time_max_ms: int = BROKER_CONFIGS.int("replica.lag.time.max.ms")
    replica_fetch_max_bytes: int = STORAGE_CONFIGS.int("replica.fetch.max.bytes")
    replica_fetch_wait_max_ms: int = STORAGE_CONFIGS.int("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: int = STORAGE_CONFIGS.int("replica.fetch.min.bytes")
    replica_fetch_response_max_bytes: int = STORAGE_CONFIGS.int("replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms: int = STORAGE_CONFIGS.int("replica.fetch.backoff.ms")
    num_replica_fetchers: int = STORAGE_CONFIGS.int("num.replica.fetchers")
    controlled_shutdown_enable: bool = STORAGE_CONFIGS.bool("controlled.shutdown.enable")
    controlled_shutdown_timeout_ms: int = STORAGE_CONFIGS.int("controlled.shutdown.timeout.ms")
    transaction_partition_verification_enable: bool = STORAGE_CONFIGS.bool(
        "transaction.partition.verification.enable"
    )
    request_timeout_ms: int = STORAGE_CONFIGS.int("request.timeout.ms")
    transaction_state_log_num_partitions: int = BROKER_CONFIGS.int(
        "transaction.state.log.num.partitions"
    )
    broker_defaults: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> StorageSettings:
        node_id = STORAGE_CONFIGS.read_int(config, "node.id")
        listener = config.str("grpc.listener")
        host, sep, port = listener.rpartition(":")
        if not sep or not host:
            raise ConfigError(
                f"Invalid value {listener!r} for configuration grpc.listener: expected host:port"
            )
        try:
            grpc_port = int(port)
        except ValueError:
            raise ConfigError(
                f"Invalid value {listener!r} for configuration grpc.listener: bad port"
            ) from None
        dirs = config.list("log.dirs") or [f"./data/storage-{node_id}"]
        return cls(
            node_id=node_id,
            host=host,
            grpc_port=grpc_port,
            metrics_port=STORAGE_CONFIGS.read_int(config, "metrics.port"),
            controller_address=config.str("controller.address"),
            log_dirs=[Path(d) for d in dirs],
            rack=STORAGE_CONFIGS.read_str(config, "rack"),
            data_port=STORAGE_CONFIGS.read_int(config, "data.port"),
            data_socket_path=STORAGE_CONFIGS.read_str(config, "data.socket.path"),
            replica_lag_time_max_ms=BROKER_CONFIGS.read_int(config, "replica.lag.time.max.ms"),
            replica_fetch_max_bytes=STORAGE_CONFIGS.read_int(config, "replica.fetch.max.bytes"),
            replica_fetch_wait_max_ms=STORAGE_CONFIGS.read_int(config, "replica.fetch.wait.max.ms"),
            replica_fetch_min_bytes=STORAGE_CONFIGS.read_int(config, "replica.fetch.min.bytes"),
            replica_fetch_response_max_bytes=STORAGE_CONFIGS.read_int(
                config, "replica.fetch.response.max.bytes"
            ),
            replica_fetch_backoff_ms=STORAGE_CONFIGS.read_int(config, "replica.fetch.backoff.ms"),
            num_replica_fetchers=STORAGE_CONFIGS.read_int(config, "num.replica.fetchers"),
            controlled_shutdown_enable=STORAGE_CONFIGS.read_bool(
                config, "controlled.shutdown.enable"
            ),
            controlled_shutdown_timeout_ms=STORAGE_CONFIGS.read_int(
                config, "controlled.shutdown.timeout.ms"
            ),
            transaction_partition_verification_enable=STORAGE_CONFIGS.read_bool(
                config, "transaction.partition.verification.enable"
            ),
            request_timeout_ms=STORAGE_CONFIGS.read_int(config, "request.timeout.ms"),
            transaction_state_log_num_partitions=BROKER_CONFIGS.read_int(
                config, "transaction.state.log.num.partitions"
            ),
            broker_defaults=config.as_dict(),
        )
