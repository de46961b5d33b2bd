"""``odradek dump-log --offsets-decoder`` decodes every ``__consumer_offsets`` record
kind from a real segment file: offset commits, classic group metadata, the KIP-848
consumer group records, tombstones, and a corrupt record without stopping."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

from odradek.consumer_offsets import consumer_group_records as cg
from odradek.consumer_offsets.records import (
    GroupValue,
    OffsetValue,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from odradek.internal_topic.partition_log import build_batch
from odradek.tools.dump_log import dump_files

TOPIC = uuid.UUID(int=7)


def test_offsets_decoder_prints_every_record_kind(tmp_path: Path) -> None:
    member = cg.MemberMetadataValue(
        None, None, "rdkafka", "/127.0.0.1", ["t"], None, 300000, "uniform"
    )
    current = cg.CurrentAssignmentValue(4, 3, 0, {TOPIC: frozenset({0, 1})}, {})
    records = [
        (encode_offset_key("g", "t", 0), encode_offset_value(OffsetValue(42, "m", 1000))),
        (
            encode_group_key("classic"),
            encode_group_value(GroupValue("consumer", 2, "range", "x", 5, [])),
        ),
        (cg.encode_key(cg.ConsumerGroupKey(3, "cg")), cg.encode_value(3, 4)),
        (cg.encode_key(cg.ConsumerGroupKey(5, "cg", "m1")), cg.encode_value(5, member)),
        (cg.encode_key(cg.ConsumerGroupKey(6, "cg")), cg.encode_value(6, 4)),
        (
            cg.encode_key(cg.ConsumerGroupKey(7, "cg", "m1")),
            cg.encode_value(7, {TOPIC: frozenset({0, 1})}),
        ),
        (cg.encode_key(cg.ConsumerGroupKey(8, "cg", "m1")), cg.encode_value(8, current)),
        (cg.encode_key(cg.ConsumerGroupKey(8, "cg", "gone")), None),
        (cg.encode_key(cg.ConsumerGroupKey(5, "cg", "bad")), b"\x00\x00\x05"),
    ]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(build_batch(records, 1234))
    out = io.StringIO()
    assert dump_files([str(path)], False, out, offsets_decoder=True) == 0
    lines = [line for line in out.getvalue().splitlines() if line.startswith("| offset:")]
    assert len(lines) == len(records)

    def parts(line: str) -> tuple[dict[str, object], str]:
        key, _, payload = line.split(" key: ", 1)[1].partition(" payload: ")
        return json.loads(key), payload

    key, payload = parts(lines[0])
    assert key == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 0}}
    assert json.loads(payload)["data"]["offset"] == 42
    assert json.loads(parts(lines[1])[1])["data"]["generation"] == 2
    key, payload = parts(lines[2])
    assert key == {"type": "3", "data": {"groupId": "cg"}}
    assert json.loads(payload) == {"version": "0", "data": {"epoch": 4}}
    key, payload = parts(lines[3])
    assert key["data"] == {"groupId": "cg", "memberId": "m1"}
    assert json.loads(payload)["data"]["serverAssignor"] == "uniform"
    assert json.loads(parts(lines[4])[1])["data"] == {"assignmentEpoch": 4}
    assert json.loads(parts(lines[5])[1])["data"]["topicPartitions"] == [
        {"topicId": str(TOPIC), "partitions": [0, 1]}
    ]
    assert json.loads(parts(lines[6])[1])["data"]["memberEpoch"] == 4
    assert lines[7].endswith("payload: <DELETE>")
    assert "<invalid:" in lines[8]
