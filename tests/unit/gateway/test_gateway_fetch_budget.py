"""A Fetch response's ``max_bytes`` over its partitions (KIP-74): the first partition
with records gets them whole, even past the limit, so a consumer never stalls on a batch
larger than ``fetch.max.bytes``; a later one only while what it brings still fits."""

from __future__ import annotations

from odradek.gateway.apis.fetch import _ResponseBudget


def test_first_partition_with_records_is_whole_past_the_limit() -> None:
    budget = _ResponseBudget(100)
    assert budget.take(b"") == b""  # empty partitions neither count nor come first
    assert budget.take(b"x" * 150) == b"x" * 150
    assert budget.take(b"y") == b""  # nothing left after the first


def test_later_partitions_only_while_they_fit() -> None:
    budget = _ResponseBudget(100)
    assert budget.take(b"a" * 60) == b"a" * 60
    assert budget.take(b"b" * 50) == b""  # 40 left: dropped whole, not cut
    assert budget.take(b"c" * 40) == b"c" * 40  # a smaller one behind it still fits
    assert budget.take(b"d") == b""
