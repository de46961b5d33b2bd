"""The consumer embedded protocol (JoinGroup metadata, SyncGroup assignments)."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from odradek.protocol.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from odradek.protocol.exceptions import InvalidRequestError


def _s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version: int) -> None:
    payload = encode_subscription(
        ["b", "a"],
        user_data=b"\x01\x02",
        owned_partitions={"a": [2, 0]},
        generation_id=9,
        rack_id="r1",
        version=version,
    )
    assert payload[:2] == struct.pack(">h", version)
    sub = decode_subscription(payload)
    assert sub.topics == ["b", "a"]
    assert sub.user_data == b"\x01\x02"
    if version >= 1:
        assert [(tp.topic, tp.partitions) for tp in sub.owned_partitions] == [("a", [0, 2])]
    assert sub.generation_id == (9 if version >= 2 else -1)
    assert sub.rack_id == ("r1" if version >= 3 else None)
    # kafka-python's client reads it the same way
    assert ConsumerProtocolSubscription.decode(payload) == sub


def test_subscription_v0_bytes() -> None:
    expected = struct.pack(">hi", 0, 1) + _s("t") + struct.pack(">i", -1)
    assert encode_subscription(["t"], version=0) == expected


def test_assignment_bytes_and_round_trip() -> None:
    payload = encode_assignment({"t": [1, 0]}, user_data=None, version=0)
    expected = struct.pack(">hi", 0, 1) + _s("t") + struct.pack(">iii", 2, 0, 1)
    assert payload == expected + struct.pack(">i", -1)
    assignment = decode_assignment(payload)
    assert assignment.partitions() == [("t", 0), ("t", 1)]
    assert ConsumerProtocolAssignment.decode(payload) == assignment


def test_newer_versions_are_read_with_ours_and_trailing_bytes_ignored() -> None:
    v3 = encode_subscription(["t"], rack_id="r", version=3)
    future = struct.pack(">h", 7) + v3[2:] + b"fields from v7"
    sub = decode_subscription(future)
    assert sub.topics == ["t"] and sub.rack_id == "r"


def test_empty_assignment_is_empty() -> None:
    assert decode_assignment(b"").assigned_partitions == []


@pytest.mark.parametrize(
    "payload",
    [b"\x00", struct.pack(">h", -1) + b"\x00" * 8, struct.pack(">hi", 0, 5) + _s("t")],
)
def test_malformed_payloads(payload: bytes) -> None:
    with pytest.raises(InvalidRequestError):
        decode_subscription(payload)
