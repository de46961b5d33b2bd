"""Settings every service process reads: its node id and where it listens and reports.

Each service catalog includes these with the service's own node id and listener
defaults (``odradek up`` numbers gateways 0.., storage nodes 100.., coordinators 200..,
offset stores 300.., transaction coordinators 400.., controllers 3000..).
"""

from __future__ import annotations

from odradek.config_catalog.definition import ConfigDef, ConfigType

# The controller's gRPC address, where every other service finds it by default.
CONTROLLER_LISTENER = "127.0.0.1:9093"
# Any free port on loopback: the bound port is reported in the service's ready file.
EPHEMERAL_LISTENER = "127.0.0.1:0"


# Shared by the gateway and the storage node (Kafka's request.timeout.ms, which bounds a
# broker's calls to other brokers and controllers).
REQUEST_TIMEOUT_MS = ConfigDef(
    "request.timeout.ms",
    ConfigType.INT,
    30_000,
    "Upper bound of a call to another service: on a client's behalf (gateway), a storage "
    "leader's transaction verification, a WriteTxnMarkers request that names no timeout.",
    at_least=0,
)


def process_settings(
    node_id: int | None,
    *,
    grpc_listener: str = EPHEMERAL_LISTENER,
    controller_address: bool = True,
) -> tuple[ConfigDef, ...]:
    """``node.id``, ``grpc.listener``, ``metrics.port``, ``internal.tls.*`` and (but for
    the controller itself) ``controller.address``, with one service's defaults."""
    out: tuple[ConfigDef, ...] = (
        ConfigDef(
            "node.id",
            ConfigType.INT,
            node_id,
            "This node's id, unique in the cluster (required when there is no default).",
            at_least=0,
            note=""
            if node_id is None
            else "Kafka's node.id is unset (-1) unless configured; this default suits one "
            "local node of each kind.",
        ),
        ConfigDef(
            "grpc.listener",
            ConfigType.STRING,
            grpc_listener,
            "host:port of this service's internal gRPC API (port 0: any free port).",
            kafka=False,
        ),
        ConfigDef(
            "metrics.port",
            ConfigType.INT,
            0,
            "Port of the Prometheus /metrics endpoint (0: any free port).",
            at_least=0,
            kafka=False,
        ),
    )
    out += tuple(
        ConfigDef(
            name,
            ConfigType.STRING,
            default,
            f"Mutual TLS between services: {what} (docs/security.md, 'Between services').",
            kafka=False,
        )
        for name, default, what in (
            ("internal.tls.ca", "", "PEM file of the cluster CA (unset: plaintext gRPC)"),
            (
                "internal.tls.cert",
                "",
                "PEM file of this service's certificate (SAN URI odradek://<kind>/<node id>)",
            ),
            ("internal.tls.key", "", "PEM file of this service's private key"),
            (
                "internal.tls.server.name",
                "odradek.internal",
                "the DNS name every member certificate carries; servers are checked against it",
            ),
        )
    )
    out += (
        ConfigDef(
            "internal.tls.check.interval.ms",
            ConfigType.INT,
            30_000,
            "How often a gRPC server re-checks its internal.tls.* files (mtime, size, "
            "inode) and, when they changed, serves new handshakes the new certificate and "
            "CA (0: never).",
            at_least=0,
            kafka=False,
        ),
    )
    if controller_address:
        out += (
            ConfigDef(
                "controller.address",
                ConfigType.STRING,
                CONTROLLER_LISTENER,
                "Comma-separated host:port list of the controllers "
                "(Kafka: controller.quorum.bootstrap.servers).",
                kafka=False,
            ),
        )
    return out
