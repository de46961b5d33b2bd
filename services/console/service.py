"""The console service: an aiohttp web server in front of a Kafka client of the cluster.

Settings (Kafka's names where Kafka has one):
- ``console.listener`` host:port of the web UI (``odradek up``: 127.0.0.1:8080).
- ``bootstrap.servers`` the gateways; empty: the gateways listed in the controller's metadata.
- ``controller.address`` the controllers (comma separated); optional, it adds service
  health, roles and storage log dirs to the Overview.
- ``controller.metrics.address`` the controllers' /metrics endpoints, same order (optional).
- ``security.protocol``, ``client.id``, ``request.timeout.ms``, ``ssl.truststore.location``
  (PEM CA file), ``ssl.endpoint.identification.algorithm`` (``https``, or empty for no
  host name check): passed to the console's Kafka clients. With SASL_PLAINTEXT or
  SASL_SSL users log in and the console acts as them (:mod:`odradek.console.sessions`);
  ``sasl.mechanism`` picks the mechanism, empty: the strongest the listener offers.
- ``console.ssl.keystore.location``: a PEM file with the key and certificate chain the
  web UI serves HTTPS with (empty: plain HTTP).
- ``console.session.timeout.ms``: a login session ends after this long without a request.
- ``console.sample.interval.ms`` how often live charts get a new point.

Ports reported: ``http`` (the UI), ``grpc`` (only the standard gRPC health service, so
the console is probed like every other service) and ``metrics`` (/metrics, /healthz,
/readyz).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl

from aiohttp import web

from odradek.config import Config, ConfigError
from odradek.console.login import Authenticator
from odradek.console.sampler import Sampler
from odradek.console.sessions import ClientPool
from odradek.console.web import build_app
from odradek.controller_client import ControllerClient
from odradek.kafka_client import ClientConfig, KafkaClient, KafkaClientError
from odradek.metadata_cache import MetadataCache, NodeKind, Snapshot
from odradek.metrics import MetricsServer
from odradek.rpc.server import RpcServer

log = logging.getLogger(__name__)

DEFAULTS = {
    "console.listener": "127.0.0.1:8080",
    "grpc.listener": "127.0.0.1:0",
    "bootstrap.servers": "",
    "controller.address": "",
    "controller.metrics.address": "",
    "metrics.port": "0",
    "client.id": "odradek-console",
    "request.timeout.ms": "30000",
    "security.protocol": "PLAINTEXT",
    "sasl.mechanism": "",
    "ssl.truststore.location": "",
    "ssl.endpoint.identification.algorithm": "https",
    "console.ssl.keystore.location": "",
    "console.session.timeout.ms": str(30 * 60 * 1000),
    "console.sample.interval.ms": "2000",
}


def _split(value: str) -> list[str]:
    return [a.strip() for a in value.split(",") if a.strip()]


class ConsoleService:
    name = "console"

    def __init__(self, config: Config) -> None:
        self.config = config
        host, sep, port = config.str("console.listener").rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(
                f"Invalid value {config.str('console.listener')!r} for configuration "
                "console.listener: expected host:port"
            )
        self.host, self.port = host.strip("[]") or "127.0.0.1", int(port)
        self.controller_addresses = _split(config.str("controller.address"))
        metrics = _split(config.str("controller.metrics.address"))
        self.controller = (
            ControllerClient(self.controller_addresses) if self.controller_addresses else None
        )
        self.metadata = MetadataCache()
        self.static_bootstrap = tuple(_split(config.str("bootstrap.servers")))
        if not self.static_bootstrap and self.controller is None:
            raise ConfigError("the console needs bootstrap.servers or controller.address")
        # Passed through to every Kafka client the console makes (one per user, see sessions).
        self.client_defaults = ClientConfig(
            (),
            client_id=config.str("client.id"),
            request_timeout_s=config.int("request.timeout.ms", min=1) / 1000.0,
            security_protocol=config.str("security.protocol").strip().upper() or "PLAINTEXT",
            ssl_ca_location=config.str("ssl.truststore.location"),
            ssl_check_hostname=bool(config.str("ssl.endpoint.identification.algorithm").strip()),
        )
        self.session_timeout_s = config.int("console.session.timeout.ms", min=1000) / 1000.0
        self.authenticator = Authenticator(config.str("sasl.mechanism"))
        self.https_keystore = config.str("console.ssl.keystore.location").strip()
        self.pool: ClientPool | None = None
        self.sampler = Sampler(
            self.client,
            self.snapshot,
            interval_s=config.int("console.sample.interval.ms", min=100) / 1000.0,
            controllers=[
                (a, metrics[i] if i < len(metrics) else None)
                for i, a in enumerate(self.controller_addresses)
            ],
        )
        self.metrics_server = MetricsServer(self.host, config.int("metrics.port", 0, min=0))
        grpc_host, _, grpc_port = config.str("grpc.listener").rpartition(":")
        if not grpc_port.isdigit():
            raise ConfigError(
                f"Invalid value {config.str('grpc.listener')!r} for configuration grpc.listener: "
                "expected host:port"
            )
        self.rpc = RpcServer(grpc_host.strip("[]") or "127.0.0.1", int(grpc_port))
        self._runner: web.AppRunner | None = None
        self._stop = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None

    def snapshot(self) -> Snapshot | None:
        return self.metadata.current if self.metadata.ready else None

    def bootstrap_servers(self) -> tuple[str, ...]:
        if self.static_bootstrap:
            return self.static_bootstrap
        snapshot = self.snapshot()
        if snapshot is None:
            return ()
        # A gateway with several listeners: the one named as our security.protocol
        # (e.g. SASL_SSL next to PLAINTEXT), else its first (docs/security.md).
        wanted = self.client_defaults.security_protocol
        out = []
        for n in snapshot.nodes_of(NodeKind.GATEWAY):
            match = [lst for lst in n.listeners if lst.name == wanted and lst.port > 0]
            if match:
                out.append(f"{match[0].host or n.host}:{match[0].port}")
            elif n.kafka_port > 0:
                out.append(f"{n.advertised_host or n.host}:{n.kafka_port}")
        return tuple(out)

    def client_pool(self) -> ClientPool:
        if self.pool is None:
            servers = self.bootstrap_servers()
            if not servers:
                raise KafkaClientError("no gateway is registered yet")
            self.pool = ClientPool(
                dataclasses.replace(self.client_defaults, bootstrap_servers=servers),
                self.session_timeout_s,
            )
        return self.pool

    @property
    def security_enabled(self) -> bool:
        """SASL: users log in, and the console has no Kafka identity of its own."""
        return self.client_defaults.uses_sasl

    def client(self) -> KafkaClient | None:
        """The console's own client for the sampler; None with SASL (no identity)."""
        return None if self.security_enabled else self.client_pool().anonymous()

    async def start(self) -> dict[str, int]:
        metrics_port = await self.metrics_server.start()
        grpc_port = await self.rpc.start()
        await self.rpc.set_serving(live=True, ready=False)
        if self.controller is not None:
            self._watch = asyncio.get_running_loop().create_task(
                self.controller.watch(self.metadata.update, self._stop), name="metadata-watch"
            )
        # No wait for a gateway: the console serves its pages (with "no gateway is
        # registered yet") from the start, and builds its client pool on first use.
        app = build_app(self)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        if self.security_enabled and not self.https_keystore:
            log.warning(
                "users log in over plain HTTP (console.ssl.keystore.location is not set): "
                "passwords cross the network in clear, and browsers keep the Secure "
                "session cookie only for localhost"
            )
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._https())
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        http_port = sockets[0].getsockname()[1] if sockets else self.port
        self.sampler.start()
        self.metrics_server.ready = True
        await self.rpc.set_serving(live=True, ready=True)
        log.info("console on http://%s:%d/", self.host, http_port)
        return {"http": http_port, "grpc": grpc_port, "metrics": metrics_port}

    def _https(self) -> ssl.SSLContext | None:
        if not self.https_keystore:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(self.https_keystore)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"Invalid value {self.https_keystore!r} for configuration "
                f"console.ssl.keystore.location: {exc}"
            ) from None
        return context

    async def stop(self) -> None:
        self.metrics_server.ready = False
        with contextlib.suppress(Exception):
            await self.rpc.set_serving(live=True, ready=False)
        self._stop.set()
        await self.sampler.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch
        if self.pool is not None:
            await self.pool.close()
        if self.controller is not None:
            await self.controller.close()
        await self.rpc.stop(grace=1.0)
        await self.metrics_server.stop()


def build(config: Config) -> ConsoleService:
    return ConsoleService(config)
