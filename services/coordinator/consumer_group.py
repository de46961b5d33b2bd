"""One KIP-848 consumer group: group epoch, members with their epochs, target assignment.

Pure data with Kafka's ``ConsumerGroup``/``ConsumerGroupMember`` bookkeeping; the
rules (when the epoch moves, how members reconcile) live in
:mod:`odradek.coordinator.consumer_groups` and :mod:`odradek.coordinator.reconciliation`.
Only the shard's task touches a group.

Epochs (KIP-848): the *group epoch* goes up whenever membership, a subscription or the
subscribed topics' partitions change; the target assignment is recomputed for it and
stamped with the *assignment epoch*; each member's *member epoch* reaches the
assignment epoch once it owns nothing another member's target needs. Group states,
Kafka's names: Empty (no members), Assigning (target behind the group epoch),
Reconciling (some member not at the target yet), Stable.

A member may use the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
consumer group while the group migrates online (KIP-848; Kafka's
``ConsumerGroupMember.classicMemberMetadata``): ``classic`` then holds its session
timeout and the protocols it joined with.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from odradek.consumer_offsets.consumer_group_records import ClassicMemberMetadata

Assignment = dict[uuid.UUID, frozenset[int]]


class MemberState(IntEnum):
    """Kafka's ``MemberState`` values, as stored in ConsumerGroupCurrentMemberAssignment."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


def partition_count(assignment: Assignment) -> int:
    return sum(len(p) for p in assignment.values())


def minus(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def union(a: Assignment, b: Assignment) -> Assignment:
    out = dict(a)
    for t, ps in b.items():
        out[t] = out.get(t, frozenset()) | ps
    return {t: ps for t, ps in out.items() if ps}


def intersect(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def normalized(a: Assignment) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


@dataclass(slots=True, eq=False)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = 300_000
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # What the member last said it owns (its heartbeat's TopicPartitions; nothing when
    # it joins), None when not known (a shard just loaded). In memory only: a client
    # whose coordinator moved sends a full request, which reports it again.
    acknowledged: Assignment | None = None
    # A static member that left with epoch -2: kept (with its assignment) until its
    # instance rejoins or its session times out.
    departed: bool = False
    # Set for a member using the classic protocol (online migration).
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def compiled_regex(self) -> re.Pattern[str] | None:
        if self.subscribed_topic_regex is None:
            return None
        return re.compile(self.subscribed_topic_regex)

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        pattern = self.compiled_regex()
        return pattern is not None and pattern.fullmatch(topic) is not None

    def owned(self) -> Assignment:
        """Partitions no other member may be given yet: assigned and still revoking."""
        return union(self.assigned, self.pending_revocation)


class ConsumerGroup:
    protocol_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}
        # Subscribed topics as last seen: name -> (topic id, partition count); a
        # change bumps the group epoch (topic created, deleted, grown).
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.topics_seen: object = None  # the topic view it was computed from
        self.assignor_name = ""
        self.deleted = False

    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        for m in self.members.values():
            # A static member that left holds epoch -2 in Kafka's records, so its group
            # is Reconciling until it returns (Kafka's ``isReconciledTo``).
            if (
                m.departed
                or m.member_epoch != self.assignment_epoch
                or m.state is not MemberState.STABLE
            ):
                return "Reconciling"
        return "Stable"

    def add(self, member: ConsumerGroupMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            if self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def all_classic_except(self, member_id: str) -> bool:
        """Kafka's ``allMembersUseClassicProtocolExcept``."""
        return all(
            m.uses_classic_protocol for m in self.members.values() if m.member_id != member_id
        )

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: type ``consumer`` and one
        protocol every classic member supports (any, when there is none yet)."""
        if protocol_type != self.protocol_type:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        if not classic:
            return bool(names)
        return any(all(n in {p for p, _ in c.supported_protocols} for c in classic) for n in names)

    def owner_map(self, excluding: str | None = None) -> dict[tuple[uuid.UUID, int], str]:
        """Partition -> the member that still owns it (assigned or revoking)."""
        out: dict[tuple[uuid.UUID, int], str] = {}
        for m in self.members.values():
            if m.member_id == excluding:
                continue
            for t, ps in m.owned().items():
                for p in ps:
                    out[(t, p)] = m.member_id
        return out
