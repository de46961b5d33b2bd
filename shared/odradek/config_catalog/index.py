"""Every catalog, in the order ``docs/configuration.md`` lists them."""

from __future__ import annotations

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.controller import CONTROLLER_CONFIGS
from odradek.config_catalog.coordinator import COORDINATOR_CONFIGS
from odradek.config_catalog.definition import Catalog
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.config_catalog.offsets import OFFSETS_CONFIGS
from odradek.config_catalog.storage import STORAGE_CONFIGS
from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.config_catalog.transactions import TRANSACTIONS_CONFIGS

CATALOGS: tuple[Catalog, ...] = (
    TOPIC_CONFIGS,
    BROKER_CONFIGS,
    GATEWAY_CONFIGS,
    STORAGE_CONFIGS,
    CONTROLLER_CONFIGS,
    COORDINATOR_CONFIGS,
    OFFSETS_CONFIGS,
    TRANSACTIONS_CONFIGS,
)
