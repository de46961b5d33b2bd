"""The transaction coordinator's own settings (``python -m odradek.transactions``).

It also reads the cluster-wide ``transaction.*`` and ``transactional.id.*`` broker
configs; a value in its own config file wins over the controller's.
"""

from __future__ import annotations

from odradek.config_catalog.definition import Catalog, ConfigDef, ConfigType
from odradek.config_catalog.process import process_settings

TRANSACTIONS_CONFIGS = Catalog(
    "Transaction coordinator",
    "Kafka's transaction coordinator, sharded like __transaction_state "
    "(`python -m odradek.transactions`).",
    ("transactions",),
    (
        *process_settings(400),
        ConfigDef(
            "transaction.state.log.create.timeout.ms",
            ConfigType.INT,
            30_000,
            "How long start-up waits for __transaction_state to be created before going on.",
            at_least=0,
            kafka=False,
        ),
        ConfigDef(
            "transaction.marker.retry.backoff.ms",
            ConfigType.INT,
            100,
            "Pause before re-sending transaction markers a partition did not accept yet "
            "(doubles up to 1 s).",
            at_least=1,
            kafka=False,
        ),
    ),
)
