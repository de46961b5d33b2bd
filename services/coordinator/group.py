"""One classic consumer group: its members, generation, protocol and state.

Pure data with the bookkeeping Kafka's ``ClassicGroup`` does (which protocols every
member supports, who is leader, which static instance maps to which member id); the
rules for when to rebalance live in :mod:`odradek.coordinator.shard`. Only the shard's
own task touches a group, so nothing here locks.

States and the transitions allowed (Kafka's)::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
      ^                 |   ^                                           |
      |   no members    |   +---- member joins/leaves/fails ------------+
      +-----------------+   |                                           | leader's SyncGroup
                            +---- member joins/leaves/fails --- Stable <+
    Dead: deleted, or the shard moved away; terminal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from odradek.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from odradek.protocol.errors import ErrorCode


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}

Protocols = list[tuple[str, bytes]]


@dataclass(slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


class IllegalGroupTransition(RuntimeError):
    kafka_error = "UNKNOWN_SERVER_ERROR"


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_callback: JoinCallback | None = None
    sync_callback: SyncCallback | None = None
    is_new: bool = False
    supports_skip_assignment: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols with the same metadata, in the same order (Kafka's ``matches``)."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1])
            for a, b in zip(protocols, self.protocols, strict=True)
        )

    def vote(self, candidates: Iterable[str]) -> str:
        """The first of this member's protocols, in its preference order, among ``candidates``."""
        allowed = set(candidates)
        for name, _ in self.protocols:
            if name in allowed:
                return name
        raise IllegalGroupTransition(f"member {self.member_id} supports none of {allowed}")


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.has_offsets = False  # known to have committed offsets (kept while Empty)
        # Which delayed join is armed: "initial" (group.initial.rebalance.delay.ms
        # windows while the group forms) or "rebalance" (the rebalance timeout).
        self.join_mode: str | None = None
        self.initial_remaining_ms = 0

    # -- state ------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalGroupTransition(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed"
            )
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members ----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_callback is not None)

    def add(self, member: Member, callback: JoinCallback | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(set(member.protocol_names()))
        member.join_callback = callback
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(set(member.protocol_names()))
            self.supported_protocols += Counter()  # drop zero counts
            if (
                member.group_instance_id is not None
                and self.static_members.get(member.group_instance_id) == member_id
            ):
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        self.supported_protocols.subtract(set(member.protocol_names()))
        member.protocols = list(protocols)
        self.supported_protocols.update(set(member.protocol_names()))
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.join_callback
        member.join_callback = callback
        if previous is not None and callback is not None and previous is not callback:
            # A duplicate JoinGroup replaces the one still waiting; answer the stale one so
            # its caller is not left hanging (Kafka silently drops it).
            previous(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        # Fence whoever still waits under the old id right away.
        self.invoke_join(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        self.invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def invoke_join(self, member: Member, result: JoinResult) -> bool:
        callback = member.join_callback
        if callback is None:
            return False
        member.join_callback = None
        callback(result)
        return True

    def invoke_sync(self, member: Member, result: SyncResult) -> bool:
        callback = member.sync_callback
        if callback is None:
            return False
        member.sync_callback = None
        callback(result)
        return True

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateMember``: FENCED_INSTANCE_ID when a static instance now maps
        to another member id, UNKNOWN_MEMBER_ID when the id is not a member."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    # -- rebalance bookkeeping --------------------------------------------------------------
    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_callback is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """The leader must be a member that rejoined; False when none rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the leader's order of preference."""
        n = len(self.members)
        everyone = {name for name, count in self.supported_protocols.items() if count == n}
        leader = self.members.get(self.leader_id or "")
        order = leader.protocol_names() if leader else sorted(everyone)
        return [p for p in order if p in everyone]

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        names = list(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(p, 0) == n for p in names
        )

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins, ties go
        to the leader's preference order (Kafka leaves ties to hash-map order)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupTransition(f"group {self.group_id}: no protocol all members support")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        return next(p for p in candidates if votes.get(p, 0) == best)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        self.pending_sync.clear()
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol); None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics.update(decode_subscription(m.metadata(self.protocol_name)).topics)
            except Exception:
                return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return True if topics is None else topic in topics

    def summary(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "generation": self.generation_id,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol_name,
            "leader": self.leader_id,
            "members": list(self.members),
        }
