"""__consumer_offsets key/value codecs against hand-assembled golden bytes."""

from __future__ import annotations

import pytest

from odradek.consumer_offsets.records import (
    CoordinatorRecordError,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    OtherKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("\n", ""))


def test_offset_commit_key_v1_golden() -> None:
    raw = encode_offset_key("g1", "orders", 3)
    assert raw == h("0001 0002 6731 0006 6f7264657273 00000003")
    assert decode_key(raw) == OffsetKey("g1", "orders", 3)
    # Version 0 keys (written by old brokers) have the same layout.
    assert decode_key(h("0000 0002 6731 0006 6f7264657273 00000003")) == OffsetKey(
        "g1", "orders", 3
    )


def test_group_metadata_key_v2_golden() -> None:
    raw = encode_group_key("g1")
    assert raw == h("0002 0002 6731")
    assert decode_key(raw) == GroupKey("g1")


def test_other_record_types_are_recognised_not_parsed() -> None:
    assert decode_key(h("0003 0002 6731")) == OtherKey(3)
    with pytest.raises(CoordinatorRecordError):
        decode_key(h("ffff 0001 67"))
    with pytest.raises(CoordinatorRecordError):
        decode_key(h("0001 0002 6731"))  # truncated
    with pytest.raises(CoordinatorRecordError):
        decode_key(h("0002 0002 6731 00"))  # trailing byte


def test_offset_commit_value_v3_golden_from_the_seed_example() -> None:
    # [consumer-group01,nginx_access_log,2]::OffsetAndMetadata(offset=17104625,
    #   leaderEpoch=Optional.[0], metadata=, commitTimestamp=1573475863555, ...)
    value = OffsetValue(
        offset=17104625, metadata="", commit_timestamp=1573475863555, leader_epoch=0
    )
    raw = encode_offset_value(value)
    assert raw == h("0003 000000000104fef1 00000000 0000 0000016e5a784c03")
    assert decode_offset_value(raw) == value
    key = encode_offset_key("consumer-group01", "nginx_access_log", 2)
    assert decode_key(key) == OffsetKey("consumer-group01", "nginx_access_log", 2)


def test_offset_commit_value_with_metadata_and_epoch() -> None:
    value = OffsetValue(offset=5, metadata="m", commit_timestamp=1000, leader_epoch=2)
    raw = encode_offset_value(value)
    assert raw == h("0003 0000000000000005 00000002 0001 6d 00000000000003e8")
    assert decode_offset_value(raw) == value


def test_offset_commit_value_v1_carries_expire_timestamp() -> None:
    value = OffsetValue(offset=7, metadata="", commit_timestamp=10, expire_timestamp=20)
    raw = encode_offset_value(value)
    assert raw == h("0001 0000000000000007 0000 000000000000000a 0000000000000014")
    assert decode_offset_value(raw) == value


def test_old_offset_value_versions_decode() -> None:
    v0 = h("0000 0000000000000009 0002 6869 0000000000000064")
    assert decode_offset_value(v0) == OffsetValue(9, "hi", 100, -1, -1)
    v2 = h("0002 0000000000000009 0000 0000000000000064")
    assert decode_offset_value(v2) == OffsetValue(9, "", 100, -1, -1)


def test_offset_value_v4_flexible_with_a_tagged_field() -> None:
    # offset 9, epoch 1, metadata "ab" (compact: length+1 = 3), ts 100, then one tagged
    # field (tag 0, 16 bytes: a topic id) that we skip.
    raw = h("0004 0000000000000009 00000001 03 6162 0000000000000064 01 00 10") + bytes(16)
    assert decode_offset_value(raw) == OffsetValue(9, "ab", 100, 1, -1)
    assert decode_offset_value(encode_offset_value(OffsetValue(9, "ab", 100, 1), 4)) == (
        OffsetValue(9, "ab", 100, 1, -1)
    )
    with pytest.raises(CoordinatorRecordError):
        decode_offset_value(raw[:-3])


def _group() -> GroupValue:
    return GroupValue(
        protocol_type="consumer",
        generation=1,
        protocol="range",
        leader="m1",
        current_state_timestamp=1000,
        members=[
            MemberValue(
                member_id="m1",
                client_id="c",
                client_host="/h",
                rebalance_timeout=300000,
                session_timeout=10000,
                subscription=b"\x00\x01",
                assignment=b"",
                group_instance_id=None,
            )
        ],
    )


def test_group_metadata_value_v3_golden() -> None:
    raw = encode_group_value(_group())
    expected = h(
        "0003"
        "0008 636f6e73756d6572"  # protocol_type "consumer"
        "00000001"  # generation
        "0005 72616e6765"  # protocol "range"
        "0002 6d31"  # leader "m1"
        "00000000000003e8"  # current_state_timestamp
        "00000001"  # one member
        "0002 6d31"  # member_id
        "ffff"  # group_instance_id null
        "0001 63"  # client_id "c"
        "0002 2f68"  # client_host "/h"
        "000493e0"  # rebalance_timeout 300000
        "00002710"  # session_timeout 10000
        "00000002 0001"  # subscription
        "00000000"  # assignment (empty)
    )
    assert raw == expected
    assert decode_group_value(raw) == _group()


def test_group_metadata_value_static_member_and_empty_group() -> None:
    g = _group()
    g.members[0].group_instance_id = "instance-1"
    assert decode_group_value(encode_group_value(g)) == g
    empty = GroupValue("consumer", 4, None, None, 55, [])
    raw = encode_group_value(empty)
    assert raw == h("0003 0008 636f6e73756d6572 00000004 ffff ffff 0000000000000037 00000000")
    assert decode_group_value(raw) == empty


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_every_version_round_trips(version: int) -> None:
    g = _group()
    got = decode_group_value(encode_group_value(g, version))
    assert got.members[0].member_id == "m1"
    assert got.members[0].subscription == b"\x00\x01"
    assert got.generation == 1 and got.protocol == "range" and got.leader == "m1"
    assert got.current_state_timestamp == (1000 if version >= 2 else -1)
    assert got.members[0].rebalance_timeout == (300000 if version >= 1 else -1)


def test_group_value_v0_golden() -> None:
    raw = h(
        "0000 0008 636f6e73756d6572 00000002 ffff ffff 00000001"
        "0002 6d31 0001 63 0002 2f68 00002710 00000000 00000000"
    )
    g = decode_group_value(raw)
    assert g.generation == 2 and g.protocol is None and g.leader is None
    assert g.members == [MemberValue("m1", "c", "/h", -1, 10000, b"", b"", None)]
    assert encode_group_value(g, 0) == raw
