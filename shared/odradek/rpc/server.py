"""gRPC server construction shared by every service: limits, health and metrics.

Message size limits sit above Kafka's ``socket.request.max.bytes`` (100 MiB) so a
request a gateway accepted is never refused between services. The standard gRPC
health service answers for "" and for ``liveness``/``readiness``; services flip
readiness once they can serve. With internal TLS (:mod:`odradek.internal_tls`) the
port requires a client certificate from the cluster CA and
:mod:`odradek.rpc.peer_auth` decides who may call what.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import Counter, Histogram

from odradek import internal_tls
from odradek.rpc.peer_auth import NodeKindOf, PeerAuthInterceptor

MAX_MESSAGE_BYTES = 128 * 1024 * 1024 + 65536

CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_time_ms", 20000),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]

GRPC_SERVER_HANDLED = Counter(
    "odradek_grpc_server_handled_total",
    "Internal gRPC calls handled, by method and status code.",
    ["grpc_method", "grpc_code"],
)
GRPC_SERVER_SECONDS = Histogram(
    "odradek_grpc_server_handling_seconds",
    "Time to handle internal gRPC calls.",
    ["grpc_method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


class _MetricsInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method
        inner = handler.unary_unary

        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = time.perf_counter()
            code = "OK"
            try:
                return await inner(request, context)
            except BaseException:
                code = "UNKNOWN"
                raise
            finally:
                GRPC_SERVER_HANDLED.labels(method, code).inc()
                GRPC_SERVER_SECONDS.labels(method).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class RpcServer:
    """A ``grpc.aio`` server with the health service and call metrics installed."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, node_kind_of: NodeKindOf | None = None
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = 0
        self.tls = internal_tls.active()
        interceptors: list[grpc.aio.ServerInterceptor] = [_MetricsInterceptor()]
        if self.tls is not None:
            interceptors.append(PeerAuthInterceptor(*([node_kind_of] if node_kind_of else [])))
        self.server = grpc.aio.server(options=CHANNEL_OPTIONS, interceptors=interceptors)
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)

    async def start(self) -> int:
        address = f"{self.host}:{self.requested_port}"
        if self.tls is None:
            self.port = self.server.add_insecure_port(address)
        else:
            self.port = self.server.add_secure_port(address, self.tls.server_credentials())
        if self.port == 0:
            raise OSError(f"cannot bind gRPC listener {self.host}:{self.requested_port}")
        await self.server.start()
        await self.set_serving(live=True, ready=False)
        return self.port

    async def set_serving(self, *, live: bool, ready: bool) -> None:
        serving = health_pb2.HealthCheckResponse.SERVING
        not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
        await self.health.set("liveness", serving if live else not_serving)
        await self.health.set("readiness", serving if ready else not_serving)
        await self.health.set("", serving if ready else not_serving)

    async def stop(self, grace: float = 5.0) -> None:
        await self.server.stop(grace)
