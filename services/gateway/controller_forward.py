"""Forwarding admin requests to the controller, shared by the admin API modules.

Three things every admin API needs the same way:

- a bound on the controller call derived from the request's ``timeout_ms`` (at
  least :data:`MIN_CALL_S`, so a client asking for 0 ms still gets its request
  through, at most ``request.timeout.ms``);
- controller failures turned into Kafka error codes (an unreachable or leaderless
  controller is REQUEST_TIMED_OUT, which clients retry; anything else is
  UNKNOWN_SERVER_ERROR and logged);
- after a change, a bounded wait until this gateway's own metadata shows it, so
  the client's next request here (Metadata, Produce, DescribeConfigs) does not
  race the metadata stream. ``timeout_ms <= 0`` still waits up to
  :data:`MIN_VISIBILITY_WAIT_S` for that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message as ProtoMessage

from odradek.gateway.gateway_api import GatewayApi
from odradek.metadata_cache import Snapshot
from odradek.protocol.errors import ErrorCode, error_code_for
from odradek.rpc.v1 import common_pb2, controller_pb2_grpc

log = logging.getLogger(__name__)

MIN_CALL_S = 5.0
MIN_VISIBILITY_WAIT_S = 1.0

T = TypeVar("T")


@dataclass
class ControllerFailure:
    """Why a forwarded call produced no answer, as a Kafka error."""

    error_code: int
    message: str


class AdminDeadline:
    """The time budget of one admin request (``timeout_ms`` as Kafka defines it)."""

    def __init__(self, gw: GatewayApi, timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.timeout_ms = timeout_ms
        request_s = max(MIN_CALL_S, gw.request_timeout_ms / 1000.0)
        budget = timeout_ms / 1000.0 if timeout_ms > 0 else 0.0
        self.call_s = min(max(budget, MIN_CALL_S), request_s)
        self._end = loop.time() + min(budget, request_s)
        self._floor = min(MIN_VISIBILITY_WAIT_S, gw.metadata_wait_s)

    def remaining(self) -> float:
        """Seconds left to wait for the change to show (never below the visibility floor)."""
        return max(self._end - self._loop.time(), self._floor)


async def call_controller(
    gw: GatewayApi,
    method: Callable[[controller_pb2_grpc.ControllerStub], Callable[..., Awaitable[T]]],
    request: ProtoMessage,
    deadline: AdminDeadline,
) -> T | ControllerFailure:
    """The controller's answer, or a :class:`ControllerFailure` to report per resource."""
    try:
        return await gw.controller.call(method, request, timeout=deadline.call_s)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        code = error_code_for(exc)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.warning("controller call %s failed: %s", type(request).__name__, exc)
            return ControllerFailure(int(code), "The controller failed to process the request.")
        log.info("controller call %s failed: %s", type(request).__name__, exc)
        # Internal addresses stay in our log, not in the client's error message.
        return ControllerFailure(int(code), "Timed out waiting for the controller to answer.")


async def wait_visible(
    gw: GatewayApi, predicate: Callable[[Snapshot], bool], timeout: float
) -> bool:
    """Wait (bounded) until this gateway's metadata satisfies ``predicate``."""
    if timeout <= 0:
        return bool(predicate(gw.metadata.current))
    return bool(await gw.metadata.wait_for(predicate, timeout))


async def forward_security_change(
    gw: GatewayApi,
    method: Callable[[controller_pb2_grpc.ControllerStub], Callable[..., Awaitable[T]]],
    request: ProtoMessage,
    changed: Callable[[T], bool],
) -> T | ControllerFailure:
    """Forward an ACL or SCRAM credential change, bounded by ``request.timeout.ms``; when
    ``changed(answer)``, wait (bounded) until this gateway's metadata holds the change,
    so the client's next request here is authorized or authenticated with it."""
    deadline = AdminDeadline(gw, gw.request_timeout_ms)
    before = gw.metadata.current.raw.version
    answer = await call_controller(gw, method, request, deadline)
    if not isinstance(answer, ControllerFailure) and changed(answer):
        await wait_visible(gw, lambda s: s.raw.version > before, deadline.remaining())
    return answer


def leaders_ready(topic: common_pb2.Topic | None, partitions: int | None = None) -> bool:
    """All partitions (at least ``partitions`` of them) have a storage leader."""
    if topic is None:
        return False
    if partitions is not None and len(topic.partitions) < partitions:
        return False
    return all(p.leader >= 0 for p in topic.partitions)


def message_or_none(message: str | None, version: int, first_version: int = 1) -> str | None:
    """``error_message`` is nullable and only exists from ``first_version``; empty is null."""
    if version < first_version or not message:
        return None
    return message
