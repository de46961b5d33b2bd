"""The gateway service: Kafka's wire protocol outside, gRPC to the other services inside.

Stateless: it learns the cluster from the controller's metadata stream, sends each
partition's data to the storage node leading it, and asks the controller for
admin changes and producer-id blocks. Every gateway appears to Kafka clients as a
broker, and any gateway may lead any partition, so clients can be spread over
gateways by the partition-to-gateway mapping in Metadata.

Dispatch: one module per Kafka API under ``odradek.gateway.apis``, each written
against :class:`~odradek.gateway.gateway_api.GatewayApi`; the versions we
advertise are :data:`odradek.protocol.versions.SUPPORTED` limited to the APIs that
have a handler here (KAFKA-COMPAT item 4: advertise only what is served).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from urllib.parse import urlsplit

from prometheus_client import Counter, Gauge, Histogram

from odradek.config import Config, ConfigError
from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.controller_client import ControllerClient, Membership, join_cluster
from odradek.gateway import apis
from odradek.gateway.connection import (
    CloseConnection,
    ConnectionContext,
    ConnectionLimits,
    KafkaListener,
)
from odradek.gateway.group_routing import GroupRouter
from odradek.gateway.txn_routing import TxnRouter
from odradek.metadata_cache import MetadataCache
from odradek.metrics import MetricsServer
from odradek.producer_id_blocks import ProducerIdBlocks, from_controller
from odradek.protocol import policy
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import build_api_versions_response
from odradek.protocol.exceptions import ProtocolError, UnsupportedVersionError
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import decode_request, encode_response, expects_response
from odradek.protocol.versions import SUPPORTED
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import common_pb2
from odradek.storage_client import StoragePool

log = logging.getLogger("odradek.gateway")

DEFAULTS: dict[str, str] = GATEWAY_CONFIGS.defaults()

REQUESTS = Counter(
    "odradek_gateway_requests_total",
    "Kafka requests received, by API and version.",
    ["request", "version"],
)
REQUEST_SECONDS = Histogram(
    "odradek_gateway_request_seconds",
    "Time from a request's arrival to its response being ready, by API and version.",
    ["request", "version"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
REQUEST_ERRORS = Counter(
    "odradek_gateway_request_failures_total",
    "Requests that closed the connection (unparsable input or handler failures), by API.",
    ["request"],
)
CONNECTIONS = Gauge("odradek_gateway_connections", "Open Kafka client connections.")
THROTTLED = Counter(
    "odradek_gateway_throttled_requests_total", "Requests answered with a throttle time."
)


def _api_name(api_key: int) -> str:
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Unknown{api_key}"


def parse_listener(value: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` (Kafka's listeners syntax; the first listener is used)."""
    first = value.split(",")[0].strip()
    if "://" not in first:
        first = "PLAINTEXT://" + first
    parts = urlsplit(first)
    if parts.scheme.upper() != "PLAINTEXT":
        raise ConfigError(
            f"Invalid value {value!r} for configuration listeners: only PLAINTEXT is supported"
        )
    if parts.hostname is None or parts.port is None:
        raise ConfigError(
            f"Invalid value {value!r} for configuration listeners: expected PLAINTEXT://host:port"
        )
    return parts.hostname, parts.port


class Gateway:
    name = "gateway"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.node_id = GATEWAY_CONFIGS.read_int(config, "node.id")
        self.host, self.port = parse_listener(config.str("listeners"))
        advertised = config.get("advertised.listeners")
        self.advertised_host, self.advertised_port = (
            parse_listener(advertised) if advertised else (self.host, 0)
        )
        grpc_host, _, grpc_port = config.str("grpc.listener").rpartition(":")
        self.rpc = RpcServer(grpc_host or "127.0.0.1", int(grpc_port or 0))
        self.metrics_server = MetricsServer(
            grpc_host or "127.0.0.1", GATEWAY_CONFIGS.read_int(config, "metrics.port")
        )
        self.controller = ControllerClient(config.str("controller.address"))
        self.metadata = MetadataCache()
        self.storage = StoragePool(self.metadata)
        self.request_timeout_ms = GATEWAY_CONFIGS.read_int(config, "request.timeout.ms")
        self.metadata_wait_s = GATEWAY_CONFIGS.read_int(config, "metadata.wait.ms") / 1000.0
        self.groups = GroupRouter(
            self.metadata, self.gateways, self.node_id, self.request_timeout_ms
        )
        self.transactions = TxnRouter(
            self.metadata, self.gateways, self.node_id, self.request_timeout_ms
        )
        self.producer_ids = ProducerIdBlocks(
            from_controller(self.controller, self.node_id, self._incarnation)
        )
        self.handlers = apis.load_handlers()
        self.advertised_versions: dict[ApiKey, tuple[int, int]] = {
            k: v for k, v in SUPPORTED.items() if k in self.handlers
        }
        self.listener = KafkaListener(
            self.host,
            self.port,
            self.dispatch,
            ConnectionLimits(
                max_request_bytes=GATEWAY_CONFIGS.read_int(config, "socket.request.max.bytes"),
                max_inflight_requests=GATEWAY_CONFIGS.read_int(config, "queued.max.requests"),
                max_inflight_bytes=GATEWAY_CONFIGS.read_int(config, "queued.max.request.bytes"),
                idle_timeout_s=GATEWAY_CONFIGS.read_int(config, "connections.max.idle.ms") / 1000.0,
            ),
        )
        self.listener.on_count_change = lambda n: CONNECTIONS.set(n)
        self.membership: Membership | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> dict[str, int]:
        grpc_port = await self.rpc.start()
        metrics_port = await self.metrics_server.start()
        kafka_port = await self.listener.start()
        if not self.advertised_port:
            self.advertised_port = kafka_port
        node = common_pb2.Node(
            node_id=self.node_id,
            kind=common_pb2.GATEWAY,
            host=self.host,
            advertised_host=self.advertised_host,
            kafka_port=self.advertised_port,
            grpc_port=grpc_port,
            metrics_port=metrics_port,
            rack=self.config.get("broker.rack") or "",
        )
        # Ready once we have seen a snapshot that includes ourselves.
        self.membership, watch = await join_cluster(
            self.controller, self.metadata, node, self._stop
        )
        self._tasks.append(watch)
        await self.rpc.set_serving(live=True, ready=True)
        self.metrics_server.ready = True
        return {"kafka": kafka_port, "grpc": grpc_port, "metrics": metrics_port}

    async def stop(self) -> None:
        await self.rpc.set_serving(live=True, ready=False)
        self.metrics_server.ready = False
        await self.listener.stop(grace=5.0)
        self._stop.set()
        if self.membership is not None:
            await self.membership.stop()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.producer_ids.close()
        await self.groups.close()
        await self.transactions.close()
        await self.storage.close()
        await self.controller.close()
        await self.rpc.stop(1.0)
        await self.metrics_server.stop()

    # -- dispatch ----------------------------------------------------------------------------
    async def dispatch(
        self, ctx: ConnectionContext, header: RequestHeader, body: memoryview
    ) -> bytes | None:
        key = header.api_key
        name = _api_name(key)
        start = time.perf_counter()
        REQUESTS.labels(name, str(header.api_version)).inc()
        if key == ApiKey.API_VERSIONS:
            low, high = self.advertised_versions[ApiKey.API_VERSIONS]
            if not low <= header.api_version <= high:
                # KAFKA-COMPAT item 2: answer in v0 with our ranges; do not parse the body.
                return bytes(
                    build_api_versions_response(
                        header.api_version,
                        header.correlation_id,
                        supported=self.advertised_versions,
                    )
                )
        handler = self.handlers.get(key)
        if handler is None:
            REQUEST_ERRORS.labels(name).inc()
            log.info("closing %s: API key %s is not served", ctx.peer, key)
            raise CloseConnection()
        try:
            request = decode_request(header, body)
        except ProtocolError as exc:
            REQUEST_ERRORS.labels(name).inc()
            answer = policy.error_response(exc)
            if answer is not None:
                return bytes(answer)
            if isinstance(exc, UnsupportedVersionError):
                log.info("closing %s: %s v%d is not supported", ctx.peer, name, header.api_version)
            else:
                log.info(
                    "closing %s: malformed %s v%d: %s", ctx.peer, name, header.api_version, exc
                )
            raise CloseConnection() from None
        response = await handler(self, ctx, header, request)
        REQUEST_SECONDS.labels(name, str(header.api_version)).observe(time.perf_counter() - start)
        if response is None or not expects_response(header, request):
            return None
        return encode_response(header, response)

    # -- the rest of GatewayApi (odradek.gateway.gateway_api) ------------------------------------
    def _incarnation(self) -> int:
        """Our registration's incarnation, as AllocateProducerIds wants it (0 before joining)."""
        return self.membership.incarnation if self.membership is not None else 0

    # -- helpers for API modules -------------------------------------------------------------
    def cluster_config(self, name: str) -> str:
        """A cluster-wide broker config as the controller publishes it, else Kafka's default."""
        found = self.metadata.current.raw.cluster_configs.get(name)
        return found if found else BROKER_CONFIGS.text(name)

    def gateways(self) -> list[common_pb2.Node]:
        nodes = self.metadata.current.nodes_of(common_pb2.GATEWAY)
        if not any(n.node_id == self.node_id for n in nodes):
            # Our own registration may not be visible yet; we are certainly a broker.
            me = common_pb2.Node(
                node_id=self.node_id,
                kind=common_pb2.GATEWAY,
                host=self.host,
                advertised_host=self.advertised_host,
                kafka_port=self.advertised_port,
            )
            nodes = sorted([*nodes, me], key=lambda n: n.node_id)
        return nodes

    def gateway_for(self, topic: str, partition: int) -> int:
        """The gateway Metadata names as leader of a partition: spread, stable, any is fine."""
        gws = self.gateways()
        if len(gws) == 1:
            return gws[0].node_id
        h = 0
        for ch in topic.encode():
            h = (h * 31 + ch) & 0xFFFFFFFF
        return gws[(h + partition) % len(gws)].node_id
