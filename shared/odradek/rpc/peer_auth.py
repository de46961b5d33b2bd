"""Who may call what between services, once internal TLS is on (docs/security.md).

The caller is the member its client certificate names (``odradek://<kind>/<id>``,
:mod:`odradek.internal_tls`); the TLS handshake has already proved the certificate
comes from the cluster CA. One table, :data:`RULES`, says which kinds may call each
method of the controller and the storage nodes, and which requests must carry the
caller's own node id:

- the controller takes RegisterNode only for the caller's own id and kind, Heartbeat
  and ShutdownNode only for its own id, AlterPartition and ReportOfflineReplicas only
  from that storage node, and its admin calls (topics, configs, ACLs, SCRAM, quotas,
  elections, reassignments) only from gateways, controllers, the group and
  transaction services where they create internal topics, and tools (``admin``);
- a storage node serves a follower's Fetch / ReplicaFetch (``replica_id >= 0``) only
  to the storage node of that id, and client-side calls (Produce, consumer Fetch,
  ListOffsets, DeleteRecords, ...) only to gateways and to the services that keep
  internal topics (offset store, group and transaction coordinators).

A kind-wide certificate (``odradek://gateway/*``, for Deployments whose node ids come
from pod names) may register, heartbeat and shut down any node id of its own kind: the
controller tells the kind of a registered node (``node_kind_of``) for the calls that
carry only an id. Storage certificates always name their id.

Methods of the other services (group coordinator, offset store, transaction
coordinator, console, health) are open to every member. A method of the controller or
a storage node missing from the table is refused: a new RPC must say who calls it.

A refusal answers PERMISSION_DENIED (UNAUTHENTICATED when the certificate names no
member), is logged and counted in ``odradek_grpc_refused_total``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message
from prometheus_client import Counter

from odradek.internal_tls import KINDS, Member, member_of_certificate
from odradek.rpc.v1 import common_pb2

log = logging.getLogger(__name__)

GRPC_REFUSED = Counter(
    "odradek_grpc_refused_total",
    "Internal gRPC calls refused by mutual TLS authorization, by method and reason.",
    ["grpc_method", "reason"],
)

# The kind (common.proto NodeKind) of a registered node, None when unknown: the
# controller's view, for calls that carry only a node id.
NodeKindOf = Callable[[int], int | None]
# A request check: why ``request`` may not come from ``member`` ("" when it may).
RequestCheck = Callable[[Member, Any, NodeKindOf], str]


def _unknown(node_id: int) -> int | None:
    return None


NODE_KINDS = {
    "controller": common_pb2.CONTROLLER,
    "storage": common_pb2.STORAGE,
    "gateway": common_pb2.GATEWAY,
    "coordinator": common_pb2.COORDINATOR,
    "offsets": common_pb2.OFFSET_STORE,
    "transactions": common_pb2.TRANSACTION_COORDINATOR,
}


@dataclass(frozen=True, slots=True)
class Rule:
    kinds: frozenset[str]
    check: RequestCheck | None = None


def _own_node(member: Member, request: Any, node_kind_of: NodeKindOf) -> str:
    if not member.is_node(request.node_id):
        return f"node_id {request.node_id} is not the caller's"
    kind = node_kind_of(request.node_id) if member.node_id is None else None
    if kind is not None and kind != NODE_KINDS.get(member.kind):
        return f"node {request.node_id} is a {common_pb2.NodeKind.Name(kind)}"
    return ""


def _register(member: Member, request: Any, node_kind_of: NodeKindOf) -> str:
    node = request.node
    if not member.is_node(node.node_id):
        return f"node_id {node.node_id} is not the caller's"
    if NODE_KINDS.get(member.kind) != node.kind:
        return f"kind {common_pb2.NodeKind.Name(node.kind)} is not the caller's"
    return ""


INTERNAL_TOPIC_KEEPERS = frozenset({"gateway", "offsets", "coordinator", "transactions"})


def _fetch(member: Member, request: Any, node_kind_of: NodeKindOf) -> str:
    if request.replica_id >= 0:
        if member.kind != "storage" or member.node_id != request.replica_id:  # never "*"
            return f"replica_id {request.replica_id} is not the caller's"
        return ""
    if member.kind not in INTERNAL_TOPIC_KEEPERS:
        return "a consumer fetch from a caller that is no gateway"
    return ""


def _follower_fetch(member: Member, request: Any, node_kind_of: NodeKindOf) -> str:
    if member.node_id is None or request.replica_id != member.node_id:
        return f"replica_id {request.replica_id} is not the caller's"
    return ""


def _kinds(*names: str) -> frozenset[str]:
    assert all(n in KINDS for n in names), names
    return frozenset(names)


NODES = _kinds(*NODE_KINDS)
EVERYONE = frozenset(KINDS)
ADMINS = _kinds("gateway", "controller", "admin")
TOPIC_CREATORS = ADMINS | INTERNAL_TOPIC_KEEPERS

_CONTROLLER = "/odradek.v1.Controller/"
_STORAGE = "/odradek.v1.Storage/"

RULES: dict[str, Rule] = {
    _CONTROLLER + "RegisterNode": Rule(NODES, _register),
    _CONTROLLER + "Heartbeat": Rule(NODES, _own_node),
    _CONTROLLER + "ShutdownNode": Rule(NODES, _own_node),
    _CONTROLLER + "AlterPartition": Rule(_kinds("storage"), _own_node),
    _CONTROLLER + "ReportOfflineReplicas": Rule(_kinds("storage"), _own_node),
    _CONTROLLER + "GetMetadata": Rule(EVERYONE),
    _CONTROLLER + "WatchMetadata": Rule(EVERYONE),
    _CONTROLLER + "CreateTopics": Rule(TOPIC_CREATORS),
    _CONTROLLER + "AllocateProducerIds": Rule(ADMINS | {"transactions"}),
    **{
        _CONTROLLER + name: Rule(ADMINS)
        for name in (
            "DeleteTopics",
            "CreatePartitions",
            "AlterConfigs",
            "ElectLeaders",
            "AlterPartitionReassignments",
            "ListPartitionReassignments",
            "AlterScramCredentials",
            "AlterAcls",
            "AlterClientQuotas",
        )
    },
    _STORAGE + "Fetch": Rule(INTERNAL_TOPIC_KEEPERS | {"storage"}, _fetch),
    _STORAGE + "ReplicaFetch": Rule(_kinds("storage"), _follower_fetch),
    _STORAGE + "OffsetForLeaderEpoch": Rule(_kinds("gateway", "storage")),
    _STORAGE + "DescribePartitions": Rule(INTERNAL_TOPIC_KEEPERS | {"console", "controller"}),
    **{
        _STORAGE + name: Rule(INTERNAL_TOPIC_KEEPERS)
        for name in (
            "Produce",
            "ListOffsets",
            "DeleteRecords",
            "DescribeProducers",
            "DescribeLogDirs",
            "AlterReplicaLogDirs",
            "WriteTxnMarkers",
        )
    },
}
STRICT_SERVICES = (_CONTROLLER, _STORAGE)
OPEN = Rule(EVERYONE)
CLOSED = Rule(frozenset())


def rule_for(method: str) -> Rule:
    rule = RULES.get(method)
    if rule is not None:
        return rule
    return CLOSED if method.startswith(STRICT_SERVICES) else OPEN


def caller(context: grpc.aio.ServicerContext) -> Member | None:
    """The member the caller's certificate names (None: no certificate, or no member)."""
    certs = context.auth_context().get("x509_pem_cert")
    return member_of_certificate(certs[0]) if certs else None


class Refused(Exception):
    def __init__(self, code: grpc.StatusCode, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.reason, self.detail = code, reason, detail


def authorize(
    method: str,
    rule: Rule,
    member: Member | None,
    request: Any = None,
    node_kind_of: NodeKindOf = _unknown,
) -> None:
    """Raise :class:`Refused` unless ``member`` may send ``request`` to ``method``."""
    if member is None:
        raise Refused(
            grpc.StatusCode.UNAUTHENTICATED,
            "no_member",
            "the client certificate names no cluster member",
        )
    if member.kind not in rule.kinds:
        raise Refused(grpc.StatusCode.PERMISSION_DENIED, "kind", f"{member} may not call {method}")
    if request is not None and rule.check is not None:
        why = rule.check(member, request, node_kind_of)
        if why:
            raise Refused(grpc.StatusCode.PERMISSION_DENIED, "request", f"{member}: {why}")


async def _refuse(context: grpc.aio.ServicerContext, method: str, exc: Refused) -> None:
    GRPC_REFUSED.labels(method, exc.reason).inc()
    log.warning("refused %s from %s: %s", method, context.peer(), exc.detail)
    await context.abort(exc.code, exc.detail)


async def _respond(result: Any) -> AsyncIterator[Any]:
    if inspect.isasyncgen(result):
        async for item in result:
            yield item
    elif inspect.isawaitable(result):
        await result
    else:  # a plain iterator
        for item in result:
            yield item


def _wrap(
    handler: grpc.RpcMethodHandler, method: str, rule: Rule, node_kind_of: NodeKindOf
) -> grpc.RpcMethodHandler:
    async def admitted(context: grpc.aio.ServicerContext, request: Any = None) -> Member | None:
        member = caller(context)
        try:
            authorize(method, rule, member, request, node_kind_of)
        except Refused as exc:
            await _refuse(context, method, exc)
        return member

    def checked(
        requests: AsyncIterator[Message], context: grpc.aio.ServicerContext, member: Member | None
    ) -> AsyncIterator[Message]:
        async def each() -> AsyncIterator[Message]:
            async for request in requests:
                try:
                    authorize(method, rule, member, request, node_kind_of)
                except Refused as exc:
                    await _refuse(context, method, exc)
                yield request

        return each()

    serializers = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        uu: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]] = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await admitted(context, request)
            return await uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **serializers)
    if handler.unary_stream is not None:
        us = handler.unary_stream

        async def unary_stream(
            request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            await admitted(context, request)
            async for item in _respond(us(request, context)):
                yield item

        return grpc.unary_stream_rpc_method_handler(unary_stream, **serializers)
    if handler.stream_stream is not None:
        ss = handler.stream_stream

        async def stream_stream(
            requests: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            member = await admitted(context)
            async for item in _respond(ss(checked(requests, context, member), context)):
                yield item

        return grpc.stream_stream_rpc_method_handler(stream_stream, **serializers)
    su = handler.stream_unary

    async def stream_unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        member = await admitted(context)
        return await su(checked(requests, context, member), context)

    return grpc.stream_unary_rpc_method_handler(stream_unary, **serializers)


class PeerAuthInterceptor(grpc.aio.ServerInterceptor):
    """Applies :data:`RULES` to every call (installed when internal TLS is on);
    ``node_kind_of``: the controller's registered nodes (other servers know none)."""

    def __init__(self, node_kind_of: NodeKindOf = _unknown) -> None:
        self.node_kind_of = node_kind_of

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        return _wrap(handler, method, rule_for(method), self.node_kind_of)
