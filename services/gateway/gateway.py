"""The gateway service: Kafka's wire protocol outside, gRPC to the other services inside.

Stateless: it learns the cluster from the controller's metadata stream, sends each
partition's data to the storage node leading it, and asks the controller for
admin changes and producer-id blocks.

Broker identity (docs/brokers.md, :mod:`odradek.gateway.brokers`): the brokers Kafka
clients see are the storage nodes. Besides the bootstrap port of each of its
``listeners`` a gateway opens, per listener, one *broker port* per storage node
(:mod:`odradek.gateway.served_listeners`) and announces them to the controller
(``Node.listeners``); Metadata advertises each storage node at one gateway's port
for it on the listener the client connected to. Any gateway serves any partition on any of its ports, so a client following
stale metadata still works; the port only tells broker-scoped requests (ListGroups,
DescribeConfigs on a broker, DescribeLogDirs, ...) which broker the client addressed
(``ConnectionContext.broker_id``). ``broker.port.start`` 0 takes ephemeral ports as
storage nodes appear; N > 0 opens ``N + id - storage.node.id.base`` for
``broker.port.count`` ids at start, for deployments that must publish ports in advance.

Dispatch: one module per Kafka API under ``odradek.gateway.apis``, each written
against :class:`~odradek.gateway.gateway_api.GatewayApi`; the versions we
advertise are :data:`odradek.protocol.versions.SUPPORTED` limited to the APIs that
have a handler here (docs/compatibility.md C4: advertise only what is served).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from prometheus_client import Counter, Gauge, Histogram

from odradek import loop_lag
from odradek.client_quotas import REQUEST_PERCENTAGE
from odradek.config import Config
from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.controller_client import ControllerClient, Membership, join_cluster
from odradek.gateway import apis, shared_answers
from odradek.gateway.apis import fetch as fetch_api
from odradek.gateway.apis import metadata as metadata_api
from odradek.gateway.apis import produce as produce_api
from odradek.gateway.authentication import Credentials
from odradek.gateway.authorizer import Authorizer
from odradek.gateway.brokers import Broker, advertise
from odradek.gateway.client_quotas import ClientQuotas, ThreadTime, timed
from odradek.gateway.connection import (
    CloseConnection,
    ConnectionContext,
    ConnectionLimits,
    ConnectionQuota,
    KafkaListener,
    Result,
)
from odradek.gateway.group_routing import GroupRouter
from odradek.gateway.listener_certificates import ListenerCertificates
from odradek.gateway.listeners import parse_listeners
from odradek.gateway.memory_pool import MemoryPool
from odradek.gateway.served_listeners import ServedListener
from odradek.gateway.throttling import apply_quotas
from odradek.gateway.txn_routing import TxnRouter
from odradek.metadata_cache import MetadataCache, Snapshot
from odradek.metric_tallies import CounterTally, HistogramTally
from odradek.metrics import MetricsServer
from odradek.producer_id_blocks import ProducerIdBlocks, from_controller
from odradek.protocol import policy
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import build_api_versions_response
from odradek.protocol.exceptions import ProtocolError, UnsupportedVersionError
from odradek.protocol.fetch_response import (
    TopicAnswers,
    encode_fetch_answer,
    encode_fetch_response,
)
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    FetchResponse,
    Message,
    MetadataResponse,
    ProduceResponse,
    decode_request,
    encode_response,
    expects_response,
)
from odradek.protocol.produce_response import encode_produce_response
from odradek.protocol.versions import SUPPORTED, response_header_version
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import common_pb2
from odradek.storage_client import StoragePool

log = logging.getLogger(__name__)

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
# Kafka's MemoryPoolAvailable; -1 without a budget (queued.max.request.bytes -1).
MEMORY_POOL_AVAILABLE = Gauge(
    "odradek_gateway_memory_pool_available_bytes",
    "Bytes left of queued.max.request.bytes, the budget for client traffic.",
)
MEMORY_POOL_PAUSED = Gauge(
    "odradek_gateway_memory_pool_paused_connections",
    "Connections not read from because queued.max.request.bytes is used up.",
)


SASL_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# What a SASL listener's connection may send before it is authenticated.
PRE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, *SASL_APIS})
# The keys every request is compared with, as plain ints: an enum member looked up on
# its class costs ~0.3-0.4 us on Python 3.11, and _dispatch compared four per request
# (issue 18).
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_METADATA = int(ApiKey.METADATA)
_FETCH = int(ApiKey.FETCH)
_PRODUCE = int(ApiKey.PRODUCE)


def _fetch_frame(
    header: RequestHeader,
    seconds: HistogramTally | Histogram,
    start: float,
    response: FetchResponse | TopicAnswers,
) -> Result:
    """A Fetch handled without a task, as :meth:`Gateway._dispatch` ends one (its
    answer as a response, or as the plain tuples of ``encode_fetch_answer``)."""
    seconds.observe(time.perf_counter() - start)
    if isinstance(response, list):
        return encode_fetch_answer(header.correlation_id, header.api_version, response)
    parts = encode_fetch_response(header.correlation_id, header.api_version, response)
    return parts if parts is not None else encode_response(header, response)


def _produce_frame(
    header: RequestHeader,
    seconds: HistogramTally | Histogram,
    start: float,
    response: ProduceResponse,
) -> Result:
    """A Produce handled without a task, as :meth:`Gateway._dispatch` ends one."""
    seconds.observe(time.perf_counter() - start)
    version = header.api_version
    frame = encode_produce_response(
        header.correlation_id, response_header_version(_PRODUCE, version), version, response
    )
    return frame if frame is not None else encode_response(header, response)


def _api_name(api_key: int) -> str:
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Unknown{api_key}"


# Every listener's broker ports: (name, ((storage node id, port), ...)), ...
_PortState = tuple[tuple[str, tuple[tuple[int, int], ...]], ...]


class _RequestMetrics(NamedTuple):
    name: str  # the API's name, the ``request`` label
    requests: CounterTally | Counter
    seconds: HistogramTally | Histogram


class Gateway:
    name = "gateway"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.node_id = GATEWAY_CONFIGS.read_int(config, "node.id")
        self.broker_port_start = GATEWAY_CONFIGS.read_int(config, "broker.port.start")
        self.broker_port_count = GATEWAY_CONFIGS.read_int(config, "broker.port.count")
        self.storage_node_id_base = GATEWAY_CONFIGS.read_int(config, "storage.node.id.base")
        # The listeners and their security (listeners.py): TLS, SASL, authentication bound.
        self.listeners = parse_listeners(config, self.broker_port_start, self.broker_port_count)
        self.host = self.listeners[0].host
        # Fixed broker ports (some listener has a broker.port.start): opened at start.
        self.fixed_broker_ports = any(lst.broker_port_start for lst in self.listeners)
        self.credentials = Credentials()
        grpc_host, _, grpc_port = config.str("grpc.listener").rpartition(":")
        self.rpc = RpcServer(grpc_host or "127.0.0.1", int(grpc_port or 0))
        self.metrics_server = MetricsServer(
            grpc_host or "127.0.0.1", GATEWAY_CONFIGS.read_int(config, "metrics.port")
        )
        self.controller = ControllerClient(config.str("controller.address"))
        self.metadata = MetadataCache()
        self.authorizer = Authorizer(config, self.metadata)
        # Client quotas (client_quotas.py, throttling.py; docs/quotas.md).
        self.quotas = ClientQuotas(config, self.metadata)
        self.storage = StoragePool(self.metadata)
        self.request_timeout_ms = GATEWAY_CONFIGS.read_int(config, "request.timeout.ms")
        self.metadata_wait_s = GATEWAY_CONFIGS.read_int(config, "metadata.wait.ms") / 1000.0
        self.groups = GroupRouter(self.metadata, self.brokers, self.request_timeout_ms)
        self.transactions = TxnRouter(self.metadata, self.brokers, self.request_timeout_ms)
        self.producer_ids = ProducerIdBlocks(
            from_controller(self.controller, self.node_id, self._incarnation)
        )
        self.handlers = apis.load_handlers()
        # Everything served on some listener (bounds the request metrics' labels).
        self.advertised_versions: dict[ApiKey, tuple[int, int]] = {
            k: v for k, v in SUPPORTED.items() if k in self.handlers
        }
        # The SASL APIs are advertised only on a SASL listener (docs/compatibility.md C4).
        self._without_sasl = {
            k: v for k, v in self.advertised_versions.items() if k not in SASL_APIS
        }
        self._metric_children: dict[tuple[int, int], _RequestMetrics] = {}
        self.memory_pool = MemoryPool(GATEWAY_CONFIGS.read_int(config, "queued.max.request.bytes"))
        MEMORY_POOL_AVAILABLE.set_function(lambda: self.memory_pool.available)
        MEMORY_POOL_PAUSED.set_function(lambda: len(self.memory_pool))
        # Counted at each scrape: a count per connection opened or closed (a lock and a
        # walk over every listener) cost about 1.6% of the gateway's CPU under a flood
        # of connections (bench hostile).
        CONNECTIONS.set_function(lambda: sum(len(lst.connections) for lst in self._listeners()))
        self.limits = ConnectionLimits(
            max_request_bytes=GATEWAY_CONFIGS.read_int(config, "socket.request.max.bytes"),
            max_inflight_requests=GATEWAY_CONFIGS.read_int(config, "queued.max.requests"),
            max_handled_requests=GATEWAY_CONFIGS.read_int(
                config, "connection.max.handled.requests"
            ),
            send_buffer_bytes=GATEWAY_CONFIGS.read_int(config, "socket.send.buffer.bytes"),
            receive_buffer_bytes=GATEWAY_CONFIGS.read_int(config, "socket.receive.buffer.bytes"),
            max_inflight_bytes=GATEWAY_CONFIGS.read_int(
                config, "connection.max.queued.request.bytes"
            ),
            memory_pool=self.memory_pool,
            idle_timeout_s=GATEWAY_CONFIGS.read_int(config, "connections.max.idle.ms") / 1000.0,
            max_queued_response_bytes=GATEWAY_CONFIGS.read_int(
                config, "connection.max.queued.response.bytes"
            ),
            max_unread_response_bytes=GATEWAY_CONFIGS.read_int(
                config, "connection.max.unread.response.bytes"
            ),
            request_read_timeout_s=GATEWAY_CONFIGS.read_int(
                config, "connection.request.read.timeout.ms"
            )
            / 1000.0,
            write_timeout_s=GATEWAY_CONFIGS.read_int(config, "connection.write.timeout.ms")
            / 1000.0,
        )
        self.quota = ConnectionQuota(
            GATEWAY_CONFIGS.read_int(config, "max.connections"),
            GATEWAY_CONFIGS.read_int(config, "max.connections.per.ip"),
            ConnectionQuota.parse_overrides(config.get("max.connections.per.ip.overrides")),
            GATEWAY_CONFIGS.read_int(config, "max.connection.creation.rate"),
        )
        # Certificate reload (listener_certificates.py): files checked, dynamic configs.
        self.certificates = ListenerCertificates(
            [], GATEWAY_CONFIGS.read_int(config, "ssl.keystore.check.interval.ms") / 1000.0
        )
        self.metadata.listeners.append(self.certificates.on_metadata)
        # Per listener: its bootstrap port and one broker port per storage node.
        self.served = [
            ServedListener(
                lst,
                self.dispatch,
                self.limits,
                self.quota,
                self.certificates.overrides,
                self.answer_at_once,
            )
            for lst in self.listeners
        ]
        self.certificates.served = self.served
        self._served_ids: set[int] = set()  # storage nodes with broker ports
        # Set by the process shell: reports the ports again when a broker port opens later.
        self.report_ports: Callable[[dict[str, int]], None] | None = None
        self._announced: _PortState | None = None  # what the controller last accepted
        self._out_of_range: set[int] = set()
        self._brokers_cache: dict[str | None, tuple[Snapshot, _PortState, dict[int, Broker]]]
        self._brokers_cache = {}
        self._grpc_port = self._metrics_port = 0
        self.membership: Membership | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> dict[str, int]:
        grpc_port = await self.rpc.start()
        metrics_port = await self.metrics_server.start()
        for served in self.served:
            await served.start()
        self._grpc_port, self._metrics_port = grpc_port, metrics_port
        if self.fixed_broker_ports:
            # Fixed ports: all of them now, so a port conflict fails the start.
            for node_id in range(
                self.storage_node_id_base, self.storage_node_id_base + self.broker_port_count
            ):
                await self._open_broker_port(node_id)
        # Ready once we have seen a snapshot that includes ourselves.
        self.membership, watch = await join_cluster(
            self.controller, self.metadata, self._node(), self._stop
        )
        self._announced = self._port_state()
        self._tasks.append(watch)
        # A broker port for every storage node the cluster has, announced before we
        # report ready, so the first Metadata a client gets has them all (if the
        # controller cannot take the announcement now, the follower task retries).
        try:
            await self._serve_storage_nodes()
        except Exception as exc:
            log.warning("cannot announce broker ports yet: %s", exc)
        self._tasks.append(asyncio.get_running_loop().create_task(self._follow_storage_nodes()))
        self._tasks.append(asyncio.get_running_loop().create_task(self.certificates.run()))
        lag_probe = loop_lag.start_from_env()  # benchmarks only (bench hostile)
        if lag_probe is not None:
            self._tasks.append(lag_probe)
        await self.rpc.set_serving(live=True, ready=True)
        self.metrics_server.ready = True
        return self.ports()

    def ports(self) -> dict[str, int]:
        """The bound ports by role, as the ready file and cluster.json list them: "kafka"
        and "broker-<id>" the first listener's, "kafka-<name>" and "<name>-broker-<id>"
        every listener's (docs/security.md)."""
        first = self.served[0]
        ports = {
            "kafka": first.bootstrap.port,
            "grpc": self._grpc_port,
            "metrics": self._metrics_port,
        }
        ports.update({f"broker-{n}": p for n, p in sorted(first.broker_ports.items())})
        for served in self.served:
            name = served.name.lower()
            ports[f"kafka-{name}"] = served.bootstrap.port
            ports.update({f"{name}-broker-{n}": p for n, p in sorted(served.broker_ports.items())})
        return ports

    def _node(self) -> common_pb2.Node:
        """This gateway's registration as it is right now: every listener's endpoints,
        the first one's also in the single-listener fields."""
        first = self.served[0]
        return common_pb2.Node(
            node_id=self.node_id,
            kind=common_pb2.GATEWAY,
            host=self.host,
            advertised_host=first.listener.advertised_host,
            kafka_port=first.advertised_port,
            grpc_port=self._grpc_port,
            metrics_port=self._metrics_port,
            rack=self.config.get("broker.rack") or "",
            state=common_pb2.ONLINE,
            broker_ports=first.broker_ports,
            listeners=[served.endpoint() for served in self.served],
        )

    def _port_state(self) -> _PortState:
        """Every listener's broker ports, to tell whether the controller has them."""
        return tuple(
            (served.name, tuple(sorted(served.broker_ports.items()))) for served in self.served
        )

    # -- broker ports ------------------------------------------------------------------------
    async def _open_broker_port(self, storage_id: int) -> None:
        """Serve ``storage_id`` on a broker port of every listener."""
        if storage_id in self._served_ids:
            return
        offset = storage_id - self.storage_node_id_base
        if self.fixed_broker_ports:
            if not 0 <= offset < self.broker_port_count:
                if storage_id not in self._out_of_range:
                    self._out_of_range.add(storage_id)
                    log.warning(
                        "storage node %d is outside the broker ports (broker.port.start=%d, "
                        "broker.port.count=%d, storage.node.id.base=%d): it is advertised "
                        "at the bootstrap listener",
                        storage_id,
                        self.broker_port_start,
                        self.broker_port_count,
                        self.storage_node_id_base,
                    )
                return
        for served in self.served:
            start = served.listener.broker_port_start
            await served.open_broker_port(storage_id, start + offset if start else 0)
        self._served_ids.add(storage_id)

    def _unserved(self, snap: Snapshot) -> list[int]:
        """Storage nodes (any state: a restarted node keeps its port) without a broker port."""
        return [
            n.node_id
            for n in snap.raw.nodes
            if n.kind == common_pb2.STORAGE
            and n.node_id not in self._served_ids
            and n.node_id not in self._out_of_range
        ]

    async def _serve_storage_nodes(self) -> None:
        """Open ports for new storage nodes and announce them (raises if the controller
        cannot be reached; the follower task tries again)."""
        opened = self._unserved(self.metadata.current)
        for storage_id in opened:
            await self._open_broker_port(storage_id)
        if opened and self.metrics_server.ready and self.report_ports is not None:
            # A storage node that joined after start, when the ready file was written
            # (odradek.service); one seen during start is in start()'s answer.
            self.report_ports(self.ports())
        if self.membership is not None and self._announced != self._port_state():
            ports = self._port_state()
            await self.membership.announce(self._node(), timeout=self.request_timeout_ms / 1000)
            self._announced = ports

    async def _follow_storage_nodes(self) -> None:
        """Serve storage nodes that join later (scale-out)."""
        while not self._stop.is_set():
            await self.metadata.wait_for(
                lambda s: bool(self._unserved(s)) or self._announced != self._port_state(), 30.0
            )
            try:
                await self._serve_storage_nodes()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cannot announce broker ports yet: %s", exc)
                await asyncio.sleep(1.0)

    def _listeners(self) -> list[KafkaListener]:
        return [sock for served in self.served for sock in served.sockets()]

    async def stop(self) -> None:
        await self.rpc.set_serving(live=True, ready=False)
        self.metrics_server.ready = False
        await asyncio.gather(*(lst.stop(grace=5.0) for lst in self._listeners()))
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
    def _metric_labels(self, key: int, version: int) -> tuple[str, str]:
        """(api, version) labels, bounded: a series per served API key and version only,
        so a client cannot mint series with made-up keys or versions."""
        served = self.advertised_versions.get(key)  # type: ignore[call-overload]
        if served is None or (key not in self.handlers and key != ApiKey.API_VERSIONS):
            return "Unknown", "unknown"
        if not served[0] <= version <= served[1]:
            return _api_name(key), "unsupported"
        return _api_name(key), str(version)

    def _request_metrics(self, key: int, version: int) -> _RequestMetrics:
        """The request's labelled metrics, looked up once per served (key, version):
        ``labels()`` per request was a measurable share of the gateway's CPU at
        thousands of small Produce requests per second (issue 18)."""
        found = self._metric_children.get((key, version))
        if found is not None:
            return found
        name, version_label = self._metric_labels(key, version)
        requests = REQUESTS.labels(name, version_label)
        seconds = REQUEST_SECONDS.labels(name, version_label)
        if version_label in ("unknown", "unsupported"):  # not kept: a tally lives forever
            return _RequestMetrics(name, requests, seconds)
        # Bounded: served pairs only. Tallied, not locked per request (metric_tallies.py).
        metrics = _RequestMetrics(name, CounterTally(requests), HistogramTally(seconds))
        self._metric_children[(key, version)] = metrics
        return metrics

    def dispatch(
        self, ctx: ConnectionContext, header: RequestHeader, body: memoryview
    ) -> Awaitable[Result]:
        """The request's handling, to await. A plain function returning the coroutine:
        one frame less for the task to pass through each time it resumes (issue 18)."""
        if (
            header.api_key in SASL_APIS
            or not ctx.authenticated
            or not self.quotas.enabled(REQUEST_PERCENTAGE)
        ):
            return self._dispatch(ctx, header, body, None)
        # request_percentage: count the event-loop time this request takes.
        clock = ThreadTime()
        return timed(self._dispatch(ctx, header, body, clock), clock)

    def answer_at_once(
        self, ctx: ConnectionContext, header: RequestHeader, body: memoryview
    ) -> bytes | asyncio.Future[Result] | None:
        """The response frame of a request answered without handling it, or the future
        of a Fetch handled without a task (:meth:`_fetch_at_once`), else None (the
        connection then dispatches it in a task). Only on a connection past
        authentication whose session cannot expire. Metadata: a repeated all-topics
        request whose shared answer still holds (:func:`metadata_api.answered_before`,
        the same path as :meth:`_dispatch` takes first): what :meth:`_dispatch` would
        answer, counted in the same metrics, without the task it runs in (issue 14: a
        never-reading client's Metadata answers, docs/security.md "Hostile clients")."""
        if not ctx.authenticated or ctx.session_expires_at is not None:
            return None
        key = header.api_key
        if key == _PRODUCE:
            return self._produce_at_once(ctx, header, body)
        if key == _FETCH:
            return self._fetch_at_once(ctx, header, body)
        if key != _METADATA:
            return None
        start = time.perf_counter()
        reused = metadata_api.answered_before(self, ctx, header, body)
        framed = shared_answers.frame(header, reused) if reused is not None else None
        if framed is not None:
            metrics = self._request_metrics(header.api_key, header.api_version)
            metrics.requests.inc()
            metrics.seconds.observe(time.perf_counter() - start)
        return framed

    def _fetch_at_once(
        self, ctx: ConnectionContext, header: RequestHeader, body: memoryview
    ) -> asyncio.Future[Result] | None:
        """A Fetch handled without a task (:func:`odradek.gateway.apis.fetch.start`):
        a consumer's long poll is a data link call answered by a callback (issue 18,
        docs/data-link.md). None, and so :meth:`_dispatch` in a task, whenever a client
        quota is configured (throttling.py awaits) or the request does not decode (its
        error answer is :meth:`_dispatch`'s); the same metrics as :meth:`_dispatch`."""
        repeat = ctx.fetch_repeat
        if repeat is not None and not self.quotas.any():
            # The connection's last Fetch again with other offsets (a consumer's next
            # long poll): neither decoded nor planned again (fetch_api.start_repeated).
            offsets = repeat.shape.offsets(header.api_version, body)
            if offsets is not None:
                start = time.perf_counter()
                metrics = self._request_metrics(_FETCH, header.api_version)
                started = fetch_api.start_repeated(
                    self,
                    ctx,
                    repeat,
                    offsets,
                    functools.partial(_fetch_frame, header, metrics.seconds, start),
                )
                if started is not None:
                    metrics.requests.inc()
                    return started
        decoded = self._decoded_to_start(header, body)
        if decoded is None:
            return None
        request, metrics, start = decoded
        return fetch_api.start(
            self,
            ctx,
            header,
            request,  # type: ignore[arg-type]  # a Fetch header decodes to a FetchRequest
            functools.partial(_fetch_frame, header, metrics.seconds, start),
            body,
        )

    def _decoded_to_start(
        self, header: RequestHeader, body: memoryview
    ) -> tuple[Message, _RequestMetrics, float] | None:
        """The request decoded, its metrics counted and its clock started, for a request
        handled without a task; None (:meth:`_dispatch` in a task then) whenever a client
        quota is configured (throttling.py awaits), the API has no handler, or the
        request does not decode (its error answer is :meth:`_dispatch`'s)."""
        if self.quotas.any() or header.api_key not in self.handlers:
            return None
        start = time.perf_counter()
        try:
            request = decode_request(header, body)
        except ProtocolError:
            return None
        metrics = self._request_metrics(header.api_key, header.api_version)
        metrics.requests.inc()
        return request, metrics, start

    def _produce_at_once(
        self, ctx: ConnectionContext, header: RequestHeader, body: memoryview
    ) -> asyncio.Future[Result] | None:
        """A Produce handled without a task where it can be
        (:func:`odradek.gateway.apis.produce.start`), in a task of its own otherwise, as
        :meth:`_dispatch` ends one (decoded once either way). None, and so
        :meth:`_dispatch` in a task, whenever a client quota is configured or the request
        does not decode; the same metrics as :meth:`_dispatch`."""
        decoded = self._decoded_to_start(header, body)
        if decoded is None:
            return None
        request, metrics, start = decoded
        started = produce_api.start(
            self,
            ctx,
            header,
            request,  # type: ignore[arg-type]  # a Produce header decodes to a ProduceRequest
            functools.partial(_produce_frame, header, metrics.seconds, start),
        )
        if started is not None:
            return started
        loop = ctx.loop or asyncio.get_running_loop()
        return loop.create_task(self._respond(ctx, header, body, request, metrics, start, None))

    async def _dispatch(
        self,
        ctx: ConnectionContext,
        header: RequestHeader,
        body: memoryview,
        clock: ThreadTime | None,
    ) -> Result:
        key = header.api_key
        metrics = self._request_metrics(key, header.api_version)
        name = metrics.name
        start = time.perf_counter()
        metrics.requests.inc()
        if key == _API_VERSIONS:
            low, high = self.advertised_versions[ApiKey.API_VERSIONS]
            if not low <= header.api_version <= high:
                # docs/compatibility.md C2: answer in v0 with our ranges; do not parse the body.
                return bytes(
                    build_api_versions_response(
                        header.api_version,
                        header.correlation_id,
                        supported=self.versions_for(ctx),
                    )
                )
        if (
            ctx.session_expires_at is not None
            and key not in SASL_APIS
            and time.monotonic() > ctx.session_expires_at
        ):
            # KIP-368: Kafka's SocketServer closes a channel whose session has expired
            # on its next request other than a re-authentication.
            log.info("closing %s: SASL session expired (connections.max.reauth.ms)", ctx.peer)
            raise CloseConnection()
        if not ctx.authenticated and key not in PRE_AUTHENTICATION:
            # Kafka's SaslServerAuthenticator: IllegalSaslStateException, connection closed.
            REQUEST_ERRORS.labels(name).inc()
            log.info("closing %s: %s before SASL authentication", ctx.peer, name)
            raise CloseConnection()
        handler = self.handlers.get(key)
        if handler is None:
            REQUEST_ERRORS.labels(name).inc()
            log.info("closing %s: API key %s is not served", ctx.peer, key)
            raise CloseConnection()
        if key == _METADATA:
            # The same all-topics request as before, its answer unchanged: found by its
            # bytes, neither decoded nor handled again (apis/metadata.py, issue 14).
            reused = metadata_api.answered_before(self, ctx, header, body)
            framed = shared_answers.frame(header, reused) if reused is not None else None
            if framed is not None:
                metrics.seconds.observe(time.perf_counter() - start)
                return framed
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
        return await self._respond(ctx, header, body, request, metrics, start, clock)

    async def _respond(
        self,
        ctx: ConnectionContext,
        header: RequestHeader,
        body: memoryview,
        request: Any,
        metrics: _RequestMetrics,
        start: float,
        clock: ThreadTime | None,
    ) -> Result:
        """A decoded request handled, throttled and encoded (:meth:`_dispatch`'s end)."""
        key = header.api_key
        response = await self.handlers[key](self, ctx, header, request)
        # Client quotas (throttling.py); not on the SASL exchange, which Kafka's
        # authenticator answers before any quota applies.
        if key not in SASL_APIS and ctx.authenticated and self.quotas.any():
            response = await apply_quotas(
                self.quotas, ctx, header, request, response, len(body), clock
            )
        metrics.seconds.observe(time.perf_counter() - start)
        if response is None or not expects_response(header, request):
            return None
        if key == _FETCH and isinstance(response, FetchResponse):
            parts = encode_fetch_response(header.correlation_id, header.api_version, response)
            if parts is not None:
                return parts  # record payloads go to the socket uncopied
        if key == _PRODUCE and isinstance(response, ProduceResponse):
            version = header.api_version
            frame = encode_produce_response(
                header.correlation_id, response_header_version(key, version), version, response
            )
            if frame is not None:
                return frame  # framed by hand: the generic encoder costs more than the rest
        shared = shared_answers.frame(header, response)
        if shared is not None:
            if isinstance(response, MetadataResponse):  # the all-topics answer
                metadata_api.remember(ctx, header, body, response)
            return shared  # an answer many requests share, encoded once per version
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
        """The online gateways by id, this one as it is right now (its registration in
        the metadata may lag behind its broker ports)."""
        others = [
            n
            for n in self.metadata.current.nodes_of(common_pb2.GATEWAY)
            if n.node_id != self.node_id
        ]
        return sorted([*others, self._node()], key=lambda n: n.node_id)

    def versions_for(self, ctx: ConnectionContext) -> dict[ApiKey, tuple[int, int]]:
        """What ApiVersions lists on the client's listener (SASL APIs on SASL ones only)."""
        sasl = ctx.security_protocol.startswith("SASL_")
        return self.advertised_versions if sasl else self._without_sasl

    def brokers(self, listener: str | None = None) -> dict[int, Broker]:
        """The brokers clients of ``listener`` see (None: the first listener), by id
        (:func:`odradek.gateway.brokers.advertise`)."""
        snap = self.metadata.current
        ports = self._port_state()
        cached = self._brokers_cache.get(listener)
        if cached is not None and cached[0] is snap and cached[1] == ports:
            return cached[2]
        brokers = advertise(snap.raw, self.gateways(), listener)
        self._brokers_cache[listener] = (snap, ports, brokers)
        return brokers
