"""The classic group protocol for the groups of one shard: Kafka's rules, sans-io.

:class:`GroupShard` is driven by one caller at a time (the shard's task in
:mod:`odradek.coordinator.runtime`, or a test): each operation runs to completion
synchronously. What it needs from outside comes in through two small interfaces:

- a :class:`Scheduler` for time and timers (session timeouts, the rebalance timeout,
  ``group.initial.rebalance.delay.ms``, pending-member and pending-sync expiry); timer
  actions are run by the same single caller, never concurrently with an operation;
- ``on_write``, which receives a :class:`StoreWrite` whenever group metadata must be
  made durable; the caller writes it to the offset store and calls ``done(error)``
  later (again as an operation). Responses that depend on the write wait for it.

Responses to JoinGroup/SyncGroup are callbacks, invoked when the rebalance allows
(they are long-polls). Heartbeat, LeaveGroup, DescribeGroups and ListGroups answer
directly. The rules follow Kafka's ``GroupCoordinator``/``ClassicGroup`` closely;
deviations are noted where they are made.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.coordinator import COORDINATOR_CONFIGS
from odradek.consumer_offsets.records import (
    GroupValue,
    MemberValue,
    encode_group_key,
    encode_group_value,
)
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.consumer_groups import (
    ConsumerGroups,
    ConsumerHeartbeat,
    HeartbeatResult,
    Record,
    TopicView,
)
from odradek.coordinator.group import (
    ClassicGroup,
    GroupState,
    JoinCallback,
    JoinResult,
    Member,
    Protocols,
    SyncCallback,
    SyncResult,
)
from odradek.coordinator.migration import (
    MalformedProtocol,
    classic_from_consumer,
    consumer_from_classic,
)
from odradek.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that never completes its
# first join is dropped after this long (it cannot heartbeat without an id).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` after ``delay_ms``, replacing any timer under ``key``."""
        ...

    def cancel(self, key: Hashable) -> None: ...


@dataclass(slots=True)
class GroupConfig:
    """Kafka's broker settings for classic groups (``group.*``)."""

    min_session_timeout_ms: int = BROKER_CONFIGS.int("group.min.session.timeout.ms")
    max_session_timeout_ms: int = BROKER_CONFIGS.int("group.max.session.timeout.ms")
    initial_rebalance_delay_ms: int = BROKER_CONFIGS.int("group.initial.rebalance.delay.ms")
    max_size: int = BROKER_CONFIGS.int("group.max.size")
    # Odradek's own: how long a member that got MEMBER_ID_REQUIRED may take to rejoin
    # before the group stops waiting for it (capped by its session timeout). Kafka waits
    # a whole session timeout, which stalls a group when a client joins twice
    # (docs/compatibility.md C15).
    pending_member_timeout_ms: int = COORDINATOR_CONFIGS.int("group.pending.member.timeout.ms")
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offset_metadata_max_bytes: int = COORDINATOR_CONFIGS.int("offset.metadata.max.bytes")
    # KIP-848 consumer groups (Kafka's group.consumer.*).
    consumer_session_timeout_ms: int = BROKER_CONFIGS.int("group.consumer.session.timeout.ms")
    consumer_heartbeat_interval_ms: int = BROKER_CONFIGS.int("group.consumer.heartbeat.interval.ms")
    consumer_max_size: int = BROKER_CONFIGS.int("group.consumer.max.size")
    consumer_assignors: list[str] = field(default_factory=lambda: ["uniform", "range"])
    # Online conversion between classic and consumer groups (bidirectional, upgrade,
    # downgrade, disabled; odradek.coordinator.migration).
    consumer_migration_policy: str = BROKER_CONFIGS.str("group.consumer.migration.policy")


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    supports_skip_assignment: bool = False
    reason: str = ""


@dataclass(slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: dict[str, bytes] = field(default_factory=dict)
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class StoreWrite:
    """Group metadata to make durable. A classic group's ``value`` (None: delete the
    group and its offsets), or, when ``records`` is set, a consumer group's records
    (raw ``__consumer_offsets`` keys and values, None values being tombstones)."""

    group_id: str
    value: GroupValue | None
    done: Callable[[int], None]
    records: list[tuple[bytes, bytes | None]] | None = None


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    error: int
    state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember]
    message: str = ""


@dataclass(slots=True)
class ShardStats:
    rebalances: int = 0
    expired_members: int = 0


def _bind(fn: Callable[[ClassicGroup, int], None], group: ClassicGroup) -> Callable[[int], None]:
    return lambda error: fn(group, error)


def _join_error(member_id: str, error: int) -> JoinResult:
    return JoinResult(error, member_id=member_id)


class GroupShard:
    def __init__(
        self,
        shard: int,
        config: GroupConfig,
        scheduler: Scheduler,
        on_write: Callable[[StoreWrite], None],
        topics: TopicView = dict,
    ) -> None:
        self.shard = shard
        self.config = config
        self.scheduler = scheduler
        self.on_write = on_write
        self.groups: dict[str, ClassicGroup] = {}
        self.stats = ShardStats()
        # The KIP-848 groups of the shard; a group id is one kind or the other, and
        # may change kind online (odradek.coordinator.migration).
        self.consumer = ConsumerGroups(config, scheduler, on_write, topics)
        self.consumer.downgrade = self._downgrade

    # -- helpers ----------------------------------------------------------------------------
    def now(self) -> int:
        return self.scheduler.now_ms()

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def _live(self, group: ClassicGroup) -> bool:
        """Still the shard's group by that id (not deleted or replaced meanwhile)."""
        return self.groups.get(group.group_id) is group

    def _get_or_create(self, group_id: str, create: bool) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = ClassicGroup(group_id, self.now())
        return group

    @staticmethod
    def _new_member_id(client_id: str, instance_id: str | None) -> str:
        prefix = instance_id if instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    # -- timers -----------------------------------------------------------------------------
    def _heartbeat_key(self, group: ClassicGroup, member_id: str) -> Hashable:
        return ("heartbeat", group.group_id, member_id)

    def _schedule_heartbeat(
        self, group: ClassicGroup, member: Member, timeout_ms: int | None = None
    ) -> None:
        member_id = member.member_id
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.scheduler.schedule(
            self._heartbeat_key(group, member_id),
            delay,
            lambda: self._expire_heartbeat(group, member_id),
        )

    def _cancel_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        self.scheduler.cancel(self._heartbeat_key(group, member_id))

    def _expire_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        if group.is_(GroupState.DEAD) or not self._live(group):
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # Members waiting in JoinGroup/SyncGroup are alive (the long-poll is their
        # heartbeat) unless they never completed a first join.
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            self._schedule_heartbeat(group, member)
            return
        self.stats.expired_members += 1
        log.info(
            "member %s in group %s has failed (no heartbeat for %d ms), removing it",
            member_id,
            group.group_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update(group, member)

    def _add_pending_member(self, group: ClassicGroup, member_id: str, session_ms: int) -> None:
        group.pending_members.add(member_id)
        timeout = min(session_ms, self.config.pending_member_timeout_ms)
        self.scheduler.schedule(
            ("pending", group.group_id, member_id),
            timeout,
            lambda: self._expire_pending(group, member_id),
        )

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            self._remove_pending_member(group, member_id)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.scheduler.cancel(("pending", group.group_id, member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        elif (
            group.is_(GroupState.EMPTY)
            and not group.members
            and not group.pending_members
            and group.generation_id == 0
            and not group.has_offsets
            and self._live(group)
        ):
            del self.groups[group.group_id]  # only ever had a member that never came back

    # -- JoinGroup --------------------------------------------------------------------------
    def join_group(self, req: JoinRequest, respond: JoinCallback) -> None:
        cfg = self.config
        if not req.group_id:
            respond(_join_error(req.member_id, ErrorCode.INVALID_GROUP_ID))
            return
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            respond(_join_error(req.member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # A classic member joining a consumer group (online migration).
                self.consumer.classic_join(req, respond)
                return
            # An empty consumer group becomes a classic one (Kafka does the same).
            del self.consumer.groups[req.group_id]
            self.on_write(
                StoreWrite(
                    req.group_id,
                    None,
                    lambda _e: None,
                    records=self.consumer.group_tombstones(req.group_id),
                )
            )
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        existed = req.group_id in self.groups
        group = self._get_or_create(req.group_id, create=unknown)
        if group is None:
            respond(_join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if not self._accept_joining_member(group, req.member_id):
            respond(_join_error(req.member_id, ErrorCode.GROUP_MAX_SIZE_REACHED))
            if group.size > cfg.max_size and group.can_rebalance():
                self._prepare_rebalance(group, "group is over its maximum size")
            return
        if unknown:
            self._join_unknown_member(group, req, respond)
        else:
            self._join_current_member(group, req, respond)
        # A group that a failed first join created and left empty is not kept.
        if not existed and group.is_(GroupState.EMPTY) and not group.pending_members:
            self.groups.pop(group.group_id, None)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or (
                group.num_awaiting_join() < limit
            )
        return member_id in group.members or group.size < limit

    def _join_unknown_member(
        self, group: ClassicGroup, req: JoinRequest, respond: JoinCallback
    ) -> None:
        if group.is_(GroupState.DEAD):
            respond(_join_error(UNKNOWN_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, (p for p, _ in req.protocols)):
            respond(_join_error(UNKNOWN_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = self._new_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                self._update_static_member(group, old_id, new_id, req, respond)
            else:
                self._add_member_and_rebalance(group, new_id, req, respond)
        elif req.require_known_member_id:
            # KIP-394: hand out the id first so a client that times out and retries
            # does not leave orphans behind.
            self._add_pending_member(group, new_id, req.session_timeout_ms)
            respond(_join_error(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_id, req, respond)

    def _join_current_member(
        self, group: ClassicGroup, req: JoinRequest, respond: JoinCallback
    ) -> None:
        member_id = req.member_id
        if group.is_(GroupState.DEAD):
            respond(_join_error(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, (p for p, _ in req.protocols)):
            respond(_join_error(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            if req.group_instance_id is not None:
                respond(_join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            self.scheduler.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, member_id, req, respond)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error:
            respond(_join_error(member_id, error))
            return
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, respond)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # It missed the JoinGroup response: send the current generation again.
                respond(self._join_result_for(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, respond)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, respond)
            else:
                respond(
                    JoinResult(
                        ErrorCode.NONE,
                        member_id=member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=group.leader_id or "",
                    )
                )
        else:  # Empty: no members can exist
            respond(_join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result_for(self, group: ClassicGroup, member: Member) -> JoinResult:
        leader = group.is_leader(member.member_id)
        return JoinResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=group.current_member_metadata() if leader else [],
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, req: JoinRequest, respond: JoinCallback
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
            supports_skip_assignment=req.supports_skip_assignment,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, respond)
        # A new member cannot heartbeat before its first join completes; if it never
        # does (the client went away), drop it after the new-member timeout.
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, req: JoinRequest, respond: JoinCallback
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond
        )
        member.supports_skip_assignment = req.supports_skip_assignment
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _update_static_member(
        self,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        req: JoinRequest,
        respond: JoinCallback,
    ) -> None:
        """A known static instance joins with no member id (it restarted): it takes
        over its old member, and in a Stable group whose protocol stays the same no
        rebalance happens."""
        instance = req.group_instance_id
        assert instance is not None
        old_leader = group.leader_id
        member = group.replace_static_member(instance, old_id, new_id)
        self._cancel_heartbeat(group, old_id)
        self._schedule_heartbeat(group, member)
        old_protocols = list(member.protocols)
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, respond
        )
        member.supports_skip_assignment = req.supports_skip_assignment
        state = group.state
        if state is GroupState.STABLE:
            if group.select_protocol() != group.protocol_name:
                self._prepare_rebalance(group, f"static member {instance} changed protocols")
                return
            # Nothing to reassign: persist the new member id, then answer with the
            # current generation. Callbacks are only held by the member until then.
            member.join_callback = None
            generation = group.generation_id

            def done(error: int) -> None:
                if group.generation_id != generation or not self._live(group):
                    respond(_join_error(new_id, ErrorCode.REBALANCE_IN_PROGRESS))
                    return
                if error:
                    # Revert: the old id stays the member of record.
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    if group.members.get(new_id) is member:
                        group.replace_static_member(instance, new_id, old_id)
                        self._schedule_heartbeat(group, member)
                    respond(_join_error(new_id, error))
                    return
                is_leader = group.is_leader(new_id)
                skip = is_leader and member.supports_skip_assignment
                respond(
                    JoinResult(
                        ErrorCode.NONE,
                        member_id=new_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        # KIP-814: v9+ leaders learn they lead but skip the assignment;
                        # older clients get the old leader id so they do not reassign.
                        leader_id=(group.leader_id or "") if skip else (old_leader or ""),
                        skip_assignment=skip,
                        members=group.current_member_metadata() if skip else [],
                    )
                )

            self._store_group(
                group, {m.member_id: m.assignment for m in group.members.values()}, done
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may already have the old id in its assignment: start over.
            self._prepare_rebalance(group, f"static member {instance} rejoined during sync")
        elif state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)

    # -- rebalance --------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.scheduler.cancel(("sync", group.group_id))
        group.pending_sync.clear()
        was_empty = group.is_(GroupState.EMPTY)
        log.info(
            "preparing to rebalance group %s in state %s with old generation %d (reason: %s)",
            group.group_id,
            group.state.value,
            group.generation_id,
            reason,
        )
        group.transition(GroupState.PREPARING_REBALANCE, self.now())
        key = ("join", group.group_id)
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            group.join_mode = "initial"
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            self.scheduler.schedule(key, delay, lambda: self._expire_initial_join(group))
        else:
            group.join_mode = "rebalance"
            self.scheduler.schedule(
                key, group.rebalance_timeout_ms(), lambda: self._expire_join(group)
            )
            self._try_complete_join(group)

    def _expire_initial_join(self, group: ClassicGroup) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE) or group.join_mode != "initial":
            return
        if group.new_member_added and group.initial_remaining_ms > 0:
            # New members keep arriving: wait another delay window (bounded by the
            # rebalance timeout), as Kafka's InitialDelayedJoin does.
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms -= delay
            self.scheduler.schedule(
                ("join", group.group_id), delay, lambda: self._expire_initial_join(group)
            )
            return
        self._complete_join(group)

    def _expire_join(self, group: ClassicGroup) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE) and group.join_mode == "rebalance":
            self._complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and group.join_mode == "rebalance"
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.scheduler.cancel(("join", group.group_id))
        group.join_mode = None
        # Dynamic members that did not rejoin in time are gone; static members stay
        # (they have until their session timeout to come back).
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._cancel_heartbeat(group, member.member_id)
                group.remove(member.member_id)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait again until session timeouts clear the group.
            group.join_mode = "rebalance"
            self.scheduler.schedule(
                ("join", group.group_id),
                group.rebalance_timeout_ms(),
                lambda: self._expire_join(group),
            )
            return
        group.init_next_generation(self.now())
        if group.is_(GroupState.EMPTY):
            self._store_group(group, {}, lambda error: None)
            return
        self.stats.rebalances += 1
        log.info(
            "stabilized group %s generation %d (protocol %s, %d members)",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            len(group.members),
        )
        for member in list(group.members.values()):
            result = self._join_result_for(group, member)
            group.invoke_join(member, result)
            self._schedule_heartbeat(group, member)
            member.is_new = False
        group.pending_sync = set(group.members)
        generation = group.generation_id
        self.scheduler.schedule(
            ("sync", group.group_id),
            group.rebalance_timeout_ms(),
            lambda: self._expire_pending_sync(group, generation),
        )

    def _expire_pending_sync(self, group: ClassicGroup, generation: int) -> None:
        if generation != group.generation_id or not group.pending_sync:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in list(group.pending_sync):
            self._cancel_heartbeat(group, member_id)
            member = group.members.get(member_id)
            if member is not None:
                group.invoke_join(member, _join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                group.invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            group.remove(member_id)
        self._prepare_rebalance(group, "members did not send SyncGroup in time")

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        for member in list(group.members.values()):
            group.invoke_sync(member, SyncResult(error))

    def _set_and_propagate_assignment(
        self, group: ClassicGroup, assignment: dict[str, bytes]
    ) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        for member in list(group.members.values()):
            if group.invoke_sync(member, self._sync_result(group, member)):
                self._schedule_heartbeat(group, member)

    @staticmethod
    def _sync_result(group: ClassicGroup, member: Member) -> SyncResult:
        return SyncResult(
            ErrorCode.NONE,
            member.assignment,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
        )

    def _remove_member_and_update(self, group: ClassicGroup, member: Member) -> None:
        # A member timing out while its JoinGroup waits learns it is gone.
        group.invoke_join(member, _join_error(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        group.invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._cancel_heartbeat(group, member.member_id)
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- SyncGroup --------------------------------------------------------------------------
    def sync_group(self, req: SyncRequest, respond: SyncCallback) -> None:
        if req.group_id in self.consumer.groups:
            self.consumer.classic_sync(req, respond)
            return
        group = self.groups.get(req.group_id)
        if group is None:
            respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_(GroupState.DEAD):
            respond(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error:
            respond(SyncResult(error))
            return
        if req.generation_id != group.generation_id:
            respond(SyncResult(ErrorCode.ILLEGAL_GENERATION))
            return
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            respond(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        member = group.members[req.member_id]
        if group.is_(GroupState.EMPTY):
            respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            previous = member.sync_callback
            member.sync_callback = respond
            if previous is not None and previous is not respond:
                previous(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            self._remove_pending_sync(group, member.member_id)
            if group.is_leader(member.member_id):
                self._complete_leader_sync(group, req.assignments)
        else:  # Stable: hand out the assignment already made
            self._remove_pending_sync(group, member.member_id)
            self._schedule_heartbeat(group, member)
            respond(self._sync_result(group, member))

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.scheduler.cancel(("sync", group.group_id))

    def _complete_leader_sync(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        # Every member gets an assignment, empty when the leader gave it none
        # (docs/compatibility.md C16); entries for non-members are ignored.
        full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
        generation = group.generation_id

        def done(error: int) -> None:
            if (
                not self._live(group)
                or not group.is_(GroupState.COMPLETING_REBALANCE)
                or group.generation_id != generation
            ):
                return
            if error:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, "could not store the assignment")
            else:
                self._set_and_propagate_assignment(group, full)
                group.transition(GroupState.STABLE, self.now())

        self._store_group(group, full, done)

    # -- Heartbeat --------------------------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> int:
        if group_id in self.consumer.groups:
            return self.consumer.classic_heartbeat(group_id, generation_id, member_id, instance_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup -------------------------------------------------------------------------
    def leave_group(
        self, group_id: str, leaving: Iterable[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """(top-level error, one error per leaving member)."""
        leaving = list(leaving)
        if group_id in self.consumer.groups:
            return self.consumer.classic_leave(group_id, leaving)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors: list[int] = []
        for member_id, instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal by instance id (KIP-345).
                current = group.static_member_id(instance_id)
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update(group, group.members[current])
                    errors.append(ErrorCode.NONE)
            elif member_id in group.pending_members:
                self._remove_pending_member(group, member_id)
                errors.append(ErrorCode.NONE)
            else:
                error = group.validate_member(member_id, instance_id)
                if not error:
                    self._remove_member_and_update(group, group.members[member_id])
                errors.append(error)
        return ErrorCode.NONE, errors

    # -- offsets ----------------------------------------------------------------------------
    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        *,
        transactional: bool = False,
    ) -> int:
        """Kafka's checks before an offset commit is written; creates the (Empty) group
        for commits that do not use group management. A transactional commit
        (TxnOffsetCommit, KIP-447) is checked the same way except that without member id
        and generation (v0-v2) it is accepted whatever the group's state, and a group
        completing a rebalance does not refuse it (Kafka's
        ``ClassicGroup.validateOffsetCommit`` with ``isTransactional``)."""
        if group_id in self.consumer.groups:
            # KIP-848 group: member id and member epoch (transactional or not).
            return self.consumer.validate_offset_commit(group_id, member_id, generation_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                group = self.groups[group_id] = ClassicGroup(group_id, self.now())
                group.has_offsets = True
                return ErrorCode.NONE
            # Kafka answers ILLEGAL_GENERATION for a generation-checked commit to a
            # group it does not know.
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None:
            # A commit is proof of life, as in Kafka.
            self._schedule_heartbeat(group, member)
        return ErrorCode.NONE

    def validate_offset_delete(self, group_id: str) -> tuple[int, ClassicGroup | None]:
        """(group error, group); per-partition subscription checks use the group."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        if not group.is_(GroupState.EMPTY) and group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, None
        return ErrorCode.NONE, group

    def note_offsets(self, group_id: str) -> None:
        """A group known only by its committed offsets (found when loading)."""
        if group_id in self.consumer.groups:
            return
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.now())
        group.has_offsets = True

    # -- ConsumerGroupHeartbeat (KIP-848) ---------------------------------------------------
    def consumer_group_heartbeat(
        self, req: ConsumerHeartbeat, respond: Callable[[HeartbeatResult], None]
    ) -> None:
        self.consumer.heartbeat(req, respond, self._adopt)

    def _adopt(
        self, group_id: str, records: list[Record]
    ) -> ConsumerGroup | HeartbeatResult | None:
        """A joining ConsumerGroupHeartbeat names a group id the consumer side does not
        hold (Kafka's ``getOrMaybeCreateConsumerGroup``): an empty classic group gives
        the id up; a non-empty one is upgraded when the migration policy allows
        (Kafka's ``validateOnlineUpgrade``), else the heartbeat is GROUP_ID_NOT_FOUND."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if not group.members:
            self._end_classic(group)
            records.append((encode_group_key(group_id), None))
            return None
        not_consumer = HeartbeatResult(
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
        )
        if (
            not self.consumer.policy.upgrade_enabled
            or group.protocol_type != CONSUMER_PROTOCOL_TYPE
            or len(group.members) > self.config.consumer_max_size
        ):
            return not_consumer
        try:
            converted = consumer_from_classic(group, self.consumer.topics())
        except MalformedProtocol:
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {group_id} to consumer group because the "
                "embedded consumer protocol is malformed.",
            )
        log.info(
            "classic group %s (generation %d, %d members) upgraded to a consumer group",
            group_id,
            group.generation_id,
            len(group.members),
        )
        # Whoever waits in JoinGroup/SyncGroup rejoins, now into the consumer group.
        for member in list(group.members.values()):
            group.invoke_join(
                member, _join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS)
            )
            group.invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self._end_classic(group)
        records.append((encode_group_key(group_id), None))
        return converted

    def _end_classic(self, group: ClassicGroup) -> None:
        """The classic group gives its id up (converted or replaced): its timers stop."""
        for member_id in group.members:
            self._cancel_heartbeat(group, member_id)
        for member_id in group.pending_members:
            self.scheduler.cancel(("pending", group.group_id, member_id))
        self.scheduler.cancel(("join", group.group_id))
        self.scheduler.cancel(("sync", group.group_id))
        group.state = GroupState.DEAD
        if self._live(group):
            del self.groups[group.group_id]

    def _downgrade(
        self, group: ConsumerGroup, leaving_id: str | None, records: list[Record]
    ) -> None:
        """The consumer side dropped ``group`` (Kafka's ``convertToClassicGroup``): its
        last consumer-protocol member left (``leaving_id``) and it lives on as a classic
        group that rebalances; or that member was a static one replaced by a classic
        member (``leaving_id`` None) and the classic group is Stable at once, with no
        rebalance, as Kafka's."""
        names = {tid: name for name, (tid, _n) in self.consumer.topics().items()}
        classic = classic_from_consumer(group, leaving_id, names, self.now())
        self.groups[group.group_id] = classic
        records.append(
            (
                encode_group_key(group.group_id),
                encode_group_value(
                    self.group_value(
                        classic, {m.member_id: m.assignment for m in classic.members.values()}
                    )
                ),
            )
        )
        for member in classic.members.values():
            self._schedule_heartbeat(group=classic, member=member)
        if leaving_id is not None:
            self._prepare_rebalance(classic, f"downgrade of group {group.group_id} to classic")

    # -- DescribeGroups / ListGroups / DeleteGroups ----------------------------------------
    def describe(self, group_id: str) -> GroupDescription:
        """Kafka's ``describeGroups``: a group that is not a classic one (unknown, or a
        consumer group) is GROUP_ID_NOT_FOUND, which DescribeGroups below v6 answers as
        a Dead group without error (KIP-1043)."""
        group = self.groups.get(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a classic group."
                if group_id in self.consumer.groups
                else f"Group {group_id} not found."
            )
            return GroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, "Dead", "", "", [], message
            )
        stable = group.is_(GroupState.STABLE)
        members = [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            group_id,
            ErrorCode.NONE,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of every live group, optionally
        filtered by state (case-insensitive, as Kafka's ListGroups v4 filter)."""
        wanted = {s.lower() for s in states}
        classic = [
            (g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self.groups.values()
            if not g.is_(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]
        consumer = [
            (g.group_id, g.protocol_type, g.state(), "consumer")
            for g in self.consumer.groups.values()
            if not wanted or g.state().lower() in wanted
        ]
        return classic + consumer

    def delete_groups(
        self, group_ids: Iterable[str], respond: Callable[[dict[str, int]], None]
    ) -> None:
        results: dict[str, int] = {}
        doomed: list[ClassicGroup] = []
        consumer_doomed: list[str] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None and group_id in self.consumer.groups:
                error = self.consumer.deletable(group_id)
                if error:
                    results[group_id] = error
                else:
                    consumer_doomed.append(group_id)
                continue
            if group is None or group.is_(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(GroupState.EMPTY):
                group.transition(GroupState.DEAD, self.now())
                doomed.append(group)
            else:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
        if not doomed and not consumer_doomed:
            respond(results)
            return
        remaining = {g.group_id for g in doomed} | set(consumer_doomed)

        def consumer_done(group_id: str, error: int) -> None:
            results[group_id] = error
            remaining.discard(group_id)
            if not remaining:
                respond(results)

        for group_id in consumer_doomed:
            del self.consumer.groups[group_id]
            # The offset store tombstones the group's records and offsets.
            self.on_write(StoreWrite(group_id, None, functools.partial(consumer_done, group_id)))

        def one_done(group: ClassicGroup, error: int) -> None:
            results[group.group_id] = error
            if self._live(group):
                del self.groups[group.group_id]
            remaining.discard(group.group_id)
            if not remaining:
                respond(results)

        for group in doomed:
            self.on_write(StoreWrite(group.group_id, None, _bind(one_done, group)))

    # -- persistence ------------------------------------------------------------------------
    def _store_group(
        self,
        group: ClassicGroup,
        assignment: dict[str, bytes],
        done: Callable[[int], None],
    ) -> None:
        self.on_write(StoreWrite(group.group_id, self.group_value(group, assignment), done))

    @staticmethod
    def group_value(group: ClassicGroup, assignment: dict[str, bytes]) -> GroupValue:
        return GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=[
                MemberValue(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(group.protocol_name),
                    assignment=assignment.get(m.member_id, b""),
                    group_instance_id=m.group_instance_id,
                )
                for m in group.members.values()
            ],
        )

    def load_group(self, group_id: str, value: GroupValue) -> None:
        """Rebuild a group from its last stored metadata (a shard taken over): Stable
        with its members and assignments, or Empty; members must heartbeat within a
        session timeout as usual."""
        now = self.now()
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = ClassicGroup(group_id, now, state)
        if value.current_state_timestamp >= 0 and state is GroupState.EMPTY:
            group.state_timestamp = value.current_state_timestamp
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout
                if m.rebalance_timeout >= 0
                else m.session_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member)
            self._schedule_heartbeat(group, member)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.protocol_type = value.protocol_type or None
        self.groups[group_id] = group

    def unload(self) -> None:
        """The shard moved away: everyone still waiting is told to find the new owner."""
        self.consumer.unload()
        for group in self.groups.values():
            for member in list(group.members.values()):
                self._cancel_heartbeat(group, member.member_id)
                group.invoke_join(member, _join_error(member.member_id, ErrorCode.NOT_COORDINATOR))
                group.invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            for member_id in group.pending_members:
                self.scheduler.cancel(("pending", group.group_id, member_id))
            self.scheduler.cancel(("join", group.group_id))
            self.scheduler.cancel(("sync", group.group_id))
            group.state = GroupState.DEAD
        self.groups.clear()

    # -- metrics ----------------------------------------------------------------------------
    def counts(self) -> tuple[dict[str, int], int]:
        """(groups by state, members) for the gauges."""
        by_state: dict[str, int] = {}
        members = 0
        for g in self.groups.values():
            by_state[g.state.value] = by_state.get(g.state.value, 0) + 1
            members += len(g.members)
        for cg in self.consumer.groups.values():
            state = cg.state()
            by_state[state] = by_state.get(state, 0) + 1
            members += len(cg.members)
        return by_state, members
