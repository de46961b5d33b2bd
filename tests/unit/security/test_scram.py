"""SCRAM server against RFC 7677's SCRAM-SHA-256 example, plus the failure paths."""

from __future__ import annotations

import base64

import pytest

from odradek.sasl.plain import PlainError, parse_plain
from odradek.sasl.scram import (
    ScramError,
    ScramMechanism,
    ScramServer,
    client_proof,
    credential_from_password,
    credential_from_salted,
    salted_password,
    verify_password,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential() -> dict[str, object]:
    return {"user": credential_from_password(SHA256, "pencil", 4096, SALT)}


def test_rfc7677_example() -> None:
    server = ScramServer(SHA256, b"secret", server_nonce=SERVER_NONCE)
    user, first = server.client_first(CLIENT_FIRST, _rfc_credential())  # type: ignore[arg-type]
    assert user == "user"
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert server.client_final(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete


def test_wrong_proof_fails() -> None:
    creds = {"user": credential_from_password(SHA256, "other", 4096, SALT)}
    server = ScramServer(SHA256, b"secret", server_nonce=SERVER_NONCE)
    server.client_first(CLIENT_FIRST, creds)
    with pytest.raises(ScramError):
        server.client_final(CLIENT_FINAL)
    assert not server.complete


def test_unknown_user_gets_a_stable_fake_salt_then_fails() -> None:
    a = ScramServer(SHA256, b"secret")
    b = ScramServer(SHA256, b"secret")
    _, first_a = a.client_first(b"n,,n=ghost,r=abc", {})
    _, first_b = b.client_first(b"n,,n=ghost,r=abc", {})
    salt_a = first_a.split(b",")[1]
    assert salt_a == first_b.split(b",")[1] and b"i=4096" in first_a
    nonce = first_a.split(b",")[0][2:].decode()
    with pytest.raises(ScramError):
        a.client_final(f"c=biws,r={nonce},p=AAAA".encode())


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\xff\xfe",
        b"p=tls-unique,,n=user,r=abc",  # channel binding requested
        b"n,,r=abc",  # no user
        b"n,,n=user",  # no nonce
        b"n,a=other,n=user,r=abc",  # authzid differs from the user
        b"n,,n=us=er,r=abc",  # bad username escape
        b"n,,n=user,r=a,b",
    ],
)
def test_bad_client_first(message: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer(SHA256, b"s").client_first(message, _rfc_credential())  # type: ignore[arg-type]


def test_replayed_and_out_of_order_messages() -> None:
    server = ScramServer(SHA256, b"s")
    with pytest.raises(ScramError):
        server.client_final(CLIENT_FINAL)  # final before first
    server = ScramServer(SHA256, b"s")  # a fresh server nonce: the recorded final is stale
    server.client_first(CLIENT_FIRST, _rfc_credential())  # type: ignore[arg-type]
    with pytest.raises(ScramError):
        server.client_final(CLIENT_FINAL)
    with pytest.raises(ScramError):
        server.client_final(CLIENT_FINAL)  # no second try on a failed exchange


def test_nonce_that_repeats_the_client_nonce_is_accepted_like_kafka() -> None:
    """librdkafka < 2.1 sends client nonce + full nonce; Kafka checks endsWith."""
    mech = ScramMechanism.SCRAM_SHA_512
    cred = credential_from_password(mech, "pw", 4096)
    server = ScramServer(mech, b"s")
    _, first = server.client_first(b"n,,n=u,r=cn", {"u": cred})
    nonce = first.split(b",")[0][2:].decode()
    without = f"c=biws,r=cn{nonce}"
    auth = f"n=u,r=cn,{first.decode()},{without}".encode()
    proof = client_proof(mech, salted_password(mech, "pw", cred.salt, 4096), auth)
    final = f"{without},p={base64.b64encode(proof).decode()}".encode()
    assert server.client_final(final).startswith(b"v=")


def test_salted_credential_matches_password_credential() -> None:
    mech = ScramMechanism.SCRAM_SHA_512
    cred = credential_from_password(mech, "pw", 8192, b"salt")
    again = credential_from_salted(mech, salted_password(mech, "pw", b"salt", 8192), b"salt", 8192)
    assert cred == again
    assert verify_password(cred, "pw") and not verify_password(cred, "pW")


def test_plain() -> None:
    assert parse_plain(b"\0alice\0secret") == ("alice", "secret")
    assert parse_plain(b"alice\0alice\0secret") == ("alice", "secret")
    for bad in (b"alice\0secret", b"\0\0secret", b"\0alice\0", b"bob\0alice\0pw", b"\xff"):
        with pytest.raises(PlainError):
            parse_plain(bad)
