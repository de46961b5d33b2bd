"""One module per Kafka API. Each opens with the versions it serves and any deviation
from Apache Kafka, and defines ``API_KEY`` and ``async def handle(gw, ctx, header,
request)`` returning the response object (or None for "no response", acks=0).

:func:`load_handlers` imports the modules listed in :data:`MODULES`; an API is
advertised in ApiVersions only when its module is listed here.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[Any, Any, Any, Any], Awaitable[Any]]

MODULES = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "init_producer_id",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "delete_records",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "offset_commit",
    "offset_fetch",
    "offset_delete",
]


def load_handlers() -> dict[int, Handler]:
    handlers: dict[int, Handler] = {}
    for name in MODULES:
        module = importlib.import_module(f"odradek.gateway.apis.{name}")
        handlers[int(module.API_KEY)] = module.handle
    return handlers
