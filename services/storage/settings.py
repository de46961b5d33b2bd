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

DEFAULTS: dict[str, str] = {
    "grpc.listener": "127.0.0.1:0",
    "metrics.port": "0",
    "controller.address": "127.0.0.1:9093",
    "log.dirs": "",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.backoff.ms": "1000",
    "num.replica.fetchers": "1",
    "controlled.shutdown.enable": "true",
    # Ours (Kafka bounds controlled shutdown by retries x backoff instead).
    "controlled.shutdown.timeout.ms": "30000",
    "rack": "",
}


@dataclass(frozen=True)
class StorageSettings:
    node_id: int
    host: str
    grpc_port: int
    metrics_port: int
    controller_address: str
    log_dirs: list[Path]
    rack: str = ""
    replica_lag_time_max_ms: int = 30000
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    num_replica_fetchers: int = 1
    controlled_shutdown_enable: bool = True
    controlled_shutdown_timeout_ms: int = 30000
    broker_defaults: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> StorageSettings:
        node_id = config.int("node.id", min=0)
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
            metrics_port=config.int("metrics.port", 0, min=0),
            controller_address=config.str("controller.address"),
            log_dirs=[Path(d) for d in dirs],
            rack=config.str("rack", ""),
            replica_lag_time_max_ms=config.int("replica.lag.time.max.ms", min=1),
            replica_fetch_max_bytes=config.int("replica.fetch.max.bytes", min=0),
            replica_fetch_wait_max_ms=config.int("replica.fetch.wait.max.ms", min=0),
            replica_fetch_min_bytes=config.int("replica.fetch.min.bytes", min=1),
            replica_fetch_response_max_bytes=config.int("replica.fetch.response.max.bytes", min=0),
            replica_fetch_backoff_ms=config.int("replica.fetch.backoff.ms", min=0),
            num_replica_fetchers=config.int("num.replica.fetchers", min=1),
            controlled_shutdown_enable=config.bool("controlled.shutdown.enable"),
            controlled_shutdown_timeout_ms=config.int("controlled.shutdown.timeout.ms", min=0),
            broker_defaults=config.as_dict(),
        )
