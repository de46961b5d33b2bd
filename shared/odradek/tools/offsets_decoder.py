"""``odradek dump-log --offsets-decoder``: ``__consumer_offsets`` records as Kafka's
``kafka-dump-log.sh --offsets-decoder`` prints them.

Each record becomes ``key: {"type":"<key version>","data":{...}}`` and
``payload: {"version":"<value version>","data":{...}}`` (``payload: <DELETE>`` for a
tombstone), with Kafka's field names: offset commits, classic group metadata and the
KIP-848 consumer group records (types 3-8). Subscriptions and assignments of classic
groups stay hex, as their bytes belong to the client's assignor. A record that does
not parse prints the error instead; the dump goes on.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from odradek.consumer_offsets import consumer_group_records as cg
from odradek.consumer_offsets.records import (
    CoordinatorRecordError,
    GroupKey,
    OffsetKey,
    OtherKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    record_version,
)


def _partitions(assignment: dict[uuid.UUID, frozenset[int]]) -> list[dict[str, Any]]:
    return [
        {"topicId": str(t), "partitions": sorted(ps)}
        for t, ps in sorted(assignment.items(), key=lambda kv: kv[0].bytes)
    ]


def _consumer_value(record_type: int, value: cg.Value) -> dict[str, Any]:
    if isinstance(value, cg.MemberMetadataValue):
        return {
            "instanceId": value.instance_id,
            "rackId": value.rack_id,
            "clientId": value.client_id,
            "clientHost": value.client_host,
            "subscribedTopicNames": value.subscribed_topic_names,
            "subscribedTopicRegex": value.subscribed_topic_regex,
            "rebalanceTimeoutMs": value.rebalance_timeout_ms,
            "serverAssignor": value.server_assignor,
        }
    if isinstance(value, cg.CurrentAssignmentValue):
        return {
            "memberEpoch": value.member_epoch,
            "previousMemberEpoch": value.previous_member_epoch,
            "state": value.state,
            "assignedPartitions": _partitions(value.assigned),
            "partitionsPendingRevocation": _partitions(value.pending_revocation),
        }
    if isinstance(value, dict):
        return {"topicPartitions": _partitions(value)}
    if record_type == cg.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        return {"assignmentEpoch": value}
    if record_type == cg.CONSUMER_GROUP_METADATA:
        return {"epoch": value}
    return {}


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def decode(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """(key text, payload text) of one ``__consumer_offsets`` record."""
    if key is None:
        return "null", "null"
    try:
        k = decode_key(key)
        version = record_version(key)
        data: dict[str, Any]
        if isinstance(k, OffsetKey):
            data = {"group": k.group, "topic": k.topic, "partition": k.partition}
        elif isinstance(k, GroupKey):
            data = {"group": k.group}
        else:
            assert isinstance(k, OtherKey)
            ck = cg.decode_key(key)
            data = {"groupId": ck.group}
            if ck.member_id:
                data["memberId"] = ck.member_id
        key_text = _json({"type": str(version), "data": data})
        if value is None:
            return key_text, "<DELETE>"
        value_version = record_version(value)
        if isinstance(k, OffsetKey):
            o = decode_offset_value(value)
            payload: dict[str, Any] = {
                "offset": o.offset,
                "leaderEpoch": o.leader_epoch,
                "metadata": o.metadata,
                "commitTimestamp": o.commit_timestamp,
            }
            if o.expire_timestamp >= 0:
                payload["expireTimestamp"] = o.expire_timestamp
        elif isinstance(k, GroupKey):
            g = decode_group_value(value)
            payload = {
                "protocolType": g.protocol_type,
                "generation": g.generation,
                "protocol": g.protocol,
                "leader": g.leader,
                "currentStateTimestamp": g.current_state_timestamp,
                "members": [
                    {
                        "memberId": m.member_id,
                        "groupInstanceId": m.group_instance_id,
                        "clientId": m.client_id,
                        "clientHost": m.client_host,
                        "rebalanceTimeout": m.rebalance_timeout,
                        "sessionTimeout": m.session_timeout,
                        "subscription": m.subscription.hex(),
                        "assignment": m.assignment.hex(),
                    }
                    for m in g.members
                ],
            }
        else:
            payload = _consumer_value(version, cg.decode_value(version, value))
        return key_text, _json({"version": str(value_version), "data": payload})
    except CoordinatorRecordError as exc:
        return f"<invalid: {exc}>", f"<{len(value) if value is not None else -1} bytes>"
