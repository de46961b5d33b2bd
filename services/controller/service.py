"""The controller process: metadata store, election, gRPC API and metrics.

Settings: :data:`odradek.config_catalog.controller.CONTROLLER_CONFIGS` (node id,
listener, ``metadata.store``: a directory for the embedded store, or
``etcd://host:port[,host:port...][/root]`` where several controllers share one store and
elect one active; heartbeat and lease timing), plus the cluster-wide broker configs of
:data:`odradek.config_catalog.broker.BROKER_CONFIGS`, which the controller validates
(:mod:`.broker_defaults`) and publishes. All are listed in ``docs/configuration.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from odradek.config import Config, ConfigError
from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.controller import CONTROLLER_CONFIGS
from odradek.controller import broker_defaults
from odradek.controller.controller import Controller, ControllerSettings
from odradek.controller.embedded_store import EmbeddedStore
from odradek.controller.errors import ControllerError
from odradek.controller.servicer import ControllerServicer
from odradek.controller.store import MetadataStore, StoreError
from odradek.controller.store_url import EtcdTarget, store_target
from odradek.metrics import MetricsServer
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import controller_pb2_grpc

log = logging.getLogger(__name__)

DEFAULTS: dict[str, str] = {**CONTROLLER_CONFIGS.defaults(), **BROKER_CONFIGS.defaults()}


def parse_listener(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(
            f"Invalid value {value!r} for configuration grpc.listener: expected host:port"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


class ControllerService:
    name = "controller"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.host, self.grpc_port = parse_listener(config.str("grpc.listener"))
        self.metrics_port = CONTROLLER_CONFIGS.read_int(config, "metrics.port")
        self.store_target = store_target(config.str("metadata.store"))
        self.store_dir = self.store_target if isinstance(self.store_target, Path) else None
        self.snapshot_entries = CONTROLLER_CONFIGS.read_int(
            config, "metadata.store.snapshot.entries"
        )
        self.store_timeout_ms = CONTROLLER_CONFIGS.read_int(config, "metadata.store.timeout.ms")
        try:
            static = broker_defaults.static_values(config.as_dict())
        except ControllerError as exc:
            raise ConfigError(exc.message) from None
        self.settings = ControllerSettings(
            node_id=CONTROLLER_CONFIGS.read_int(config, "node.id"),
            heartbeat_interval_ms=CONTROLLER_CONFIGS.read_int(
                config, "broker.heartbeat.interval.ms"
            ),
            session_timeout_ms=CONTROLLER_CONFIGS.read_int(config, "broker.session.timeout.ms"),
            lease_ttl_ms=CONTROLLER_CONFIGS.read_int(config, "controller.lease.ttl.ms"),
            producer_id_block_size=CONTROLLER_CONFIGS.read_int(config, "producer.id.block.size"),
            static_configs=static,
        )
        if isinstance(self.store_target, EtcdTarget) and self.store_target.root:
            self.settings.root = self.store_target.root
        if self.settings.session_timeout_ms <= self.settings.heartbeat_interval_ms:
            raise ConfigError(
                "broker.session.timeout.ms must be larger than broker.heartbeat.interval.ms "
                f"({self.settings.session_timeout_ms} <= {self.settings.heartbeat_interval_ms})"
            )
        self.store: MetadataStore | None = None
        self.controller: Controller | None = None
        self.rpc: RpcServer | None = None
        self.metrics: MetricsServer | None = None
        self._health_task: asyncio.Task[None] | None = None

    async def start(self) -> dict[str, int]:
        self.store = await self._open_store()
        self.controller = Controller(self.store, self.settings)
        self.rpc = RpcServer(self.host, self.grpc_port, node_kind_of=self._node_kind)
        controller_pb2_grpc.add_ControllerServicer_to_server(
            ControllerServicer(self.controller), self.rpc.server
        )
        grpc_port = await self.rpc.start()
        self.metrics = MetricsServer(self.host, self.metrics_port)
        metrics_port = await self.metrics.start()
        self.controller.on_state_change = self._health_changed
        await self.controller.start()
        await self.controller.wait_settled(30.0)
        await self._publish_health()
        return {"grpc": grpc_port, "metrics": metrics_port}

    async def _open_store(self) -> MetadataStore:
        target = self.store_target
        if isinstance(target, EtcdTarget):
            # Imported here: the etcd client library is only needed by etcd users.
            from odradek.controller.etcd_store import EtcdStore, EtcdTls

            # Not waited for: the election loop retries until etcd answers.
            log.info("metadata store: etcd at %s", ",".join(target.endpoints))
            return await EtcdStore.connect(
                target.endpoints,
                timeout=self.store_timeout_ms / 1000.0,
                tls=EtcdTls.from_settings(self.config.get),
            )
        try:
            return await EmbeddedStore.open(target, snapshot_every=self.snapshot_entries)
        except StoreError as exc:
            raise ConfigError(f"cannot open metadata store {target}: {exc}") from exc

    def _node_kind(self, node_id: int) -> int | None:
        """A registered node's kind, for authorizing calls that carry only its id
        (odradek.rpc.peer_auth); None when unknown (a standby, a new node)."""
        model = self.controller.model if self.controller is not None else None
        node = model.nodes.get(node_id) if model is not None else None
        return int(node.kind) if node is not None else None

    def _health_changed(self) -> None:
        if self._health_task is None or self._health_task.done():
            self._health_task = asyncio.get_running_loop().create_task(self._publish_health())

    async def _publish_health(self) -> None:
        ready = self.controller is not None and self.controller.healthy
        if self.metrics is not None:
            self.metrics.ready = ready
        if self.rpc is not None:
            with contextlib.suppress(Exception):
                await self.rpc.set_serving(live=True, ready=ready)

    async def stop(self) -> None:
        if self.controller is not None:
            self.controller.on_state_change = None
            await self.controller.stop()
        if self.rpc is not None:
            await self.rpc.stop(grace=2.0)
        if self.metrics is not None:
            await self.metrics.stop()
        if self._health_task is not None:
            self._health_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._health_task
        if self.store is not None:
            await self.store.close()


def build(config: Config) -> ControllerService:
    return ControllerService(config)
