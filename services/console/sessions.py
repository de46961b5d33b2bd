"""One Kafka client per identity the console acts for.

With no security configured (today's clusters) every request acts as the console's
own anonymous client and there is no login. The pool is keyed by
:meth:`ClientConfig.identity`, so when SASL arrives a login handler only has to put
the user's mechanism, name and password into a :class:`ClientConfig` (the rest of the
configuration passed through unchanged) and ask the pool for that user's client:
every page then acts with the user's own permissions. Idle clients are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time

from odradek.kafka_client import ClientConfig, KafkaClient

IDLE_CLOSE_S = 15 * 60


class ClientPool:
    def __init__(self, base: ClientConfig) -> None:
        self.base = base
        self._clients: dict[str, tuple[KafkaClient, float]] = {}

    @property
    def security_enabled(self) -> bool:
        return bool(self.base.sasl_mechanism)

    def anonymous(self) -> KafkaClient:
        return self.client_for(self.base)

    def client_for(self, config: ClientConfig) -> KafkaClient:
        key = config.identity()
        entry = self._clients.get(key)
        client = (
            entry[0] if entry is not None and entry[0].config == config else KafkaClient(config)
        )
        self._clients[key] = (client, time.monotonic())
        return client

    def with_credentials(self, mechanism: str, username: str, password: str) -> ClientConfig:
        return dataclasses.replace(
            self.base, sasl_mechanism=mechanism, sasl_username=username, sasl_password=password
        )

    async def close_idle(self) -> None:
        now = time.monotonic()
        for key, (client, used) in list(self._clients.items()):
            if now - used > IDLE_CLOSE_S and key != self.base.identity():
                del self._clients[key]
                await client.close()

    async def close(self) -> None:
        clients = [c for c, _ in self._clients.values()]
        self._clients.clear()
        for client in clients:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 5)
