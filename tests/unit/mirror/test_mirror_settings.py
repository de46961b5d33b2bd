"""MM2-style settings, replication policies, and MM2's checkpoint record format."""

from __future__ import annotations

import pytest

from odradek.config import ConfigError
from odradek.mirror.checkpoints import Checkpoint, decode_checkpoint, encode_checkpoint
from odradek.mirror.replication_policy import ReplicationPolicy
from odradek.mirror.settings import parse_settings

BASE = {
    "clusters": "east, west",
    "east.bootstrap.servers": "e:9092",
    "west.bootstrap.servers": "w:9092",
    "west.security.protocol": "SASL_SSL",
    "west.sasl.mechanism": "SCRAM-SHA-512",
    "west.sasl.username": "mirror",
    "west.sasl.password": "secret",
    "east->west.enabled": "true",
    "east->west.topics": "orders.*, payments",
    "topics.exclude": r".*\.tmp",
}


def test_flows_clusters_and_per_cluster_security() -> None:
    s = parse_settings(BASE)
    assert s.target == "west" and s.sources == ["east"] and s.group_id == "odradek-mirror-west"
    assert s.clusters["west"].security_protocol == "SASL_SSL"
    assert s.clusters["west"].sasl_mechanism == "SCRAM-SHA-512"
    assert s.clusters["east"].security_protocol == "PLAINTEXT"
    (flow,) = s.flows
    assert flow.selects_topic("orders-eu") and flow.selects_topic("payments")
    assert not flow.selects_topic("orders.tmp") and not flow.selects_topic("payments2")
    assert s.policy.kind == "alias"  # MM2's default policy


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"clusters": ""}, "clusters"),
        ({"east->west.enabled": "false"}, "no flow"),
        ({"east->north.enabled": "true"}, "north is not in clusters"),
        (
            {
                "clusters": "east, west, north",
                "north.bootstrap.servers": "n:1",
                "east->north.enabled": "true",
            },
            "one target",
        ),
        ({"east->west.topics": "("}, "invalid regex"),
        ({"replication.policy.class": "Fancy"}, "replication.policy.class"),
        ({"west.sasl.mechanism": "GSSAPI"}, "GSSAPI"),
        ({"exactly.once.support": "maybe"}, "exactly.once.support"),
    ],
)
def test_invalid_settings_name_what_is_wrong(change: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_settings({**BASE, **change})


def test_alias_policy_prefixes_and_never_sends_a_copy_back() -> None:
    policy = ReplicationPolicy.named("DefaultReplicationPolicy")
    assert policy.target_topic("east", "orders") == "east.orders"
    assert policy.should_mirror("orders", "east", "west")
    assert not policy.should_mirror("west.orders", "east", "west")  # came from the target
    assert policy.should_mirror("central.orders", "east", "west")  # multi-hop is fine
    assert not policy.should_mirror("__consumer_offsets", "east", "west")
    assert not policy.should_mirror("east.checkpoints.internal", "east", "west")


def test_identity_policy_keeps_names() -> None:
    policy = ReplicationPolicy.named("org.apache.kafka.connect.mirror.IdentityReplicationPolicy")
    assert policy.target_topic("east", "orders") == "orders"
    assert policy.should_mirror("west.orders", "east", "west")


def test_checkpoint_records_use_mm2s_layout() -> None:
    c = Checkpoint("billing", "east.payments", 3, 1200, 1187, "meta")
    key, value = encode_checkpoint(c)
    # Struct strings: int16 length + UTF-8; value: int16 version 0, two int64, a string.
    assert key == b"\x00\x07billing\x00\x0deast.payments\x00\x00\x00\x03"
    assert value[:2] == b"\x00\x00" and len(value) == 2 + 8 + 8 + 2 + 4
    assert decode_checkpoint(key, value) == c
