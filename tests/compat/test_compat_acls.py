"""ACLs and SCRAM users through real clients on ``odradek up --security sasl_ssl``.

The super user (from DATA/librdkafka.conf) creates user ``alice`` with
AlterUserScramCredentials (confluent-kafka's AdminClient, as kafka-configs.sh does),
then grants and revokes ACLs with CreateAcls/DeleteAcls; alice, a real client too,
gets exactly Kafka's errors for what she may not do (allow.everyone.if.no.acl.found
is false), and what an ACL allows starts working.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_security import add_scram_user, librdkafka_settings
from compat_up import UpCluster, start_up, stop_up
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
)

ALICE_PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("acls") / "data", ["--security", "sasl_ssl", "--no-console"]
    )
    yield cluster
    stop_up(cluster)


def _admin_conf(up: UpCluster) -> dict[str, Any]:
    password = up.admin_password
    return {
        "bootstrap.servers": up.bootstrap,
        **librdkafka_settings(up.data_dir, "SCRAM-SHA-512", "admin", password),
    }


def _alice_conf(up: UpCluster, mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
    return {
        "bootstrap.servers": up.bootstrap,
        **librdkafka_settings(up.data_dir, mechanism, "alice", ALICE_PASSWORD),
    }


@pytest.fixture(scope="module")
def admin(secure: UpCluster) -> AdminClient:
    client = AdminClient(_admin_conf(secure))
    add_scram_user(client, "alice", ALICE_PASSWORD)
    return client


def _create(admin: AdminClient, topic: str) -> None:
    future = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
    future.result(30)


def _code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    return int(exc.args[0].code())


def _allow(admin: AdminClient, *bindings: AclBinding) -> None:
    for f in admin.create_acls(list(bindings)).values():
        f.result(30)


def _acl(
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    perm: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, "User:alice", "*", op, perm)


def _produce(conf: dict[str, Any], topic: str) -> KafkaError | None:
    errors: list[KafkaError] = []
    p = Producer({**conf, "message.timeout.ms": 8000, "enable.idempotence": False})
    p.produce(topic, b"v", partition=0, on_delivery=lambda err, _m: errors.append(err))
    p.flush(15)
    return errors[0] if errors else KafkaError(KafkaError._MSG_TIMED_OUT)


def test_describe_user_scram_credentials(admin: AdminClient) -> None:
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_256, 4096)]


def test_alice_sees_nothing_and_may_do_nothing_without_acls(
    secure: UpCluster, admin: AdminClient
) -> None:
    topic = f"acl-hidden-{uuid.uuid4().hex[:6]}"
    _create(admin, topic)
    alice = AdminClient(_alice_conf(secure))
    assert topic not in alice.list_topics(timeout=20).topics  # Metadata hides it
    err = _produce(_alice_conf(secure), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as exc:
        alice.delete_topics([topic])[topic].result(30)
    assert _code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as exc:
        next(iter(alice.create_topics([NewTopic("acl-x", 1, 1)]).values())).result(30)
    assert _code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, {"retention.ms": "1000"})
    with pytest.raises(KafkaException) as exc:
        alice.alter_configs([res])[res].result(30)
    assert _code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' error code (an empty list comes back), so the
    # cluster check shows through CreateAcls, whose per-ACL error it does report.
    (created,) = alice.create_acls([_acl(ResourceType.TOPIC, topic, AclOperation.ALL)]).values()
    with pytest.raises(KafkaException) as exc:
        created.result(30)
    assert _code(exc.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # DeleteRecords needs DELETE; with DESCRIBE alone the client finds the leader and
    # the broker refuses.
    _allow(admin, _acl(ResourceType.TOPIC, topic, AclOperation.DESCRIBE))
    with pytest.raises(KafkaException) as exc:
        next(iter(alice.delete_records([TopicPartition(topic, 0, 0)]).values())).result(30)
    assert _code(exc.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    (group_future,) = alice.delete_consumer_groups(["some-group"]).values()
    with pytest.raises(KafkaException) as exc:
        group_future.result(30)
    assert _code(exc.value) == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_prefixed_allow_then_deny_beats_allow(secure: UpCluster, admin: AdminClient) -> None:
    prefix = f"alice-{uuid.uuid4().hex[:6]}-"
    topic = prefix + "orders"
    group = prefix + "group"
    _create(admin, topic)
    _allow(
        admin,
        _acl(ResourceType.TOPIC, prefix, AclOperation.ALL, ResourcePatternType.PREFIXED),
        _acl(ResourceType.GROUP, group, AclOperation.READ),
    )
    conf = _alice_conf(secure, "PLAIN")
    assert _produce(conf, topic) is None
    assert topic in AdminClient(conf).list_topics(timeout=20).topics
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = None
    deadline = time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and not m.error():
            got = m.value()
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == b"v"
    # DENY beats ALLOW: READ on this topic is denied now, WRITE still allowed.
    _allow(
        admin,
        _acl(ResourceType.TOPIC, topic, AclOperation.READ, perm=AclPermissionType.DENY),
    )
    assert _produce(conf, topic) is None
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    error = None
    deadline = time.monotonic() + 30
    while error is None and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and m.error():
            error = m.error()
    consumer.close()
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_describe_and_delete_acls(admin: AdminClient) -> None:
    name = f"acl-desc-{uuid.uuid4().hex[:6]}"
    binding = _acl(ResourceType.TOPIC, name, AclOperation.WRITE)
    _allow(admin, binding)
    flt = AclBindingFilter(
        ResourceType.TOPIC,
        name,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(flt).result(30) == [binding]
    (deleted,) = admin.delete_acls([flt]).values()
    assert deleted.result(30) == [binding]
    assert admin.describe_acls(flt).result(30) == []


def test_users_without_credentials_cannot_authenticate(secure: UpCluster) -> None:
    conf = {**_alice_conf(secure), "sasl.username": "mallory"}
    client = AdminClient(conf)
    with pytest.raises(KafkaException):
        client.list_topics(timeout=8)


def test_ca_file_is_the_trust_anchor(secure: UpCluster) -> None:
    assert Path(_alice_conf(secure)["ssl.ca.location"]).read_text().startswith("-----BEGIN")


def _odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_users_and_acls_tools(secure: UpCluster) -> None:
    """``odradek users`` / ``odradek acls`` with ``--command-config DATA/client.properties``
    (the super user): a new user, an ACL for it, listing and removal; the new user's
    real client works exactly while the ACL exists."""
    common = [
        "--bootstrap-server",
        secure.bootstrap,
        "--command-config",
        str(secure.data_dir / "client.properties"),
    ]
    added = _odradek(
        "users",
        "add",
        *common,
        "--user",
        "carol",
        "--password",
        "carol-pw",
        "--mechanism",
        "SCRAM-SHA-512",
    )
    assert added.returncode == 0, added.stderr
    described = _odradek("users", "describe", *common, "--user", "carol")
    assert "SCRAM-SHA-512=[iterations=4096]" in described.stdout, described.stderr
    topic = f"carol-{uuid.uuid4().hex[:6]}"
    conf = {
        "bootstrap.servers": secure.bootstrap,
        **librdkafka_settings(secure.data_dir, "SCRAM-SHA-512", "carol", "carol-pw"),
    }
    _create(AdminClient(_admin_conf(secure)), topic)
    err = _produce(conf, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acl = _odradek(
        "acls",
        *common,
        "--add",
        "--allow-principal",
        "User:carol",
        "--operation",
        "Write",
        "--topic",
        "carol-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert acl.returncode == 0, acl.stderr
    listed = _odradek(
        "acls", *common, "--list", "--topic", "carol-", "--resource-pattern-type", "prefixed"
    )
    assert "principal=User:carol" in listed.stdout and "operation=WRITE" in listed.stdout
    assert _produce(conf, topic) is None
    removed = _odradek(
        "acls", *common, "--remove", "--topic", "carol-", "--resource-pattern-type", "prefixed"
    )
    assert "Removed 1 ACL(s)" in removed.stdout, removed.stdout + removed.stderr
    deleted = _odradek(
        "users", "delete", *common, "--user", "carol", "--mechanism", "SCRAM-SHA-512"
    )
    assert deleted.returncode == 0, deleted.stderr
    assert "carol" not in _odradek("users", "describe", *common).stdout
