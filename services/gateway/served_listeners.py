"""One listener of a gateway as it runs: its bootstrap port and its broker ports.

Each entry of ``listeners`` (:mod:`odradek.gateway.listeners`) gets its own bootstrap
socket and its own broker port per storage node (docs/brokers.md), all with that
listener's security, so a client that bootstrapped over SASL_SSL is sent to SASL_SSL
broker ports and one on PLAINTEXT to PLAINTEXT ones (Kafka: Metadata answers the
brokers' endpoints for the listener the request came in on). The gateway registers
every listener's advertised endpoint (``Node.listeners``) so every gateway can answer
for all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from odradek.config import ConfigError
from odradek.gateway.connection import (
    AnswerAtOnce,
    ConnectionLimits,
    ConnectionQuota,
    Dispatch,
    KafkaListener,
)
from odradek.gateway.listeners import Listener
from odradek.rpc.v1 import common_pb2
from odradek.tls_reload import ReloadingServerContext

log = logging.getLogger(__name__)


class ServedListener:
    """The sockets of one listener: bootstrap plus one per storage node."""

    def __init__(
        self,
        listener: Listener,
        dispatch: Dispatch,
        limits: ConnectionLimits,
        quota: ConnectionQuota,
        tls_overrides: Callable[[str, int | None], Mapping[str, str]] = lambda _l, _b: {},
        answer_at_once: AnswerAtOnce | None = None,
    ) -> None:
        self.listener = listener
        self._answer_at_once = answer_at_once
        # A new socket's dynamic ssl.* settings (odradek.gateway.listener_certificates).
        self._tls_overrides = tls_overrides
        self._dispatch = dispatch
        self._limits = limits
        self._quota = quota
        self.bootstrap = self._socket(listener.port, None)
        self.brokers: dict[int, KafkaListener] = {}  # storage node id -> its broker port
        self.broker_ports: dict[int, int] = {}  # storage node id -> bound (= advertised) port
        self.advertised_port = listener.advertised_port

    @property
    def name(self) -> str:
        return self.listener.name

    def _socket(self, port: int, broker_id: int | None) -> KafkaListener:
        return KafkaListener(
            self.listener.host,
            port,
            self._dispatch,
            self._limits,
            broker_id=broker_id,
            security=self.listener.security,
            quota=self._quota,
            tls=self._tls(broker_id),
            answer_at_once=self._answer_at_once,
        )

    def _tls(self, broker_id: int | None) -> ReloadingServerContext | None:
        """The socket's own reloadable TLS context (None on a listener without TLS)."""
        settings = self.listener.security.tls_settings
        if settings is None:
            return None
        overrides = self._tls_overrides(self.name, broker_id)
        try:
            return ReloadingServerContext(settings, overrides)
        except ConfigError as exc:
            if not overrides:
                raise
            log.warning(
                "listener %s, broker %s: dynamic ssl settings unusable here, serving the "
                "static ones: %s",
                self.name,
                broker_id,
                exc,
            )
            return ReloadingServerContext(settings)

    async def start(self) -> int:
        """Open the bootstrap port; its bound port."""
        bound = await self.bootstrap.start()
        if not self.advertised_port:
            self.advertised_port = bound
        log.info("listener %s: listening on %s:%d", self.name, self.listener.host, bound)
        return bound

    async def open_broker_port(self, storage_id: int, port: int) -> None:
        """Serve ``storage_id`` on ``port`` (0: ephemeral), once."""
        if storage_id in self.brokers:
            return
        sock = self._socket(port, storage_id)
        bound = await sock.start()
        self.brokers[storage_id] = sock
        self.broker_ports[storage_id] = bound
        log.info(
            "listener %s, broker %d: listening on %s:%d",
            self.name,
            storage_id,
            self.listener.host,
            bound,
        )

    def sockets(self) -> list[KafkaListener]:
        return [self.bootstrap, *self.brokers.values()]

    def endpoint(self) -> common_pb2.ListenerEndpoint:
        """What the gateway registers for this listener."""
        return common_pb2.ListenerEndpoint(
            name=self.name,
            host=self.listener.advertised_host,
            port=self.advertised_port,
            broker_ports=self.broker_ports,
        )
