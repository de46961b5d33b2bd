"""The storage node's own settings (Kafka's ``ReplicationConfigs``/``ServerLogConfigs``
names), including the log manager's background intervals.

These are the storage node's start-up defaults (``python -m odradek.storage``); its
whole config map also serves as static broker defaults for the log layer, overridden
by the controller's cluster-wide broker configs.
"""

from __future__ import annotations

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.process import REQUEST_TIMEOUT_MS, process_settings
from odradek.config_catalog.topic import TOPIC_CONFIGS

_INT, _LONG, _BOOL, _STRING, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
)

STORAGE_CONFIGS = Catalog(
    "Storage node",
    "Partition replicas on local disk (`python -m odradek.storage`).",
    ("storage",),
    (
        *process_settings(None),
        ConfigDef(
            "log.dirs",
            _LIST,
            [],
            "Directories holding the partition logs (empty: ./data/storage-<node.id>).",
            note="Kafka's log.dirs is unset and falls back to log.dir=/tmp/kafka-logs.",
        ),
        ConfigDef(
            "data.port",
            _INT,
            0,
            "Port of the data link, the bytes-only Produce/Fetch path gateways use beside "
            "gRPC, on the grpc.listener host (0: any free port; -1: none, gateways call "
            "Produce/Fetch over gRPC; docs/data-link.md).",
            at_least=-1,
            kafka=False,
        ),
        ConfigDef(
            "data.socket.path",
            _STRING,
            "",
            "Unix socket on which the data link also listens, for gateways on this host: "
            "no TLS there, callers of this process's uid only; the directory is made "
            "mode 0700 (empty: none; `odradek up` sets <data>/storage-<id>/link/data.sock; "
            'docs/data-link.md, "Same host").',
            kafka=False,
        ),
        ConfigDef(
            "rack",
            _STRING,
            "",
            "Rack of this storage node, for replica placement (Kafka: broker.rack).",
            kafka=False,
        ),
        ConfigDef(
            "replica.fetch.max.bytes",
            _INT,
            1_048_576,
            "Bytes a follower asks for per partition in one fetch.",
            at_least=0,
        ),
        ConfigDef(
            "replica.fetch.wait.max.ms",
            _INT,
            500,
            "Longest a follower's fetch waits at the leader for data.",
            at_least=0,
        ),
        ConfigDef(
            "replica.fetch.min.bytes",
            _INT,
            1,
            "Bytes a follower's fetch waits for at the leader.",
            at_least=1,
        ),
        ConfigDef(
            "replica.fetch.response.max.bytes",
            _INT,
            10_485_760,
            "Bytes a follower asks for in one fetch over all partitions.",
            at_least=0,
        ),
        ConfigDef(
            "replica.fetch.backoff.ms",
            _INT,
            1_000,
            "How long a follower waits after a failed fetch.",
            at_least=0,
        ),
        ConfigDef(
            "num.replica.fetchers",
            _INT,
            1,
            "Fetch streams per leader node.",
            at_least=1,
        ),
        ConfigDef(
            "controlled.shutdown.enable",
            _BOOL,
            True,
            "On SIGTERM, hand leadership to other replicas before stopping.",
        ),
        ConfigDef(
            "controlled.shutdown.timeout.ms",
            _INT,
            30_000,
            "Longest a controlled shutdown waits for leadership to move "
            "(Kafka bounds it by controlled.shutdown.max.retries x retry.backoff.ms).",
            at_least=0,
            kafka=False,
        ),
        ConfigDef(
            "log.flush.scheduler.interval.ms",
            _LONG,
            TOPIC_CONFIGS.int("flush.ms"),
            "How often logs are checked for a flush due under flush.ms.",
        ),
        ConfigDef(
            "log.flush.offset.checkpoint.interval.ms",
            _INT,
            60_000,
            "How often recovery points are checkpointed.",
            at_least=0,
        ),
        ConfigDef(
            "log.flush.start.offset.checkpoint.interval.ms",
            _INT,
            60_000,
            "How often log start offsets are checkpointed.",
            at_least=0,
        ),
        ConfigDef(
            "log.cleaner.dedupe.buffer.size",
            _LONG,
            134_217_728,
            "Memory of the cleaner's key-to-offset map.",
        ),
        ConfigDef(
            "transaction.partition.verification.enable",
            _BOOL,
            True,
            "Before a transactional produce opens a transaction on a partition, the leader "
            "asks the transaction coordinator whether the partition was added to it (KIP-890).",
        ),
        REQUEST_TIMEOUT_MS,
        ConfigDef(
            "producer.id.expiration.ms",
            _INT,
            86_400_000,
            "Producer state of an idle producer id is dropped after this long.",
            at_least=1,
        ),
    ),
)
