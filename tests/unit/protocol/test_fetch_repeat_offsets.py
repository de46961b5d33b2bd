"""odradek.protocol.fetch_repeat: where a Fetch request's offsets lie, at every version
the gateway serves without down-conversion (4-16), and when a later body is the same
request with other offsets (issue 18: a consumer's repeated long polls)."""

from __future__ import annotations

import struct
import uuid

import pytest

from odradek.protocol.fetch_repeat import RepeatedFetch, offset_positions
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import FetchRequest, encode_request

FT = FetchRequest.FetchTopic
IDS = [uuid.UUID(int=7), uuid.UUID(int=8)]


def _body(version: int, offsets: list[list[int]], **changes: object) -> bytes:
    """A Fetch body (after the header) of two topics of two partitions each."""
    fields: dict[str, object] = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": [],
        "rack_id": "rack-a",
    }
    partition_max_bytes = changes.pop("partition_max_bytes", 1 << 20)
    log_start = changes.pop("log_start_offset", -1)
    fields.update(changes)
    topics = [
        FT(
            topic=name,
            topic_id=IDS[i],
            partitions=[
                FT.FetchPartition(
                    partition=p,
                    current_leader_epoch=3,
                    fetch_offset=offsets[i][p],
                    last_fetched_epoch=-1,
                    log_start_offset=log_start,
                    partition_max_bytes=partition_max_bytes,
                )
                for p in range(2)
            ],
        )
        for i, name in enumerate(["topic-a", "b"])
    ]
    frame = memoryview(
        encode_request(1, version, 9, "client", FetchRequest(topics=topics, **fields))
    )
    _, start = parse_request_header(frame[4:])
    return bytes(frame[4 + start :])


OFFSETS = [[5, 1 << 40], [0, 123_456]]
MOVED = [[6, (1 << 40) + 3], [0, 123_999]]


@pytest.mark.parametrize("version", range(4, 17))
def test_the_offsets_are_found_at_every_version(version: int) -> None:
    body = _body(version, OFFSETS)
    positions = offset_positions(version, body)
    assert positions is not None
    assert [struct.unpack_from(">q", body, p)[0] for p in positions] == [5, 1 << 40, 0, 123_456]


@pytest.mark.parametrize("version", range(4, 17))
def test_the_same_request_with_other_offsets_is_told(version: int) -> None:
    body = _body(version, OFFSETS)
    positions = offset_positions(version, body)
    assert positions is not None
    shape = RepeatedFetch(version, body, positions)
    assert shape.offsets(version, body) == [5, 1 << 40, 0, 123_456]
    assert shape.offsets(version, _body(version, MOVED)) == [6, (1 << 40) + 3, 0, 123_999]


@pytest.mark.parametrize(
    "changes",
    [
        {"max_wait_ms": 501},
        {"min_bytes": 2},
        {"isolation_level": 1},
        {"rack_id": "rack-b"},
        {"partition_max_bytes": 1 << 19},
        {"log_start_offset": 4},
        {"forgotten_topics_data": [FT(topic="gone", partitions=[0])]},
    ],
)
def test_any_other_change_is_another_request(changes: dict[str, object]) -> None:
    version = 12
    body = _body(version, OFFSETS)
    positions = offset_positions(version, body)
    assert positions is not None
    shape = RepeatedFetch(version, body, positions)
    assert shape.offsets(version, _body(version, MOVED, **changes)) is None


def test_another_version_is_another_request() -> None:
    body = _body(11, OFFSETS)
    positions = offset_positions(11, body)
    assert positions is not None
    assert RepeatedFetch(11, body, positions).offsets(12, body) is None


def test_versions_it_does_not_know_and_short_bodies() -> None:
    assert offset_positions(3, _body(3, OFFSETS)) is None
    assert offset_positions(17, _body(16, OFFSETS)) is None
    body = _body(12, OFFSETS)
    assert offset_positions(12, body[:40]) is None
