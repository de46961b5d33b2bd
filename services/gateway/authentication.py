"""SASL authentication of one connection (Kafka's ``SaslServerAuthenticator``).

A SASL listener's connection starts unauthenticated: it may send ApiVersions, then
SaslHandshake (picks a mechanism), then SaslAuthenticate until the mechanism is
done; any other request before that closes the connection, as Kafka does
(``IllegalSaslStateException``). A failed exchange answers
SASL_AUTHENTICATION_FAILED and closes the connection after the response; an
exchange not finished within ``authentication.timeout.ms`` of the connection
closes it too (connection.py).

Mechanisms (docs/security.md):

- SCRAM-SHA-256/512 check proofs against the salted keys the controller publishes
  (:mod:`odradek.sasl.scram`);
- PLAIN checks the password against the same SCRAM credentials (SHA-512 if the
  user has one, else SHA-256): Odradek stores no passwords, so where Kafka's
  PLAIN reads a JAAS file, ours needs a SCRAM credential for the user.

SaslHandshake v0 (raw tokens after the handshake, no SaslAuthenticate framing) is
accepted as a handshake but the raw-token phase is not served; clients of the last
seven years (Kafka 1.0+, librdkafka, kafka-python, aiokafka, kafkajs) use v1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from odradek.metadata_cache import Snapshot
from odradek.sasl.plain import PlainError, parse_plain
from odradek.sasl.scram import (
    MECHANISMS,
    ScramCredential,
    ScramError,
    ScramMechanism,
    ScramServer,
    verify_password,
)

# Unknown users get a fake SCRAM salt derived from this (per gateway process).
_FAKE_SECRET = os.urandom(32)


class AuthenticationFailed(Exception):
    """The exchange failed: answer SASL_AUTHENTICATION_FAILED and close."""


@dataclass(slots=True)
class SaslSession:
    """The SASL state of one connection."""

    mechanisms: tuple[str, ...]
    mechanism: str | None = None  # chosen by SaslHandshake
    complete: bool = False
    failed: bool = False
    user: str = ""
    # KIP-368 re-authentication: who the connection was, which must not change
    previous: tuple[str, str] | None = None  # (mechanism, user)
    _scram: ScramServer | None = field(default=None, repr=False)

    def reauthentication(self) -> SaslSession:
        """A fresh exchange on an authenticated connection (Kafka's ReauthInfo)."""
        assert self.mechanism is not None and self.complete
        return SaslSession(self.mechanisms, previous=(self.mechanism, self.user))

    def handshake(self, mechanism: str) -> bool:
        """SaslHandshake: True if ``mechanism`` is enabled (then it is chosen); a
        re-authentication must keep the connection's mechanism."""
        if mechanism not in self.mechanisms or self.mechanism is not None:
            return False
        if self.previous is not None and mechanism != self.previous[0]:
            return False
        self.mechanism = mechanism
        return True

    def step(self, token: bytes, credentials: Credentials) -> bytes:
        """One SaslAuthenticate token in, the server's token out."""
        if self.mechanism is None or self.complete or self.failed:
            raise AuthenticationFailed("Unexpected SaslAuthenticate request")
        try:
            if self.mechanism == "PLAIN":
                user, password = parse_plain(token)
                cred = credentials.for_plain(user)
                if cred is None or not verify_password(cred, password):
                    raise AuthenticationFailed(
                        "Authentication failed: Invalid username or password"
                    )
                self.user, self.complete = user, True
                return b""
            mech = MECHANISMS[self.mechanism]
            if self._scram is None:
                self._scram = ScramServer(mech, _FAKE_SECRET)
                user, answer = self._scram.client_first(token, credentials.scram(mech))
                self.user = user
                return answer
            answer = self._scram.client_final(token)
            self.complete = True
            return answer
        except (ScramError, PlainError) as exc:
            self.failed = True
            raise AuthenticationFailed(str(exc)) from None
        except AuthenticationFailed:
            self.failed = True
            raise
        finally:
            if self.complete and self.previous is not None and self.user != self.previous[1]:
                self.failed, self.complete = True, False
                raise AuthenticationFailed(  # Kafka's SaslServerAuthenticator message
                    f"Cannot change principals during re-authentication from "
                    f"User:{self.previous[1]}: User:{self.user}"
                )


class Credentials:
    """The SCRAM credentials of the current metadata snapshot, by mechanism and user."""

    def __init__(self) -> None:
        self._snapshot: Snapshot | None = None
        self._by_mech: dict[ScramMechanism, dict[str, ScramCredential]] = {}

    def update(self, snapshot: Snapshot) -> None:
        if snapshot is self._snapshot:
            return
        by_mech: dict[ScramMechanism, dict[str, ScramCredential]] = {m: {} for m in ScramMechanism}
        for c in snapshot.raw.scram_credentials:
            if c.mechanism in (1, 2):
                mech = ScramMechanism(c.mechanism)
                by_mech[mech][c.user] = ScramCredential(
                    mech, c.salt, c.stored_key, c.server_key, c.iterations
                )
        self._by_mech, self._snapshot = by_mech, snapshot

    def scram(self, mech: ScramMechanism) -> dict[str, ScramCredential]:
        return self._by_mech.get(mech, {})

    def for_plain(self, user: str) -> ScramCredential | None:
        for mech in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
            found = self._by_mech.get(mech, {}).get(user)
            if found is not None:
                return found
        return None

    def users(self) -> dict[str, list[ScramCredential]]:
        out: dict[str, list[ScramCredential]] = {}
        for creds in self._by_mech.values():
            for user, cred in creds.items():
                out.setdefault(user, []).append(cred)
        return out
