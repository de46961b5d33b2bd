"""The offset store's own settings (``python -m odradek.offsets``).

It also reads the cluster-wide ``offsets.*`` broker configs; a value in its own config
file wins over the controller's.
"""

from __future__ import annotations

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.process import process_settings

_INT, _LONG = ConfigType.INT, ConfigType.LONG

OFFSETS_CONFIGS = Catalog(
    "Offset store",
    "Committed offsets and group metadata in __consumer_offsets (`python -m odradek.offsets`).",
    ("offsets",),
    (
        *process_settings(300),
        ConfigDef(
            "offsets.retention.check.interval.ms",
            _LONG,
            600_000,
            "How often expired offsets are removed.",
            at_least=1,
        ),
        ConfigDef(
            "offsets.topic.create.timeout.ms",
            _INT,
            30_000,
            "How long start-up waits for __consumer_offsets to be created before going on.",
            at_least=0,
            kafka=False,
        ),
        ConfigDef(
            "offsets.lag.refresh.interval.ms",
            _INT,
            10_000,
            "How often log end offsets are fetched for the consumer lag metrics.",
            at_least=0,
            kafka=False,
        ),
    ),
)
