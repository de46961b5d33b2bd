"""The controller's SCRAM credentials and ACLs: Kafka's errors, persistence round trip."""

from __future__ import annotations

from odradek.acl import AclBinding, AclFilter, AclOperation, AclPermissionType, PatternType
from odradek.acl import ResourceType as R
from odradek.controller.model import ClusterModel
from odradek.controller.snapshot import build_metadata
from odradek.protocol.errors import ErrorCode
from odradek.sasl.scram import ScramMechanism, credential_from_password

S256, S512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
ALICE = AclBinding(
    R.TOPIC,
    "orders",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)


def test_scram_upsert_delete_and_errors() -> None:
    model = ClusterModel()
    sec = model.security
    results = sec.alter_scram([("alice", credential_from_password(S256, "pw"))], [])
    assert [(r.user, r.error_code) for r in results] == [("alice", 0)]
    results = sec.alter_scram(
        [
            ("bob", credential_from_password(S256, "pw", iterations=4096)),
            ("bob", credential_from_password(S256, "pw2")),
            ("carol", credential_from_password(S512, "pw", iterations=20000)),
        ],
        [("alice", 2), ("dave", 1)],
    )
    codes = {r.user: r.error_code for r in results}
    assert codes == {
        "bob": ErrorCode.DUPLICATE_RESOURCE,
        "carol": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "alice": ErrorCode.RESOURCE_NOT_FOUND,
        "dave": ErrorCode.RESOURCE_NOT_FOUND,
    }
    assert set(sec.scram) == {"alice"}
    assert sec.alter_scram([], [("alice", 1)])[0].error_code == 0
    assert sec.scram == {}


def test_persisted_records_reload_and_publish() -> None:
    model = ClusterModel()
    model.security.alter_scram([("alice", credential_from_password(S512, "pw"))], [])
    model.security.create_acls([ALICE])
    changes = model.take_changes()
    assert {"scram/alice", "acls"} <= set(changes)
    again = ClusterModel()
    again.load({k: v for k, v in changes.items() if v is not None})
    assert again.security.scram == model.security.scram
    assert again.security.acls == [ALICE]
    md = build_metadata(again, 1, 1)
    assert [(c.user, c.mechanism) for c in md.scram_credentials] == [("alice", 2)]
    assert md.acls[0].principal == "User:alice"


def test_acl_create_is_idempotent_and_delete_by_filter() -> None:
    sec = ClusterModel().security
    bad = AclBinding(
        R.ANY, "x", PatternType.LITERAL, "User:a", "*", AclOperation.READ, AclPermissionType.ALLOW
    )
    assert [c for c, _ in sec.create_acls([ALICE, ALICE, bad])] == [0, 0, ErrorCode.INVALID_REQUEST]
    assert sec.acls == [ALICE]
    (gone,) = sec.delete_acls([AclFilter(principal="User:alice")])
    assert gone.deleted == (ALICE,) and sec.acls == []
    (none,) = sec.delete_acls([AclFilter(principal="User:alice")])
    assert none.deleted == () and none.error_code == 0
