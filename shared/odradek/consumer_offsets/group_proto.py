"""Group metadata between its record form (:mod:`odradek.consumer_offsets.records`) and the
``GroupMetadata`` protobuf the coordinator and the offset store exchange."""

from __future__ import annotations

from odradek.consumer_offsets.records import GroupValue, MemberValue
from odradek.rpc.v1 import offsets_pb2


def group_to_proto(group_id: str, value: GroupValue) -> offsets_pb2.GroupMetadata:
    msg = offsets_pb2.GroupMetadata(
        group_id=group_id,
        protocol_type=value.protocol_type,
        generation=value.generation,
        current_state_timestamp=value.current_state_timestamp,
    )
    if value.protocol is not None:
        msg.protocol = value.protocol
    if value.leader is not None:
        msg.leader = value.leader
    for m in value.members:
        member = msg.members.add(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        if m.group_instance_id is not None:
            member.group_instance_id = m.group_instance_id
    return msg


def group_from_proto(msg: offsets_pb2.GroupMetadata) -> GroupValue:
    return GroupValue(
        protocol_type=msg.protocol_type,
        generation=msg.generation,
        protocol=msg.protocol if msg.HasField("protocol") else None,
        leader=msg.leader if msg.HasField("leader") else None,
        current_state_timestamp=msg.current_state_timestamp,
        members=[
            MemberValue(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=bytes(m.subscription),
                assignment=bytes(m.assignment),
                group_instance_id=m.group_instance_id if m.HasField("group_instance_id") else None,
            )
            for m in msg.members
        ],
    )
