"""One module per Kafka API, and nothing else. Each opens with the versions it serves
and any deviation from Apache Kafka, and defines ``API_KEY`` and ``handle`` as
:mod:`odradek.gateway.gateway_api` describes: the request typed as its API's
kafka-python class, the response object returned (or None for "no response",
acks=0). What several APIs share lives one level up (``odradek.gateway.*``).

:func:`load_handlers` imports the modules listed in :data:`MODULES`; an API is
advertised in ApiVersions only when its module is listed here.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import Message

# The dispatch table's view of a handler: ``decode_request`` gives each the request
# class of its own API key (tests/unit/gateway/test_handler_contract.py checks the
# annotations), so the table may hold them under the common base class.
Handler = Callable[
    [GatewayApi, ConnectionContext, RequestHeader, Message], Awaitable[Message | None]
]

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
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_log_dirs",
    "alter_replica_log_dirs",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "txn_offset_commit",
    "end_txn",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "create_acls",
    "describe_acls",
    "delete_acls",
    "describe_client_quotas",
    "alter_client_quotas",
    "write_txn_markers",
]


def load_handlers() -> dict[int, Handler]:
    handlers: dict[int, Handler] = {}
    for name in MODULES:
        module = importlib.import_module(f"odradek.gateway.apis.{name}")
        handlers[int(module.API_KEY)] = module.handle
    return handlers
