"""The replication controller's own settings (``python -m odradek.controller``).

The controller also reads every cluster-wide broker config
(:data:`odradek.config_catalog.broker.BROKER_CONFIGS`) and publishes them.
"""

from __future__ import annotations

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.process import CONTROLLER_LISTENER, process_settings

_INT, _STRING = ConfigType.INT, ConfigType.STRING

CONTROLLER_CONFIGS = Catalog(
    "Controller",
    "Cluster metadata, leader election and partition assignment (`python -m odradek.controller`).",
    ("controller",),
    (
        *process_settings(3000, grpc_listener=CONTROLLER_LISTENER, controller_address=False),
        ConfigDef(
            "metadata.store",
            _STRING,
            "./data/controller",
            "Where metadata lives: a directory (embedded store) or etcd://host:port[/root].",
            kafka=False,
        ),
        ConfigDef(
            "metadata.store.snapshot.entries",
            _INT,
            1_000,
            "Embedded store: journal entries between snapshots.",
            at_least=1,
            kafka=False,
        ),
        *(
            ConfigDef(
                f"metadata.store.tls.{name}",
                _STRING,
                "",
                f"etcd over TLS: {what} (etcd's --trusted-ca-file, --cert-file/--key-file "
                "with --client-cert-auth; docs/security.md).",
                kafka=False,
            )
            for name, what in (
                ("ca", "PEM file of the CA that signed etcd's server certificate"),
                ("cert", "PEM file of the controller's client certificate"),
                ("key", "PEM file of the controller's client key"),
                (
                    "server.name",
                    "name to check etcd's certificate against (default: the endpoint's host)",
                ),
            )
        ),
        ConfigDef(
            "metadata.store.timeout.ms",
            _INT,
            5_000,
            "Upper bound of one metadata store operation.",
            at_least=1,
            kafka=False,
        ),
        ConfigDef(
            "broker.heartbeat.interval.ms",
            _INT,
            2_000,
            "How often every service heartbeats to the controller.",
            at_least=1,
        ),
        ConfigDef(
            "broker.session.timeout.ms",
            _INT,
            6_000,
            "A service without a heartbeat for this long is fenced.",
            at_least=1,
            note="Kafka's default is 9000; failover starts sooner.",
        ),
        ConfigDef(
            "controller.lease.ttl.ms",
            _INT,
            6_000,
            "Lease of the active controller in the metadata store; standbys take over after it.",
            at_least=100,
            kafka=False,
        ),
        ConfigDef(
            "producer.id.block.size",
            _INT,
            1_000,
            "Producer ids handed to a gateway at a time (Kafka's fixed block size).",
            at_least=1,
            kafka=False,
        ),
    ),
)
