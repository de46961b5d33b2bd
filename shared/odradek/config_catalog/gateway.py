"""The gateway's own settings (Kafka's ``SocketServerConfigs`` names where Kafka has one).

These are the gateway's start-up defaults (``python -m odradek.gateway``); cluster-wide
broker configs it reads (``auto.create.topics.enable``, ...) come from the controller.
"""

from __future__ import annotations

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.process import process_settings

_INT, _LONG, _STRING = ConfigType.INT, ConfigType.LONG, ConfigType.STRING

GATEWAY_CONFIGS = Catalog(
    "Gateway",
    "The Kafka-protocol front end (`python -m odradek.gateway`).",
    ("gateway",),
    (
        *process_settings(0),
        ConfigDef(
            "listeners",
            _STRING,
            "PLAINTEXT://127.0.0.1:9092",
            "Where Kafka clients connect (the first PLAINTEXT listener is used).",
            note="Kafka's default PLAINTEXT://:9092 listens on every interface; "
            "Odradek's on loopback only.",
        ),
        ConfigDef(
            "advertised.listeners",
            _STRING,
            None,
            "The address given to clients in Metadata, if not the listener's.",
        ),
        ConfigDef("broker.rack", _STRING, None, "Rack shown for this broker in Metadata."),
        ConfigDef(
            "socket.request.max.bytes",
            _INT,
            104_857_600,
            "Largest request a client may send; a larger one closes the connection.",
            at_least=1024,
        ),
        ConfigDef(
            "queued.max.requests",
            _INT,
            500,
            "Requests of one connection in flight before the gateway stops reading it.",
            at_least=1,
        ),
        ConfigDef(
            "queued.max.request.bytes",
            _LONG,
            268_435_456,
            "Bytes of requests of one connection in flight before the gateway stops reading it.",
            at_least=1024,
            note="Kafka's default is -1 (no limit); every queue here has a bound.",
        ),
        ConfigDef(
            "connections.max.idle.ms",
            _LONG,
            600_000,
            "Idle client connections are closed after this long.",
            at_least=1,
        ),
        ConfigDef(
            "request.timeout.ms",
            _INT,
            30_000,
            "Upper bound of a call to another service on a client's behalf.",
        ),
        ConfigDef(
            "metadata.wait.ms",
            _INT,
            2_000,
            "How long a request waits for metadata the gateway has not seen yet.",
            kafka=False,
        ),
    ),
)
