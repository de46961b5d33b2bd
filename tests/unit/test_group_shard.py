"""The group -> shard formula against Java's String.hashCode and Kafka's Utils.abs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.group_shard import (
    coordinator_of,
    group_shard,
    java_string_hash,
    kafka_abs,
    num_shards,
    offset_store_of,
    shard_of,
)
from odradek.rpc.v1 import common_pb2


def reference_hash(s: str) -> int:
    """Java's definition, spelled out: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code
    units, reduced to a signed 32-bit int."""
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:  # a surrogate pair
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    total = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ("", 0),
        ("test", 3556498),
        ("group", 98629247),
        ("hello", 99162322),
        ("é", 233),  # U+00E9: one code unit
        ("日本", 26085 * 31 + 26412),  # U+65E5 U+672C
        # U+1F600 is the surrogate pair D83D DE00: hashed as two units.
        ("😀", 0xD83D * 31 + 0xDE00),
        ("polygenelubricants", -(2**31)),  # the famous Integer.MIN_VALUE string
    ],
)
def test_java_string_hash_known_values(group: str, expected: int) -> None:
    assert java_string_hash(group) == expected
    assert reference_hash(group) == expected


@given(st.text(max_size=60))
def test_java_string_hash_matches_reference(s: str) -> None:
    assert java_string_hash(s) == reference_hash(s)


def test_overflowing_ascii_and_non_ascii_group_ids() -> None:
    # Long ids overflow 32 bits many times over; the signed wrap must match Java's.
    for group in ("console-consumer-58313", "payments.settlement.v2-consumers", "über-gruppe-ß"):
        h = reference_hash(group)
        assert java_string_hash(group) == h
        assert group_shard(group) == abs(h) % 50


def test_utils_abs_maps_int_min_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7
    # Kafka: Utils.abs(MIN_VALUE) % 50 == 0, where Math.abs(MIN_VALUE % 50) would be 48.
    assert group_shard("polygenelubricants") == 0
    assert group_shard("polygenelubricants", 7) == 0
    assert abs(-(2**31) % -50) == 48  # what the other formula would give (Java's % keeps the sign)


def test_shard_examples() -> None:
    assert group_shard("test") == 3556498 % 50
    assert group_shard("😀", 3) == (0xD83D * 31 + 0xDE00) % 3
    with pytest.raises(ValueError):
        group_shard("x", 0)


def _metadata(
    coordinators: list[tuple[int, int, int]], stores: list[int]
) -> common_pb2.ClusterMetadata:
    md = common_pb2.ClusterMetadata(version=1)
    for shard, owner, epoch in coordinators:
        md.coordinator_shards.add(shard=shard, coordinator_id=owner, epoch=epoch)
    for node_id in stores:
        md.nodes.add(node_id=node_id, kind=common_pb2.OFFSET_STORE, state=common_pb2.ONLINE)
    md.nodes.add(node_id=999, kind=common_pb2.OFFSET_STORE, state=common_pb2.OFFLINE)
    return md


def test_ownership_lookups() -> None:
    md = _metadata([(0, 200, 1), (1, 201, 3), (2, -1, 2)], [301, 300])
    assert num_shards(md) == 3
    assert shard_of(md, "test") == 3556498 % 3
    assert coordinator_of(md, 1) == (201, 3)
    assert coordinator_of(md, 2) == (-1, 2)
    assert coordinator_of(md, 9) == (-1, 0)
    # Offset stores: online ones by node id, shard % n.
    node = offset_store_of(md, 0)
    assert node is not None and node.node_id == 300
    node = offset_store_of(md, 1)
    assert node is not None and node.node_id == 301
    assert offset_store_of(_metadata([], []), 0) is None
    empty = common_pb2.ClusterMetadata()
    assert num_shards(empty) == 50
    empty.cluster_configs["offsets.topic.num.partitions"] = "7"
    assert num_shards(empty) == 7
