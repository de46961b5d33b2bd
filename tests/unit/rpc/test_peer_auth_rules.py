"""Who may call what between services (odradek.rpc.peer_auth) and member certificates
(odradek.internal_tls): the rules and identities without a network; the services
enforce them in tests/integration/test_internal_mtls.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from odradek.config import ConfigError
from odradek.internal_tls import (
    InternalTls,
    Member,
    issue_member,
    member_of_certificate,
    parse_member,
    settings_for,
)
from odradek.rpc.peer_auth import Refused, authorize, rule_for
from odradek.rpc.v1 import common_pb2, controller_pb2, storage_pb2

REGISTER = "/odradek.v1.Controller/RegisterNode"
FETCH = "/odradek.v1.Storage/Fetch"


def _check(method: str, member: Member | None, request: object = None) -> grpc.StatusCode | None:
    try:
        authorize(method, rule_for(method), member, request)
    except Refused as exc:
        return exc.code
    return None


def test_member_uris() -> None:
    assert parse_member("odradek://storage/100") == Member("storage", 100)
    assert parse_member("odradek://intruder/1") is None
    assert parse_member("spiffe://storage/1") is None
    assert parse_member("odradek://storage/x") is None
    assert parse_member("odradek://gateway/*") == Member("gateway", None)
    assert parse_member("odradek://storage/*") is None  # storage certificates name the id


def test_kind_wide_certificate_registers_only_its_kind() -> None:
    gateways = Member("gateway", None)
    own_kind = controller_pb2.RegisterNodeRequest(
        node=common_pb2.Node(node_id=10_000_123, kind=common_pb2.GATEWAY)
    )
    other_kind = controller_pb2.RegisterNodeRequest(
        node=common_pb2.Node(node_id=100, kind=common_pb2.STORAGE)
    )
    assert _check(REGISTER, gateways, own_kind) is None
    assert _check(REGISTER, gateways, other_kind) == grpc.StatusCode.PERMISSION_DENIED
    # Heartbeat carries only an id: the controller's registered nodes tell its kind.
    kinds = {100: common_pb2.STORAGE, 10_000_123: common_pb2.GATEWAY}.get
    heartbeat = "/odradek.v1.Controller/Heartbeat"
    rule = rule_for(heartbeat)
    authorize(heartbeat, rule, gateways, controller_pb2.HeartbeatRequest(node_id=10_000_123), kinds)
    with pytest.raises(Refused, match="STORAGE"):
        authorize(heartbeat, rule, gateways, controller_pb2.HeartbeatRequest(node_id=100), kinds)


def test_issued_member_certificate_names_its_holder(tmp_path: Path) -> None:
    cert = issue_member(tmp_path, "gateway", 3)
    assert member_of_certificate(cert.cert.read_bytes()) == Member("gateway", 3)
    tls = InternalTls.from_settings(settings_for(tmp_path, cert).get)
    assert tls is not None and tls.member == Member("gateway", 3)


def test_settings_all_or_none(tmp_path: Path) -> None:
    assert InternalTls.from_settings({}.get) is None
    with pytest.raises(ConfigError, match="missing"):
        InternalTls.from_settings({"internal.tls.ca": str(tmp_path / "ca.crt")}.get)


def test_register_node_only_as_oneself() -> None:
    own = controller_pb2.RegisterNodeRequest(
        node=common_pb2.Node(node_id=100, kind=common_pb2.STORAGE)
    )
    assert _check(REGISTER, Member("storage", 100), own) is None
    assert _check(REGISTER, Member("storage", 101), own) == grpc.StatusCode.PERMISSION_DENIED
    assert _check(REGISTER, Member("gateway", 100), own) == grpc.StatusCode.PERMISSION_DENIED
    assert _check(REGISTER, Member("admin", 0), own) == grpc.StatusCode.PERMISSION_DENIED
    assert _check(REGISTER, None, own) == grpc.StatusCode.UNAUTHENTICATED


def test_follower_fetch_only_as_that_replica() -> None:
    follower = storage_pb2.FetchRequest(replica_id=101)
    consumer = storage_pb2.FetchRequest(replica_id=-1)
    assert _check(FETCH, Member("storage", 101), follower) is None
    assert _check(FETCH, Member("storage", 102), follower) == grpc.StatusCode.PERMISSION_DENIED
    assert _check(FETCH, Member("gateway", 101), follower) == grpc.StatusCode.PERMISSION_DENIED
    assert _check(FETCH, Member("gateway", 0), consumer) is None
    assert _check(FETCH, Member("storage", 101), consumer) == grpc.StatusCode.PERMISSION_DENIED


def test_admin_calls_and_unlisted_methods() -> None:
    delete = "/odradek.v1.Controller/DeleteTopics"
    assert _check(delete, Member("gateway", 0)) is None
    assert _check(delete, Member("storage", 100)) == grpc.StatusCode.PERMISSION_DENIED
    assert _check(delete, Member("console", 0)) == grpc.StatusCode.PERMISSION_DENIED
    # A controller or storage method nobody listed is closed; other services are open.
    assert _check("/odradek.v1.Storage/NewThing", Member("gateway", 0)) is not None
    assert _check("/odradek.v1.OffsetStore/FetchOffsets", Member("console", 0)) is None
    assert _check("/grpc.health.v1.Health/Check", Member("storage", 100)) is None


def test_every_controller_and_storage_method_has_a_rule() -> None:
    from odradek.rpc.peer_auth import RULES
    from odradek.rpc.v1 import controller_pb2 as c
    from odradek.rpc.v1 import storage_pb2 as s

    for module, service in ((c, "Controller"), (s, "Storage")):
        methods = module.DESCRIPTOR.services_by_name[service].methods_by_name
        for name in methods:
            assert f"/odradek.v1.{service}/{name}" in RULES, name


def test_certs_tool_writes_member_certificates(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "certs",
            "--dir",
            str(tmp_path),
            "member",
            "storage",
            "7",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"internal.tls.cert={tmp_path / 'storage-7.crt'}" in out
    cert = (tmp_path / "storage-7.crt").read_bytes()
    assert member_of_certificate(cert) == Member("storage", 7)
