"""Client quotas on ``odradek up --security sasl_ssl`` with real clients.

The super user sets a ``producer_byte_rate`` for SCRAM user ``bob`` (``odradek quotas
--command-config DATA/client.properties``, then the Java AdminClient's
alterClientQuotas/describeClientQuotas); bob's confluent-kafka producer is throttled
(librdkafka's throttle callback) while the super user's is not: the quota follows the
SASL principal. Bob, with no cluster ACL, gets CLUSTER_AUTHORIZATION_FAILED from both
quota APIs, as Kafka answers.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_clients import ClientError, JavaClient
from compat_security import add_scram_user, java_settings, librdkafka_settings
from compat_up import UpCluster, start_up, stop_up
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

BOB_PASSWORD = "bob-secret"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("quotas") / "data",
        ["--security", "sasl_ssl", "--no-console", "--set", "quota.window.num=3"],
    )
    yield cluster
    stop_up(cluster)


def _conf(up: UpCluster, user: str, password: str, mechanism: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": up.bootstrap,
        **librdkafka_settings(up.data_dir, mechanism, user, password),
    }


@pytest.fixture(scope="module")
def topic(secure: UpCluster) -> str:
    """A topic bob may write to (bob exists, with an ACL for it)."""
    admin = AdminClient(_conf(secure, "admin", secure.admin_password, "SCRAM-SHA-512"))
    add_scram_user(admin, "bob", BOB_PASSWORD)
    name = f"quota-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    acl = AclBinding(
        ResourceType.TOPIC,
        name,
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for f in admin.create_acls([acl]).values():
        f.result(30)
    return name


def _quotas(up: UpCluster, properties: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "quotas",
            "--bootstrap-server",
            up.bootstrap,
            "--command-config",
            str(properties),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _throttles(conf: dict[str, Any], topic: str, client_id: str) -> list[float]:
    """Throttle times librdkafka reported for 20 kB produced in one go."""
    seen: list[float] = []
    producer = Producer(
        {**conf, "client.id": client_id, "throttle_cb": lambda e: seen.append(e.throttle_time)}
    )
    errors: list[Any] = []
    for _ in range(20):
        producer.produce(topic, b"q" * 1000, on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(60) == 0
    assert errors == [None] * 20
    for _ in range(10):  # throttle events arrive with the responses
        producer.poll(0.1)
    return seen


def test_quota_follows_the_sasl_principal(secure: UpCluster, topic: str) -> None:
    admin_props = secure.data_dir / "client.properties"
    done = _quotas(
        secure, admin_props, "--alter", "--add-config", "producer_byte_rate=1000", "--user", "bob"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Completed updating config for user-principal 'bob'."
    described = _quotas(secure, admin_props, "--describe", "--entity-type", "users")
    assert "Quota configs for user-principal 'bob' are producer_byte_rate=1000.0" in (
        described.stdout
    ), described.stderr
    bob = _conf(secure, "bob", BOB_PASSWORD, "SCRAM-SHA-256")
    admin = _conf(secure, "admin", secure.admin_password, "SCRAM-SHA-512")
    # Same client id: only the principal differs.
    assert max(_throttles(bob, topic, "same-app"), default=0) > 0
    assert max(_throttles(admin, topic, "same-app"), default=0) == 0
    removed = _quotas(
        secure, admin_props, "--alter", "--delete-config", "producer_byte_rate", "--user", "bob"
    )
    assert removed.returncode == 0, removed.stderr


def test_quota_apis_need_cluster_rights(
    secure: UpCluster, topic: str, tmp_path: Path, java_classpath: str
) -> None:
    bob_props = tmp_path / "bob.properties"
    bob_props.write_text(
        "".join(
            f"{k}={v}\n"
            for k, v in java_settings(secure.data_dir, "SCRAM-SHA-256", "bob", BOB_PASSWORD).items()
        )
    )
    refused = _quotas(secure, bob_props, "--describe")
    assert refused.returncode == 1 and "Cluster authorization failed" in refused.stderr
    refused = _quotas(
        secure, bob_props, "--alter", "--add-config", "producer_byte_rate=1", "--user", "bob"
    )
    assert refused.returncode == 1 and "Cluster authorization failed" in refused.stderr
    # The Java AdminClient, as the super user and as bob.
    java = JavaClient(secure.bootstrap, java_classpath)
    admin = {
        f"admin.{k}": v
        for k, v in java_settings(
            secure.data_dir, "SCRAM-SHA-512", "admin", secure.admin_password
        ).items()
    }
    java.run(
        "alter-client-quota",
        {**admin, "user": "bob", "client": "<default>", "key": "consumer_byte_rate", "value": 4096},
    )
    rows = java.run("describe-client-quotas", {**admin, "user": "bob", "strict": "1"})
    assert rows == [], rows  # strict: bob alone has no quota left
    rows = java.run("describe-client-quotas", {**admin, "user": "bob"})
    assert ["QUOTA", "bob", "<default>", "consumer_byte_rate", "4096.0"] in rows
    with pytest.raises(ClientError) as bad:
        java.run(
            "alter-client-quota",
            {**admin, "user": "bob", "key": "producer_byte_rate", "value": -1},
        )
    assert "InvalidRequestException" in str(bad.value)
    java.run(
        "alter-client-quota",
        {**admin, "user": "bob", "client": "<default>", "key": "consumer_byte_rate"},
    )
    assert java.run("describe-client-quotas", {**admin, "user": "bob"}) == []
    bob = {
        f"admin.{k}": v
        for k, v in java_settings(secure.data_dir, "SCRAM-SHA-256", "bob", BOB_PASSWORD).items()
    }
    with pytest.raises(ClientError) as denied:
        java.run("describe-client-quotas", bob)
    assert "ClusterAuthorizationException" in str(denied.value)
