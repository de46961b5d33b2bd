"""Checking a user's name and password with the cluster itself: a real SASL exchange.

The console keeps no user list and no password hashes: a login opens a Kafka
connection authenticated as the user (SaslHandshake + SaslAuthenticate, as any Kafka
client does, :class:`odradek.kafka_client.BrokerConnection`) and asks for Metadata;
the gateway's answer is the verdict. The mechanism is ``sasl.mechanism`` when set,
else the strongest the listener enables that works for the user: SCRAM-SHA-512, then
SCRAM-SHA-256, then PLAIN (the listener is asked once with an empty SaslHandshake, see
:func:`odradek.kafka_client.offered_sasl_mechanisms`).
"""

from __future__ import annotations

from odradek.console.sessions import ClientPool, Session
from odradek.kafka_client import KafkaClient, KafkaClientError, offered_sasl_mechanisms
from odradek.protocol.errors import ErrorCode

PREFERRED = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


class LoginFailed(Exception):
    """What the login form shows: the broker's words, or why the cluster was not asked."""


class Authenticator:
    def __init__(self, mechanism: str = "") -> None:
        self.configured = mechanism.strip().upper()
        self._offered: list[str] | None = None

    async def mechanisms(self, pool: ClientPool) -> list[str]:
        """``sasl.mechanism``, else those the listener offers that the console speaks,
        strongest first."""
        if self.configured:
            return [self.configured]
        if self._offered is None:
            offered = await offered_sasl_mechanisms(pool.base)
            self._offered = [m for m in PREFERRED if m in offered]
            if not self._offered:
                self._offered = None
                raise LoginFailed(
                    f"The cluster's listener offers no mechanism the console speaks "
                    f"(it offers {', '.join(offered) or 'none'}; the console speaks "
                    f"{', '.join(PREFERRED)})"
                )
        return self._offered

    async def login(self, pool: ClientPool, username: str, password: str) -> Session:
        """A session acting as ``username``, once the cluster accepted the password.

        SCRAM credentials are kept per mechanism (a user may have only SCRAM-SHA-256),
        so a refusal with one mechanism tries the next; the first refusal is reported."""
        if not username:
            raise LoginFailed("Give a user name")
        try:
            mechanisms = await self.mechanisms(pool)
        except KafkaClientError as exc:
            raise LoginFailed(f"The cluster could not be asked: {exc.message}") from None
        refused: KafkaClientError | None = None
        for mechanism in mechanisms:
            client = KafkaClient(pool.with_credentials(mechanism, username, password))
            try:
                await client.metadata(topics=[])
            except KafkaClientError as exc:
                await client.close()
                if exc.code != ErrorCode.SASL_AUTHENTICATION_FAILED:
                    raise LoginFailed(f"The cluster could not be asked: {exc.message}") from None
                refused = refused or exc
                continue
            return pool.open_session(client)
        assert refused is not None
        raise LoginFailed(refused.message)
