"""Kafka's authorizer rules (odradek.acl), one rule per test."""

from __future__ import annotations

import pytest

from odradek.acl import (
    AclBinding,
    AclError,
    AclFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerConfig,
    PatternType,
    ResourceType,
    authorize,
    authorized_operations,
)

T, G, C, X = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
STRICT = AuthorizerConfig(frozenset({"User:admin"}), allow_if_no_acl=False)


def acl(
    rtype: ResourceType = T,
    name: str = "orders",
    pattern: PatternType = LIT,
    principal: str = "User:alice",
    host: str = "*",
    op: AclOperation = Op.READ,
    perm: AclPermissionType = ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def ok(acls: list[AclBinding], op: AclOperation, name: str = "orders", **kw: object) -> bool:
    return authorize(
        acls,
        kw.get("config", STRICT),  # type: ignore[arg-type]
        str(kw.get("principal", "User:alice")),
        str(kw.get("host", "10.0.0.1")),
        op,
        kw.get("rtype", T),  # type: ignore[arg-type]
        name,
    )


def test_super_user_and_default_deny() -> None:
    assert ok([], Op.DELETE, principal="User:admin")
    assert not ok([], Op.READ)


def test_allow_everyone_if_no_acl_found_only_without_acls_on_the_resource() -> None:
    lax = AuthorizerConfig(allow_if_no_acl=True)
    assert ok([], Op.WRITE, config=lax)
    others = [acl(principal="User:bob")]
    assert not ok(others, Op.READ, config=lax)  # an ACL names the resource: no fallback
    assert ok(others, Op.READ, name="payments", config=lax)


def test_literal_wildcard_and_prefixed_patterns() -> None:
    assert ok([acl(name="*")], Op.READ, name="anything")
    assert ok([acl(name="ord", pattern=PRE)], Op.READ)
    assert not ok([acl(name="ord", pattern=PRE)], Op.READ, name="payments")
    assert not ok([acl(name="ord")], Op.READ)  # literal is not a prefix


def test_principal_and_host_matching() -> None:
    assert ok([acl(principal="User:*")], Op.READ)
    assert not ok([acl(principal="User:bob")], Op.READ)
    assert ok([acl(host="10.0.0.1")], Op.READ)
    assert not ok([acl(host="10.0.0.2")], Op.READ)


def test_deny_beats_allow() -> None:
    acls = [acl(name="ord", pattern=PRE, op=Op.ALL), acl(op=Op.READ, perm=DENY)]
    assert not ok(acls, Op.READ)
    assert ok(acls, Op.WRITE)
    assert not ok([acl(op=Op.ALL), acl(op=Op.ALL, perm=DENY, host="10.0.0.1")], Op.WRITE)


def test_implied_describe_only_from_allow() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert ok([acl(op=op)], Op.DESCRIBE)
    assert ok([acl(op=Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not ok([acl(op=Op.CREATE)], Op.DESCRIBE)
    # DENY READ does not deny DESCRIBE
    assert ok([acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY)], Op.DESCRIBE)


def test_resource_types_do_not_mix() -> None:
    assert not ok([acl(rtype=G)], Op.READ)
    assert ok([acl(rtype=G)], Op.READ, rtype=G)


def test_authorized_operations_bitfield() -> None:
    bits = authorized_operations([acl(op=Op.WRITE)], STRICT, "User:alice", "h", T, "orders")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    every = authorized_operations([], AuthorizerConfig(), "User:x", "h", G, "g")
    assert every == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.DELETE)


@pytest.mark.parametrize(
    "bad",
    [
        acl(rtype=ResourceType.ANY),
        acl(pattern=PatternType.MATCH),
        acl(op=Op.ANY),
        acl(perm=AclPermissionType.ANY),
        acl(name=""),
        acl(rtype=C, name="my-cluster"),
        acl(principal="alice"),
    ],
)
def test_invalid_acls(bad: AclBinding) -> None:
    with pytest.raises(AclError):
        bad.validate()


def test_filters() -> None:
    a = acl(name="ord", pattern=PRE)
    assert AclFilter().matches(a)
    assert AclFilter(resource_type=T, resource_name="ord").matches(a)
    assert not AclFilter(resource_name="orders").matches(a)
    assert AclFilter(resource_name="orders", pattern_type=PatternType.MATCH).matches(a)
    assert not AclFilter(pattern_type=LIT).matches(a)
    assert AclFilter(principal="User:alice", operation=Op.READ, permission=ALLOW).matches(a)
    assert not AclFilter(permission=DENY).matches(a)
    with pytest.raises(AclError):
        AclFilter(operation=Op.UNKNOWN).validate()


def test_cluster_and_transactional_ids() -> None:
    assert ok([acl(rtype=C, name="kafka-cluster", op=Op.ALTER)], Op.ALTER, "kafka-cluster", rtype=C)
    assert ok([acl(rtype=X, name="tx-", pattern=PRE, op=Op.WRITE)], Op.WRITE, "tx-1", rtype=X)
