"""Online migration between classic and consumer groups (KIP-848), sans-io.

Kafka's ``group.consumer.migration.policy`` decides which way a non-empty group may
change type: *upgrade* (a classic group using the ``consumer`` embedded protocol
becomes a consumer group when a member joins it with ConsumerGroupHeartbeat; its
members keep their partitions and go on with JoinGroup/SyncGroup/Heartbeat inside it),
*downgrade* (a consumer group whose last consumer-protocol member leaves while classic
members remain becomes a classic group again, which then rebalances; or whose last
consumer-protocol member is a static one replaced by a classic member with the same
``group.instance.id``, which becomes a Stable classic group without a rebalance, the
newcomer taking its predecessor's partitions), both
(``bidirectional``, Kafka 4's default) or neither (``disabled``: the heartbeat to a
classic group answers GROUP_ID_NOT_FOUND; as in Kafka, the policy does not stop a
classic member from joining a consumer group that already has members). The conversions are Kafka's
``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``: the classic
generation becomes the group epoch and every member's epoch, each member's last
classic assignment becomes both its current and its target assignment; back the other
way, the group epoch becomes the generation and each member's target assignment its
classic assignment. The rules for when to convert live in
:mod:`odradek.coordinator.consumer_groups` and :mod:`odradek.coordinator.shard`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from enum import Enum

from odradek.consumer_offsets.consumer_group_records import ClassicMemberMetadata
from odradek.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState
from odradek.coordinator.group import ClassicGroup, GroupState, Member
from odradek.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    HIGHEST_VERSION,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)

_VERSION = struct.Struct(">h")


class MigrationPolicy(Enum):
    """Kafka's ``ConsumerGroupMigrationPolicy``."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, name: str) -> MigrationPolicy:
        """Case-insensitive, as Kafka's validator; ValueError for anything else."""
        return cls(name.strip().lower())

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class MalformedProtocol(ValueError):
    """A member's embedded consumer protocol does not parse: no conversion."""


def subscription_of(protocols: list[tuple[str, bytes]], preferred: str | None) -> bytes:
    """The subscription bytes a classic member joined with (every protocol carries the
    same subscription; ``preferred`` when named)."""
    for name, metadata in protocols:
        if name == preferred:
            return metadata
    return protocols[0][1] if protocols else b""


def consumer_from_classic(
    classic: ClassicGroup, topics: Mapping[str, tuple[uuid.UUID, int]]
) -> ConsumerGroup:
    """Kafka's ``ConsumerGroup.fromClassicGroup``: every member Stable at the classic
    generation, owning (and targeted at) its last classic assignment."""
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = classic.generation_id
    group.assignment_epoch = classic.generation_id
    for m in classic.members.values():
        try:
            subscription = decode_subscription(subscription_of(m.protocols, classic.protocol_name))
            assignment = decode_assignment(m.assignment)
        except Exception as exc:
            raise MalformedProtocol(str(exc)) from exc
        assigned = {
            topics[tp.topic][0]: frozenset(tp.partitions)
            for tp in assignment.assigned_partitions
            if tp.topic in topics and tp.partitions
        }
        member = ConsumerGroupMember(
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            rack_id=getattr(subscription, "rack_id", None) or None,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=sorted(set(subscription.topics)),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id,
            state=MemberState.STABLE,
            assigned=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, list(m.protocols)),
        )
        group.add(member)
        group.target[m.member_id] = dict(assigned)
    return group


def classic_from_consumer(
    group: ConsumerGroup,
    leaving_id: str | None,
    names: Mapping[uuid.UUID, str],
    now_ms: int,
) -> ClassicGroup:
    """Kafka's ``ClassicGroup.fromConsumerGroup``: a Stable classic group at the group
    epoch, without the leaving member, each member assigned its target assignment
    (encoded in the version of the subscription it joined with). ``leaving_id`` is None
    when a static member was replaced: the newcomer already holds its predecessor's
    place (and target) in ``group``. The caller starts a rebalance when a member left."""
    classic = ClassicGroup(group.group_id, now_ms, GroupState.STABLE)
    classic.generation_id = group.group_epoch
    for m in group.members.values():
        if m.member_id == leaving_id or m.classic is None:
            continue
        classic.add(
            Member(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=list(m.classic.supported_protocols),
            )
        )
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    classic.protocol_name = classic.select_protocol()
    for member in classic.members.values():
        member.assignment = classic_assignment(
            group.target.get(member.member_id, {}), member.metadata(classic.protocol_name), names
        )
    return classic


def classic_assignment(
    assigned: Mapping[uuid.UUID, frozenset[int]],
    subscription: bytes,
    names: Mapping[uuid.UUID, str],
) -> bytes:
    """Partitions as a classic member's SyncGroup assignment, in the version of the
    subscription it joined with (Kafka's ``prepareAssignment``)."""
    version = _VERSION.unpack_from(subscription)[0] if len(subscription) >= 2 else 0
    return encode_assignment(
        {names[t]: sorted(ps) for t, ps in assigned.items() if t in names},
        version=max(0, min(version, HIGHEST_VERSION)),
    )
