"""AlterConfigs and IncrementalAlterConfigs share this path to the controller.

The API modules turn their request into :class:`ResourceChange` rows; this module
refuses what never reaches the controller (unknown or unsupported resource types,
a resource named twice, a broker id other than the broker addressed, as Kafka's
``ConfigAdminManager`` does), forwards the rest in one
``AlterConfigs`` call and, once anything changed, waits (bounded) until this
gateway's metadata has caught up with the controller, so a DescribeConfigs right
after the change sees it.

The controller validates names and values with the topic and broker catalogs and
answers Kafka's codes and messages (INVALID_CONFIG "Invalid value x for
configuration y: ...", UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for duplicate
keys or null values, BROKER_ID_NOT_REGISTERED for a broker id that is no storage
node).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from odradek.config import ConfigError
from odradek.gateway.authorizer import AclOperation
from odradek.gateway.config_entries import ResourceType, broker_name_problem
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import (
    AdminDeadline,
    ControllerFailure,
    call_controller,
    wait_visible,
)
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.listener_certificates import broker_overrides
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import controller_pb2
from odradek.tls_reload import listener_setting

log = logging.getLogger(__name__)

ResponseT = TypeVar("ResponseT")

_FORWARDED = (ResourceType.TOPIC, ResourceType.BROKER)
_KNOWN_TYPES = frozenset(int(t) for t in ResourceType if t is not ResourceType.UNKNOWN)


@dataclass
class ResourceChange:
    """One resource of the request, and what became of it."""

    resource_type: int
    resource_name: str
    changes: list[controller_pb2.ConfigChange] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None

    def fail(self, code: int, message: str | None) -> None:
        self.error_code, self.error_message = int(code), message


def _refuse_early(
    rows: list[ResourceChange], api_name: str, addressed: int | None
) -> list[ResourceChange]:
    """Rows the gateway answers itself; returns the rows to forward."""
    counts = Counter((r.resource_type, r.resource_name) for r in rows)
    forward = []
    for row in rows:
        rtype = row.resource_type
        if row.error_code:
            continue
        if rtype not in _KNOWN_TYPES:
            row.fail(ErrorCode.UNSUPPORTED_VERSION, f"Unknown resource type {rtype}.")
        elif rtype not in _FORWARDED:
            row.fail(
                ErrorCode.INVALID_REQUEST,
                f"{api_name} does not support the resource type {ResourceType(rtype).name}",
            )
        elif counts[(rtype, row.resource_name)] > 1:
            row.fail(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
        elif rtype == ResourceType.BROKER and (
            problem := broker_name_problem(row.resource_name, addressed, None, alter=True)
        ):
            row.fail(*problem)
        else:
            forward.append(row)
    return forward


async def alter(
    gw: GatewayApi,
    ctx: ConnectionContext,
    rows: list[ResourceChange],
    *,
    incremental: bool,
    validate_only: bool,
    api_name: str,
) -> None:
    """Apply ``rows`` through the controller, filling in each row's outcome.

    Each resource needs ALTER_CONFIGS (Kafka's ``AuthHelper.authorize`` for both APIs);
    a broker resource must be the broker whose port the request came in on.
    """
    for row in rows:
        denied = gw.authorizer.config_resource(
            ctx, AclOperation.ALTER_CONFIGS, row.resource_type, row.resource_name
        )
        if denied is not None:
            row.fail(*denied)
    forward = _refuse_early(rows, api_name, ctx.broker_id)
    for row in forward:
        _validate_listener_tls(gw, row, incremental)
    forward = [row for row in forward if not row.error_code]
    if not forward:
        return
    deadline = AdminDeadline(gw, 0)
    answer = await call_controller(
        gw,
        lambda s: s.AlterConfigs,
        controller_pb2.AlterConfigsRequest(
            resources=[
                controller_pb2.ConfigResourceChange(
                    type=row.resource_type,  # type: ignore[arg-type]
                    name=row.resource_name,
                    changes=row.changes,
                    incremental=incremental,
                )
                for row in forward
            ],
            validate_only=validate_only,
        ),
        deadline,
    )
    if isinstance(answer, ControllerFailure):
        for row in forward:
            row.fail(answer.error_code, answer.message)
        return
    # One result per resource, in request order.
    for row, result in zip(forward, answer.results, strict=False):
        if result.error_code:
            row.fail(result.error_code, result.error_message or None)
    for row in forward[len(answer.results) :]:
        row.fail(ErrorCode.UNKNOWN_SERVER_ERROR, "The controller gave no answer.")
    if not validate_only and any(not row.error_code for row in forward):
        await _catch_up(gw, deadline)
        for row in forward:
            listeners = _listener_tls_changes(row)
            if listeners and not row.error_code:
                # Re-read the files even when the values did not change (Kafka reloads a
                # keystore altered to the same path).
                gw.certificates.reload_broker(int(row.resource_name), set(listeners))


def _listener_tls_changes(row: ResourceChange) -> dict[str, list[controller_pb2.ConfigChange]]:
    """A BROKER ``<id>`` row's changes to ``listener.name.<l>.ssl.*``, by listener."""
    out: dict[str, list[controller_pb2.ConfigChange]] = {}
    if row.resource_type != ResourceType.BROKER or not row.resource_name:
        return out
    for change in row.changes:
        found = listener_setting(change.name)
        if found is not None:
            out.setdefault(found[0], []).append(change)
    return out


def _validate_listener_tls(gw: GatewayApi, row: ResourceChange, incremental: bool) -> None:
    """Build each changed listener's TLS context from the new values before anything is
    stored, as Kafka's ``SslFactory#validateReconfiguration`` does (INVALID_CONFIG)."""
    for listener, changes in _listener_tls_changes(row).items():
        broker_id = int(row.resource_name)
        wanted = broker_overrides(gw.metadata.current, listener, broker_id) if incremental else {}
        for change in changes:
            setting = change.name.split(".", 3)[3]  # listener.name.<l>.<setting>
            if change.op == controller_pb2.DELETE:
                wanted.pop(setting, None)
            elif change.op == controller_pb2.SET or not incremental:
                wanted[setting] = change.value
        try:
            gw.certificates.validate(broker_id, listener, wanted)
        except ConfigError as exc:
            row.fail(
                ErrorCode.INVALID_CONFIG,
                f"Validation of dynamic config update of SSLFactory failed: {exc}",
            )
            return


def resource_responses(
    rows: list[ResourceChange], response: Callable[..., ResponseT]
) -> list[ResponseT]:
    """Each row's outcome as the API's ``AlterConfigsResourceResponse``."""
    return [
        response(
            error_code=row.error_code,
            error_message=row.error_message,
            resource_type=row.resource_type,
            resource_name=row.resource_name,
        )
        for row in rows
    ]


async def _catch_up(gw: GatewayApi, deadline: AdminDeadline) -> None:
    """Wait until our metadata is at least as new as the controller's right now."""
    try:
        current = await gw.controller.get_metadata(timeout=deadline.call_s)
    except Exception as exc:
        log.info("cannot learn the controller's metadata version: %s", exc)
        return
    version = current.version
    await wait_visible(gw, lambda snap: snap.version >= version, deadline.remaining())
