"""Who the console acts for: its own anonymous client, or a logged-in user's session.

With no SASL configured (``security.protocol`` PLAINTEXT or SSL) every request acts as
the console's own client and there is no login. With SASL_PLAINTEXT or SASL_SSL the
console has no Kafka identity of its own: a user logs in with a name and password
that the cluster checks with a real SASL exchange (:mod:`odradek.console.login`), and
every page, form and live refresh of that session goes through a Kafka client
authenticated as that user, so the cluster's ACLs decide what they see and do.

A session is a random id (``secrets.token_urlsafe``, 256 bits) in a Secure, HttpOnly,
SameSite=Strict cookie. The password lives only in the session's client config, in
this process's memory, and is forgotten on logout or after
``console.session.timeout.ms`` without a request; it is never written to the cookie,
a log or the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from dataclasses import dataclass

from odradek.kafka_client import ClientConfig, KafkaClient

COOKIE = "odradek_console_session"


@dataclass
class Session:
    session_id: str
    username: str
    mechanism: str
    client: KafkaClient
    last_used: float


class ClientPool:
    """The anonymous client, and the logged-in sessions each with its own client."""

    def __init__(self, base: ClientConfig, session_timeout_s: float = 30 * 60) -> None:
        self.base = base
        self.session_timeout_s = session_timeout_s
        self._anonymous: KafkaClient | None = None
        self._sessions: dict[str, Session] = {}

    @property
    def security_enabled(self) -> bool:
        return self.base.uses_sasl

    def anonymous(self) -> KafkaClient:
        if self._anonymous is None:
            self._anonymous = KafkaClient(self.base)
        return self._anonymous

    def with_credentials(self, mechanism: str, username: str, password: str) -> ClientConfig:
        return ClientConfig(
            self.base.bootstrap_servers,
            client_id=self.base.client_id,
            request_timeout_s=self.base.request_timeout_s,
            security_protocol=self.base.security_protocol,
            sasl_mechanism=mechanism,
            sasl_username=username,
            sasl_password=password,
            ssl_ca_location=self.base.ssl_ca_location,
            ssl_certificate_location=self.base.ssl_certificate_location,
            ssl_key_location=self.base.ssl_key_location,
            ssl_key_password=self.base.ssl_key_password,
            ssl_check_hostname=self.base.ssl_check_hostname,
        )

    def open_session(self, client: KafkaClient) -> Session:
        """A session for a client whose credentials the cluster has just accepted."""
        session = Session(
            secrets.token_urlsafe(32),
            client.config.sasl_username,
            client.config.sasl_mechanism,
            client,
            time.monotonic(),
        )
        self._sessions[session.session_id] = session
        return session

    def session(self, session_id: str | None) -> Session | None:
        """The live session with this id (its idle clock restarted), else None."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_used > self.session_timeout_s:
            self._sessions.pop(session_id, None)
            asyncio.get_running_loop().create_task(session.client.close())
            return None
        session.last_used = now
        return session

    async def close_session(self, session_id: str | None) -> None:
        session = self._sessions.pop(session_id or "", None)
        if session is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.client.close(), 5)

    async def close_idle(self) -> None:
        now = time.monotonic()
        for sid, session in list(self._sessions.items()):
            if now - session.last_used > self.session_timeout_s:
                await self.close_session(sid)

    async def close(self) -> None:
        clients = [s.client for s in self._sessions.values()]
        self._sessions.clear()
        if self._anonymous is not None:
            clients.append(self._anonymous)
            self._anonymous = None
        for client in clients:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 5)
