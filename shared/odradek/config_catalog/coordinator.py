"""The group coordinator's own settings (``python -m odradek.coordinator``).

It also reads the cluster-wide ``group.*`` broker configs; a value in its own config
file wins over the controller's.
"""

from __future__ import annotations

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.process import process_settings

COORDINATOR_CONFIGS = Catalog(
    "Group coordinator",
    "Consumer group membership and rebalances, sharded like __consumer_offsets "
    "(`python -m odradek.coordinator`).",
    ("coordinator",),
    (
        *process_settings(200),
        ConfigDef(
            "group.pending.member.timeout.ms",
            ConfigType.INT,
            3_000,
            "How long a member told MEMBER_ID_REQUIRED may take to join again before the "
            "group stops waiting for it (capped by its session timeout).",
            at_least=0,
            kafka=False,
        ),
        ConfigDef(
            "offset.metadata.max.bytes",
            ConfigType.INT,
            4_096,
            "Largest metadata string of a committed offset.",
            at_least=0,
        ),
    ),
)
