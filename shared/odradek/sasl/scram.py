"""SCRAM (RFC 5802 / RFC 7677) as Kafka uses it: credentials and the server's exchange.

Kafka's ``ScramSaslServer`` and ``ScramCredentialUtils``: a user's credential per
mechanism is (salt, StoredKey, ServerKey, iterations); the password itself is never
stored. AlterUserScramCredentials carries ``SaltedPassword`` (the client computes
it); :func:`credential_from_salted` derives the stored keys from it.

The exchange, one :class:`ScramServer` per authentication attempt:

1. client-first ``n,,n=user,r=cnonce[,extensions]`` -> server-first
   ``r=cnonce+snonce,s=base64(salt),i=iterations``;
2. client-final ``c=biws,r=nonce,p=proof`` -> server-final ``v=signature``.

Any deviation (wrong nonce, channel binding requested, bad proof, unknown user,
replayed or out-of-order message) raises :class:`ScramError`; the caller answers
SASL_AUTHENTICATION_FAILED. An unknown user gets a fake server-first from a
per-server secret so the answer does not reveal whether the user exists; the proof
then fails as a wrong password would.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "MECHANISMS",
    "ScramCredential",
    "ScramError",
    "ScramMechanism",
    "ScramServer",
    "client_proof",
    "credential_from_password",
    "credential_from_salted",
    "salted_password",
]

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations()
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations()


class ScramMechanism(IntEnum):
    """Kafka's ScramMechanism ids (AlterUserScramCredentials' ``Mechanism``)."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def sasl_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_sasl_name(cls, name: str) -> ScramMechanism:
        return cls[name.replace("-", "_")]


MECHANISMS = {m.sasl_name: m for m in ScramMechanism}


class ScramError(Exception):
    """The exchange failed; the message is what Kafka logs (never sent to a client
    beyond Kafka's wording)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What is stored for one user and mechanism (Kafka's ScramCredential)."""

    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mech: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mech.hash_name).digest()


def _h(mech: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mech.hash_name, data).digest()


def salted_password(mech: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (SASLprep is the identity for
    the ASCII passwords Kafka's tools generate; Kafka does not normalise either)."""
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode(), salt, iterations)


def credential_from_salted(
    mech: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    client_key = _hmac(mech, salted, b"Client Key")
    return ScramCredential(
        mechanism=mech,
        salt=salt,
        stored_key=_h(mech, client_key),
        server_key=_hmac(mech, salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mech: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS, salt: bytes = b""
) -> ScramCredential:
    salt = salt or os.urandom(32)
    return credential_from_salted(
        mech, salted_password(mech, password, salt, iterations), salt, iterations
    )


def verify_password(cred: ScramCredential, password: str) -> bool:
    """Whether ``password`` matches ``cred`` (PLAIN checks passwords this way)."""
    salted = salted_password(cred.mechanism, password, cred.salt, cred.iterations)
    stored = _h(cred.mechanism, _hmac(cred.mechanism, salted, b"Client Key"))
    return hmac.compare_digest(stored, cred.stored_key)


def client_proof(
    mech: ScramMechanism, salted: bytes, auth_message: bytes
) -> bytes:  # the client side, for tests and the benchmark
    client_key = _hmac(mech, salted, b"Client Key")
    signature = _hmac(mech, _h(mech, client_key), auth_message)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or part[0] in out:
            raise ScramError(f"Invalid SCRAM message: {message!r}")
        out[part[0]] = part[2:]
    return out


def _unescape_username(name: str) -> str:
    # RFC 5802 5.1: "=2C" is ",", "=3D" is "="; any other "=" is invalid.
    out = name.replace("=2C", ",").replace("=3D", "=")
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username encoding")
    return out


class ScramServer:
    """One server-side SCRAM exchange (Kafka's ScramSaslServer states)."""

    RECEIVE_CLIENT_FIRST, RECEIVE_CLIENT_FINAL, COMPLETE, FAILED = range(4)

    def __init__(
        self, mech: ScramMechanism, fake_secret: bytes, server_nonce: str | None = None
    ) -> None:
        """``server_nonce``: fixed server part of the nonce (RFC test vectors only)."""
        self.mech = mech
        self._server_nonce = server_nonce
        self.state = self.RECEIVE_CLIENT_FIRST
        self.username = ""
        self._fake_secret = fake_secret
        self._cred: ScramCredential | None = None
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    @property
    def complete(self) -> bool:
        return self.state == self.COMPLETE

    def client_first(
        self, message: bytes, lookup: dict[str, ScramCredential] | None
    ) -> tuple[str, bytes]:
        """Parse client-first; ``lookup`` maps usernames to this mechanism's
        credentials. Returns (username, server-first)."""
        if self.state != self.RECEIVE_CLIENT_FIRST:
            self.state = self.FAILED
            raise ScramError("Unexpected client-first message")
        self.state = self.FAILED
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        gs2, sep, bare = text.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            # "p=..." asks for channel binding, which Kafka does not support either.
            raise ScramError("Invalid SCRAM client first message (or channel binding requested)")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("Invalid SCRAM client first message")
        username = _unescape_username(attrs["n"])
        if authzid and _unescape_username(authzid.removeprefix("a=")) != username:
            raise ScramError("Authorization id does not match the username")
        if any(c not in _PRINTABLE for c in attrs["r"]):
            raise ScramError("Invalid client nonce")
        cred = (lookup or {}).get(username)
        if cred is None:
            # Unknown user: a stable fake salt so probing reveals nothing; the proof fails.
            fake = _hmac(self.mech, self._fake_secret, username.encode())
            salt, iterations = fake, MIN_ITERATIONS
        else:
            salt, iterations = cred.salt, cred.iterations
        self.username = username
        self._cred = cred
        # Alphanumeric like Kafka's ScramFormatter.secureRandomString: some clients
        # (librdkafka) look attributes up by substring.
        self._nonce = attrs["r"] + (
            self._server_nonce or "".join(_NONCE_CHARS[b % 62] for b in os.urandom(32))
        )
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        self.state = self.RECEIVE_CLIENT_FINAL
        return username, self._server_first.encode()

    def client_final(self, message: bytes) -> bytes:
        """Check the proof; returns server-final (``v=...``)."""
        if self.state != self.RECEIVE_CLIENT_FINAL:
            self.state = self.FAILED
            raise ScramError("Unexpected client-final message")
        self.state = self.FAILED
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message: no proof")
        attrs = _attributes(without_proof)
        # Kafka's ScramSaslServer accepts a nonce that ends with ours (librdkafka before
        # 2.1 sends the client nonce twice), and so do we; the proof covers it anyway.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(attrs.get("c", ""), validate=True)
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("Invalid base64 in SCRAM client final message") from None
        if channel not in (b"n,,", b"y,,"):
            raise ScramError("Invalid channel binding in SCRAM client final message")
        cred = self._cred
        if cred is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.mech, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(_h(self.mech, client_key), cred.stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        server_signature = _hmac(self.mech, cred.server_key, auth_message)
        self.state = self.COMPLETE
        return b"v=" + base64.b64encode(server_signature)


# RFC 5802 "printable": %x21-2B / %x2D-7E (no comma).
_PRINTABLE = frozenset(chr(c) for c in range(0x21, 0x7F) if c != 0x2C)
_NONCE_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
