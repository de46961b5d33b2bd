"""The KIP-848 consumer group protocol for the groups of one shard: Kafka's rules, sans-io.

:class:`ConsumerGroups` is driven by the shard's task exactly like the classic side
(:mod:`odradek.coordinator.shard`, which owns it as ``GroupShard.consumer``): it shares
the shard's :class:`~odradek.coordinator.shard.Scheduler` (session and rebalance
timers) and its ``on_write`` (records for ``__consumer_offsets``). A heartbeat answers
only once the records it produced are durable, as Kafka's coordinator does.

One heartbeat (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``): validate the
request, join/update/leave the member, bump the group epoch when membership, a
subscription or the subscribed topics' partitions changed, recompute the target
assignment with the chosen server assignor when the assignment epoch is behind, move
the member towards its target (:mod:`odradek.coordinator.reconciliation`), persist what
changed with Kafka's record types (:mod:`odradek.consumer_offsets.consumer_group_records`)
and answer with the member epoch and, when it changed, the assignment.

Classic members (KIP-848's online migration, Kafka's ``classicGroupJoinToConsumerGroup``
and neighbours): a member of a consumer group may use JoinGroup/SyncGroup/Heartbeat/
LeaveGroup. JoinGroup is its heartbeat with a subscription and owned partitions: it
updates the member, moves the epochs and the target like a heartbeat and answers at
once with the member epoch as generation (no leader, no long-poll); SyncGroup hands out
its current assignment in the embedded consumer protocol; Heartbeat answers
REBALANCE_IN_PROGRESS while the member has to rejoin (group epoch moved on, partitions
to revoke, or partitions it waits for released). A member that does not rejoin or sync
within its rebalance timeout is fenced. When the last consumer-protocol member of a
group leaves or is fenced and only classic members remain, the group goes back to being
a classic group (``downgrade``, :mod:`odradek.coordinator.migration`); so it does,
without a rebalance, when that member is a static one whose ``group.instance.id`` a
classic member takes over (Kafka's ``validateOnlineDowngradeWithReplacedMemberId``).

Deviations: regular expressions are Python's ``re`` (Kafka uses RE2/J; the syntax of
common patterns is the same) and are resolved on each heartbeat instead of in the
background; a heartbeat of a known member (epoch > 0) to a group id that a classic
group holds (the consumer group went back to classic while the member was away)
answers UNKNOWN_MEMBER_ID, so that the member rejoins, where Kafka answers
GROUP_ID_NOT_FOUND, which clients take as fatal; a member whose epoch is behind
because a response was lost is accepted when its previous epoch matches, whether or not
it reported its partitions (Kafka fences it unless it reports a subset of its
assignment), and every heartbeat is answered the assignment until the member reports
owning it (Kafka: only when it changed or to a full request); a member
waiting for partitions to be released is told to heartbeat every 100 ms until it has
them (faster settling; Kafka answers the configured interval).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.consumer_offsets import consumer_group_records as rec
from odradek.consumer_offsets.consumer_group_records import ClassicMemberMetadata
from odradek.coordinator.assignors import ASSIGNORS, AssignmentSpec
from odradek.coordinator.consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    intersect,
    minus,
    normalized,
)
from odradek.coordinator.group import JoinCallback, JoinResult, SyncCallback, SyncResult
from odradek.coordinator.migration import (
    MigrationPolicy,
    classic_assignment,
    subscription_of,
)
from odradek.coordinator.reconciliation import MemberAssignment, reconcile
from odradek.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.coordinator.shard import (
        GroupConfig,
        JoinRequest,
        Scheduler,
        StoreWrite,
        SyncRequest,
    )

log = logging.getLogger(__name__)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
# Heartbeat interval answered to a member waiting for partitions to be released.
UNRELEASED_HEARTBEAT_INTERVAL_MS = 100

# Current topics: name -> (topic id, partition count); internal topics left out.
TopicView = Callable[[], Mapping[str, tuple[uuid.UUID, int]]]
Record = tuple[bytes, bytes | None]
# The shard's classic side, asked when a joining heartbeat (epoch 0) names a group id
# this side does not hold: (group id, records) -> the classic group converted (upgrade),
# an error answer, or None when no classic group holds the id.
Adopt = Callable[[str, list[Record]], "ConsumerGroup | HeartbeatResult | None"]
# Called to turn a consumer group back into a classic one (downgrade): (group, the
# member leaving, or None when a static member was replaced by a classic one, records
# to append the classic group's record to).
Downgrade = Callable[[ConsumerGroup, str | None, list[Record]], None]


@dataclass(slots=True)
class ConsumerHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    classic: bool = False


@dataclass(slots=True)
class ConsumerGroupDescription:
    group_id: str
    error: int
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedConsumerMember] = field(default_factory=list)


def _fail(error: int, message: str, member_id: str | None = None) -> HeartbeatResult:
    return HeartbeatResult(error, message, member_id=member_id)


class ConsumerGroups:
    def __init__(
        self,
        config: GroupConfig,
        scheduler: Scheduler,
        on_write: Callable[[StoreWrite], None],
        topics: TopicView,
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self.on_write = on_write
        self.topics = topics
        self.groups: dict[str, ConsumerGroup] = {}
        self.heartbeats = 0
        self.policy = MigrationPolicy.parse(config.consumer_migration_policy)
        self.downgrade: Downgrade | None = None
        self._join_timers: set[tuple[str, str]] = set()

    # -- heartbeat --------------------------------------------------------------------------
    def heartbeat(
        self,
        req: ConsumerHeartbeat,
        respond: Callable[[HeartbeatResult], None],
        adopt: Adopt,
    ) -> None:
        self.heartbeats += 1
        error = self._validate(req)
        if error is not None:
            respond(error)
            return
        records: list[Record] = []
        result = self._heartbeat(req, records, adopt)
        if not records:
            respond(result)
            return
        from odradek.coordinator.shard import StoreWrite

        def done(code: int) -> None:
            respond(result if not code else _fail(code, "could not store the group state"))

        self.on_write(StoreWrite(req.group_id, None, done, records=records))

    def _validate(self, req: ConsumerHeartbeat) -> HeartbeatResult | None:
        if not req.group_id:
            return _fail(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id == "":
            return _fail(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id == "":
            return _fail(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return _fail(
                    ErrorCode.INVALID_REQUEST,
                    "RebalanceTimeoutMs must be provided in first request.",
                )
            if req.topic_partitions:
                return _fail(
                    ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
                )
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return _fail(
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                return _fail(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return _fail(ErrorCode.INVALID_REQUEST, f"MemberEpoch is invalid: {req.member_epoch}")
        if req.member_epoch != 0 and not req.member_id:
            return _fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if req.server_assignor is not None and req.server_assignor not in self._assignors():
            return _fail(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                + ", ".join(self._assignors()),
            )
        if req.subscribed_topic_regex is not None:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                return _fail(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid "
                    f"regular expression: {exc}.",
                )
        return None

    def _assignors(self) -> list[str]:
        return [a for a in self.config.consumer_assignors if a in ASSIGNORS] or ["uniform"]

    def _heartbeat(
        self, req: ConsumerHeartbeat, records: list[Record], adopt: Adopt
    ) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group, req, records)
        if group is None:
            if req.member_epoch != 0:
                # No consumer group holds the id: it was deleted, or it went back to
                # being a classic group (downgrade) while this member was away, e.g.
                # fenced after missing its session. Either way the member is unknown
                # and must rejoin with epoch 0, which upgrades the group again when
                # the policy allows. Kafka answers GROUP_ID_NOT_FOUND when a classic
                # group holds the id, which librdkafka 2.16 and the Java client take
                # as fatal: that consumer would never consume again (a deviation,
                # listed in the module docstring).
                return _fail(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {req.group_id}.",
                )
            adopted = adopt(req.group_id, records)
            if isinstance(adopted, HeartbeatResult):
                return adopted
            if adopted is not None:
                # Upgrade: the classic group's members carry on inside the new group.
                group = self.groups[req.group_id] = adopted
                records.extend(self.group_records(adopted))
                for m in adopted.members.values():
                    self._schedule_session(adopted, m)
            else:
                group = self.groups[req.group_id] = ConsumerGroup(req.group_id)
        bump = False
        if req.member_epoch == 0:
            joined = self._join(group, req, records)
            if isinstance(joined, HeartbeatResult):
                return joined
            member, bump = joined
        else:
            found = group.members.get(req.member_id)
            if found is None or found.departed:
                return _fail(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {req.group_id}.",
                )
            member = found
            if req.member_epoch > member.member_epoch or (
                req.member_epoch < member.member_epoch
                and req.member_epoch != member.previous_member_epoch
            ):
                return _fail(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a greater member epoch ({member.member_epoch})"
                    f" than the one known by the client ({req.member_epoch})."
                    if req.member_epoch < member.member_epoch
                    else f"The consumer group member has a smaller member epoch "
                    f"({member.member_epoch}) than the one known by the client ({req.member_epoch}).",
                    req.member_id,
                )
            bump = self._update_member(member, req)
            if bump:
                records.append(self._member_record(group, member))
        if req.member_epoch == 0:
            member.acknowledged = {}  # a (re)joining member owns nothing
        elif req.topic_partitions is not None:
            member.acknowledged = normalized(req.topic_partitions)
        before = (member.member_epoch, member.assigned)
        self._advance(group, member, bump, req.topic_partitions, records)
        self._schedule_session(group, member)
        # Kafka's rule (GroupMetadataManager.consumerGroupHeartbeat): the assignment goes
        # out when it changed or the request is a full one (a client resending everything
        # after an error, which may have missed it). And until the member reports owning
        # its assignment: the response that carried it may have been lost. librdkafka
        # times a heartbeat out after one heartbeat interval and retries the very same
        # request (same epoch, no TopicPartitions); answered without the assignment, the
        # member stayed Stable here with partitions its client never took (the stall of
        # the rolling-migration test).
        full = (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        send = (
            req.member_epoch == 0
            or full
            or (member.member_epoch, member.assigned) != before
            or member.acknowledged != member.assigned
        )
        return HeartbeatResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._interval(member),
            assignment=dict(member.assigned) if send else None,
        )

    def _advance(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        bump: bool,
        reported: Assignment | None,
        records: list[Record],
    ) -> None:
        """Steps 2-3 of a heartbeat (either protocol): a new group epoch when the
        subscriptions or the subscribed topics' partitions changed, a new target when the
        assignment epoch is behind, and the member moved towards its target."""
        # Recomputed only when the subscriptions or the topic view changed (the view
        # is one object per metadata snapshot).
        topics = self.topics()
        if bump or group.topics_seen is not topics:
            metadata = self._subscription_metadata(group, topics)
            group.topics_seen = topics
            if bump or metadata != group.subscription_metadata:
                group.subscription_metadata = metadata
                group.group_epoch += 1
                records.append(self._epoch_record(group))
        if group.assignment_epoch < group.group_epoch:
            self._compute_target(group, records)
        self._reconcile(group, member, reported, records)

    def _interval(self, member: ConsumerGroupMember) -> int:
        """The heartbeat interval to answer. A member waiting for partitions others are
        releasing (UNRELEASED_PARTITIONS) is asked back sooner, so it picks them up soon
        after they are freed instead of a whole interval later (Odradek's deviation:
        Kafka always answers ``group.consumer.heartbeat.interval.ms``)."""
        interval = self.config.consumer_heartbeat_interval_ms
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            return min(interval, UNRELEASED_HEARTBEAT_INTERVAL_MS)
        return interval

    def _join(
        self, group: ConsumerGroup, req: ConsumerHeartbeat, records: list[Record]
    ) -> HeartbeatResult | tuple[ConsumerGroupMember, bool]:
        member_id = req.member_id or str(uuid.uuid4())
        if req.instance_id is not None:
            old_id = group.static_members.get(req.instance_id)
            old = group.members.get(old_id) if old_id is not None else None
            if (
                old is not None
                and old.member_id != member_id
                and not old.departed
                and not old.uses_classic_protocol
            ):
                # Kafka's getOrMaybeSubscribeStaticConsumerGroupMember: only a
                # consumer-protocol predecessor must have left first; a classic one
                # (which sends no LeaveGroup when a static member closes) is replaced.
                return _fail(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {old.member_id} with instance id {req.instance_id} is "
                    "still in use.",
                )
            if old is not None and old.member_id != member_id:
                member = self._replace_static(group, old, member_id, records)
                member.classic = None  # back with the consumer protocol
                changed = self._update_member(member, req)
                records.append(self._member_record(group, member))
                return member, changed
        existing = group.members.get(member_id)
        if existing is None and len(group.members) >= self.config.consumer_max_size:
            return _fail(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.consumer_max_size} members.",
            )
        if existing is not None:
            # Re-joining with epoch 0: it gave up everything it had.
            existing.member_epoch = 0
            existing.previous_member_epoch = 0
            existing.state = MemberState.STABLE
            existing.assigned = {}
            existing.pending_revocation = {}
            existing.departed = False
            self._update_member(existing, req)
            records.append(self._member_record(group, existing))
            records.append(self._current_record(group, existing))
            return existing, True
        member = ConsumerGroupMember(
            member_id=member_id,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            client_id=req.client_id,
            client_host=req.client_host,
            subscribed_topic_names=sorted(set(req.subscribed_topic_names or [])),
            subscribed_topic_regex=req.subscribed_topic_regex or None,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=req.server_assignor,
        )
        group.add(member)
        records.append(self._member_record(group, member))
        return member, True

    def _replace_static(
        self, group: ConsumerGroup, old: ConsumerGroupMember, member_id: str, records: list[Record]
    ) -> ConsumerGroupMember:
        """A static member back under a new id takes over its predecessor's epoch and
        assignment: no rebalance (KIP-345 for KIP-848)."""
        target = group.target.get(old.member_id, {})
        group.remove(old.member_id)
        self._cancel_timers(group, old.member_id)
        records.extend(self._member_tombstones(group, old.member_id))
        old.member_id = member_id
        old.departed = False
        group.add(old)
        group.target[member_id] = target
        records.append(self._target_record(group, member_id, target))
        records.append(self._current_record(group, old))
        return old

    @staticmethod
    def _update_member(member: ConsumerGroupMember, req: ConsumerHeartbeat) -> bool:
        """Apply the request's non-null fields; True when the subscription changed."""
        changed = False
        if req.subscribed_topic_names is not None:
            names = sorted(set(req.subscribed_topic_names))
            changed |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            changed |= regex != member.subscribed_topic_regex
            member.subscribed_topic_regex = regex
        if req.server_assignor is not None:
            changed |= req.server_assignor != member.server_assignor
            member.server_assignor = req.server_assignor
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.client_id:
            member.client_id = req.client_id
        if req.client_host:
            member.client_host = req.client_host
        return changed

    def _leave(
        self, group: ConsumerGroup | None, req: ConsumerHeartbeat, records: list[Record]
    ) -> HeartbeatResult:
        member_id = req.member_id
        if group is None:
            return _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
        member = group.members.get(member_id)
        if member is None and req.instance_id is not None:
            static_id = group.static_members.get(req.instance_id)
            member = group.members.get(static_id) if static_id is not None else None
        if member is None:
            return _fail(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {req.group_id}.",
            )
        if req.instance_id is not None and member.instance_id != req.instance_id:
            return _fail(ErrorCode.FENCED_INSTANCE_ID, "InstanceId does not match the member.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Temporary departure: keep the assignment for the instance's return
            # until the session times out.
            member.departed = True
            self._schedule_session(group, member)
            return HeartbeatResult(
                ErrorCode.NONE, member_id=member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
            )
        self._remove_member(group, member, records)
        return HeartbeatResult(
            ErrorCode.NONE, member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
        )

    def _remove_member(
        self, group: ConsumerGroup, member: ConsumerGroupMember, records: list[Record]
    ) -> None:
        self._remove_members(group, [member], records)

    def _remove_members(
        self, group: ConsumerGroup, leaving: list[ConsumerGroupMember], records: list[Record]
    ) -> None:
        """Members that left or were fenced or removed together (a LeaveGroup may name
        several): the group goes back to classic when only classic members remain,
        else it gets one new group epoch and target for all of them (Kafka's
        ``classicGroupLeaveToConsumerGroup``)."""
        if self._can_downgrade(group, leaving):
            assert self.downgrade is not None
            log.info(
                "consumer group %s: its last consumer-protocol member %s left, converting it "
                "to a classic group",
                group.group_id,
                ", ".join(m.member_id for m in leaving),
            )
            for member in leaving[1:]:
                # The first one is left out of the classic group by the conversion.
                self._cancel_timers(group, member.member_id)
                records.extend(self._member_tombstones(group, member.member_id))
                group.remove(member.member_id)
            self._drop(group, records)
            self.downgrade(group, leaving[0].member_id, records)
            return
        for member in leaving:
            group.remove(member.member_id)
            self._cancel_timers(group, member.member_id)
            records.extend(self._member_tombstones(group, member.member_id))
        topics = self.topics()
        group.subscription_metadata = self._subscription_metadata(group, topics)
        group.topics_seen = topics
        group.group_epoch += 1
        records.append(self._epoch_record(group))
        if group.members:
            self._compute_target(group, records)

    def _can_downgrade(self, group: ConsumerGroup, leaving: list[ConsumerGroupMember]) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMembers``, for members of which
        one at least uses the consumer protocol."""
        gone = {m.member_id for m in leaving}
        remaining = [m for m in group.members.values() if m.member_id not in gone]
        return (
            self.downgrade is not None
            and any(not m.uses_classic_protocol for m in leaving)
            and bool(remaining)
            and all(m.uses_classic_protocol for m in remaining)
            and self.policy.downgrade_enabled
            and len(remaining) <= self.config.max_size
        )

    def _can_downgrade_replacing(self, group: ConsumerGroup, joined: ConsumerGroupMember) -> bool:
        """Kafka's ``validateOnlineDowngradeWithReplacedMemberId``: a classic static
        member has taken its instance id over and no member uses the consumer protocol
        any more (``joined`` already stands in its predecessor's place)."""
        return (
            self.downgrade is not None
            and joined.uses_classic_protocol
            and group.all_classic_except(joined.member_id)
            and self.policy.downgrade_enabled
            and len(group.members) <= self.config.max_size
        )

    def _drop(self, group: ConsumerGroup, records: list[Record]) -> None:
        """The group ends here (converted): its timers stop and all its records go."""
        for member_id in group.members:
            self._cancel_timers(group, member_id)
            records.extend(self._member_tombstones(group, member_id))
        records.extend(self.group_tombstones(group.group_id))
        group.deleted = True
        group_id = group.group_id
        if self.groups.get(group_id) is group:
            del self.groups[group_id]

    def _cancel_timers(self, group: ConsumerGroup, member_id: str) -> None:
        self.scheduler.cancel(self._session_key(group, member_id))
        self.scheduler.cancel(self._revoke_key(group, member_id))
        self.scheduler.cancel(("consumer-sync", group.group_id, member_id))
        self.scheduler.cancel(("consumer-join", group.group_id, member_id))
        self._join_timers.discard((group.group_id, member_id))

    # -- classic members (online migration) --------------------------------------------------
    def classic_join(self, req: JoinRequest, respond: JoinCallback) -> None:
        """JoinGroup to a non-empty consumer group (Kafka's
        ``classicGroupJoinToConsumerGroup``)."""
        group = self.groups[req.group_id]
        unknown = not req.member_id
        member_id = req.member_id or str(uuid.uuid4())
        instance = req.group_instance_id
        static_id = group.static_members.get(instance) if instance is not None else None
        known = member_id in group.members or static_id is not None
        if not known and len(group.members) >= self.config.consumer_max_size:
            respond(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id))
            return
        names = {name for name, _ in req.protocols}
        if not group.supports_classic_protocols(req.protocol_type, names):
            respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if unknown and instance is None and req.require_known_member_id:
            # KIP-394, as for classic groups: hand out the id first.
            respond(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
            return
        try:
            subscription = decode_subscription(subscription_of(list(req.protocols), None))
        except Exception:
            respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        records: list[Record] = []
        member = group.members.get(member_id)
        if instance is not None and static_id is not None and static_id != member_id:
            old = group.members[static_id]
            if not unknown:
                respond(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id))
                return
            member = self._replace_static(group, old, member_id, records)
        bump = member is None
        if member is None:
            member = ConsumerGroupMember(member_id=member_id, instance_id=instance)
            group.add(member)
        topics = self.topics()
        wanted = sorted(set(subscription.topics))
        bump |= wanted != member.subscribed_topic_names
        member.subscribed_topic_names = wanted
        member.rack_id = getattr(subscription, "rack_id", None) or member.rack_id
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host
        member.classic = ClassicMemberMetadata(req.session_timeout_ms, list(req.protocols))
        member.departed = False
        records.append(self._member_record(group, member))
        owned = {
            topics[tp.topic][0]: frozenset(tp.partitions)
            for tp in getattr(subscription, "owned_partitions", None) or []
            if tp.topic in topics
        }
        self._advance(group, member, bump, normalized(owned), records)
        if member.state is MemberState.UNREVOKED_PARTITIONS and not intersect(
            owned, member.pending_revocation
        ):
            # It says it no longer owns what it had to give up (an eager member owns
            # nothing when it rejoins): move on in the same request.
            self._reconcile(group, member, normalized(owned), records)
        if static_id is not None and self._can_downgrade_replacing(group, member):
            assert self.downgrade is not None
            log.info(
                "consumer group %s: static member %s (instance %s) replaced by a classic "
                "member, converting it to a classic group",
                group.group_id,
                static_id,
                instance,
            )
            self._drop(group, records)
            self.downgrade(group, None, records)
        result = JoinResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=req.protocols[0][0],
        )
        member_key = member.member_id
        group_id = group.group_id
        session_ms = req.session_timeout_ms
        rebalance_ms = member.rebalance_timeout_ms

        def done(code: int) -> None:
            if code:
                respond(JoinResult(code, member_id=member_key))
                return
            joined = group.members.get(member_key)
            if self.groups.get(group_id) is group and joined is not None:
                self._cancel_join_timer(group, member_key)
                self._schedule_session(group, joined, session_ms)
                self.scheduler.schedule(
                    ("consumer-sync", group_id, member_key),
                    rebalance_ms,
                    lambda: self._expire(group, member_key, "no SyncGroup within the timeout"),
                )
            respond(result)

        from odradek.coordinator.shard import StoreWrite

        self.on_write(StoreWrite(group.group_id, None, done, records=records))

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember | int:
        """Kafka's ``validateConsumerGroupMember`` plus the classic-protocol check."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
        else:
            static_id = group.static_members.get(instance_id)
            if static_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            member = group.members[static_id]
            if member_id and member.member_id != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not member.uses_classic_protocol or member.departed:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return member

    def classic_sync(self, req: SyncRequest, respond: SyncCallback) -> None:
        """SyncGroup of a classic member (Kafka's ``classicGroupSyncToConsumerGroup``):
        its current assignment, encoded in the version of its subscription."""
        group = self.groups[req.group_id]
        found = self._classic_member(group, req.member_id, req.group_instance_id)
        if isinstance(found, int):
            respond(SyncResult(found))
            return
        member = found
        assert member.classic is not None
        if req.generation_id != member.member_epoch:
            respond(SyncResult(ErrorCode.ILLEGAL_GENERATION))
            return
        protocol = member.classic.supported_protocols[0]
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            req.protocol_name is not None and req.protocol_name != protocol[0]
        ):
            respond(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if (
            group.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._schedule_join_timer(group, member)
            respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        self.scheduler.cancel(("consumer-sync", group.group_id, member.member_id))
        self._schedule_session(group, member)
        respond(
            SyncResult(
                ErrorCode.NONE,
                classic_assignment(
                    member.assigned,
                    protocol[1],
                    {tid: name for name, (tid, _n) in self.topics().items()},
                ),
                protocol_type=req.protocol_type,
                protocol_name=req.protocol_name,
            )
        )

    def classic_heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> int:
        """Heartbeat of a classic member (Kafka's ``classicGroupHeartbeatToConsumerGroup``):
        REBALANCE_IN_PROGRESS tells it to rejoin."""
        group = self.groups[group_id]
        found = self._classic_member(group, member_id, instance_id)
        if isinstance(found, int):
            return found
        member = found
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_session(group, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not self._waiting_on_unreleased(group, member)
            )
        ):
            self._schedule_join_timer(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        """Some partition of its target it does not have yet is still owned by another."""
        owners = group.owner_map(excluding=member.member_id)
        missing = minus(group.target.get(member.member_id, {}), member.assigned)
        return any((t, p) in owners for t, ps in missing.items() for p in ps)

    def classic_leave(
        self, group_id: str, leaving: Iterable[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """LeaveGroup to a consumer group (Kafka's ``classicGroupLeaveToConsumerGroup``):
        classic members leaving, or an administrator removing members of either
        protocol (``AdminClient.removeMembersFromConsumerGroup``; KAFKA-18188,
        apache/kafka#18116) by member id, or by ``group.instance.id`` alone for a static
        member (one that left with epoch -2 included). An unknown member or instance id
        answers UNKNOWN_MEMBER_ID, a member id that is not the instance's
        FENCED_INSTANCE_ID. The removed members go in one new group epoch."""
        group = self.groups[group_id]
        errors: list[int] = []
        removed: list[ConsumerGroupMember] = []
        for member_id, instance_id in leaving:
            found = self._leaving_member(group, member_id, instance_id)
            if isinstance(found, int):
                errors.append(found)
                continue
            if found not in removed:
                removed.append(found)
            errors.append(ErrorCode.NONE)
        records: list[Record] = []
        if removed:
            self._remove_members(group, removed, records)
        self._write(group, records)
        return ErrorCode.NONE, errors

    @staticmethod
    def _leaving_member(
        group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember | int:
        """The member a LeaveGroup names, or its error."""
        if instance_id is None:
            member = group.members.get(member_id)
            return ErrorCode.UNKNOWN_MEMBER_ID if member is None else member
        static_id = group.static_members.get(instance_id)
        member = group.members.get(static_id) if static_id is not None else None
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_id and member.member_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return member

    def _schedule_join_timer(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A classic member told to rejoin must within its rebalance timeout (armed once)."""
        key = (group.group_id, member.member_id)
        if key in self._join_timers:
            return
        self._join_timers.add(key)
        member_id = member.member_id
        self.scheduler.schedule(
            ("consumer-join", group.group_id, member_id),
            member.rebalance_timeout_ms,
            lambda: self._expire(group, member_id, "no JoinGroup within the rebalance timeout"),
        )

    def _cancel_join_timer(self, group: ConsumerGroup, member_id: str) -> None:
        self._join_timers.discard((group.group_id, member_id))
        self.scheduler.cancel(("consumer-join", group.group_id, member_id))

    # -- subscriptions and the target assignment -------------------------------------------
    def _subscribed_topics(
        self, member: ConsumerGroupMember, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> set[str]:
        names = {t for t in member.subscribed_topic_names if t in topics}
        pattern = member.compiled_regex()
        if pattern is not None:
            names.update(t for t in topics if pattern.fullmatch(t))
        return names

    def _subscription_metadata(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]]
    ) -> dict[str, tuple[uuid.UUID, int]]:
        names: set[str] = set()
        for m in group.members.values():
            names |= self._subscribed_topics(m, topics)
        return {n: topics[n] for n in sorted(names)}

    def _choose_assignor(self, group: ConsumerGroup) -> str:
        allowed = self._assignors()
        votes = Counter(
            m.server_assignor for m in group.members.values() if m.server_assignor in allowed
        )
        if not votes:
            return allowed[0]
        best = max(votes.values())
        return next(a for a in sorted(votes) if votes[a] == best)

    def _compute_target(self, group: ConsumerGroup, records: list[Record]) -> None:
        topics = self.topics()
        name = self._choose_assignor(group)
        spec = AssignmentSpec(
            subscriptions={
                m.member_id: frozenset(topics[t][0] for t in self._subscribed_topics(m, topics))
                for m in group.members.values()
            },
            partitions={tid: n for tid, n in topics.values()},
            current=group.target,
        )
        target = ASSIGNORS[name](spec)
        group.assignor_name = name
        for member_id, assignment in target.items():
            assignment = normalized(assignment)
            if group.target.get(member_id) != assignment:
                group.target[member_id] = assignment
                records.append(self._target_record(group, member_id, assignment))
        group.assignment_epoch = group.group_epoch
        records.append(
            (
                rec.encode_key(
                    rec.ConsumerGroupKey(
                        rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id
                    )
                ),
                rec.encode_value(
                    rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.assignment_epoch
                ),
            )
        )

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        reported: Assignment | None,
        records: list[Record],
    ) -> None:
        if (
            member.state is MemberState.STABLE
            and member.member_epoch == group.assignment_epoch
            and not member.pending_revocation
        ):
            return  # nothing to move (the common heartbeat)
        owned_by_others = set(group.owner_map(excluding=member.member_id))
        current = MemberAssignment(
            member.member_epoch,
            member.previous_member_epoch,
            member.state,
            member.assigned,
            member.pending_revocation,
        )
        target = group.target.get(member.member_id, {})
        nxt = reconcile(
            current,
            group.assignment_epoch,
            target,
            owned_by_others,
            normalized(reported) if reported is not None else None,
        )
        if nxt == current:
            return
        was_revoking = member.state is MemberState.UNREVOKED_PARTITIONS
        member.member_epoch = nxt.member_epoch
        member.previous_member_epoch = nxt.previous_member_epoch
        member.state = nxt.state
        member.assigned = nxt.assigned
        member.pending_revocation = nxt.pending_revocation
        if member.state is MemberState.UNREVOKED_PARTITIONS and not was_revoking:
            self._schedule_revoke(group, member)
        elif member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.scheduler.cancel(self._revoke_key(group, member.member_id))
        records.append(self._current_record(group, member))

    # -- timers -----------------------------------------------------------------------------
    @staticmethod
    def _session_key(group: ConsumerGroup, member_id: str) -> Hashable:
        return ("consumer-session", group.group_id, member_id)

    @staticmethod
    def _revoke_key(group: ConsumerGroup, member_id: str) -> Hashable:
        return ("consumer-revoke", group.group_id, member_id)

    def _schedule_session(
        self, group: ConsumerGroup, member: ConsumerGroupMember, timeout_ms: int | None = None
    ) -> None:
        member_id = member.member_id
        if timeout_ms is None:
            timeout_ms = (
                member.classic.session_timeout_ms
                if member.classic is not None
                else self.config.consumer_session_timeout_ms
            )
        self.scheduler.schedule(
            self._session_key(group, member_id),
            timeout_ms,
            lambda: self._expire(group, member_id, "session timeout"),
        )

    def _schedule_revoke(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        member_id = member.member_id
        self.scheduler.schedule(
            self._revoke_key(group, member_id),
            member.rebalance_timeout_ms,
            lambda: self._expire(group, member_id, "rebalance timeout while revoking"),
        )

    def _expire(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        live = self.groups.get(group.group_id)
        if live is None or live.deleted or id(live) != id(group):
            return
        member = group.members.get(member_id)
        if member is None:
            return
        log.info("member %s of consumer group %s fenced: %s", member_id, group.group_id, why)
        records: list[Record] = []
        self._remove_member(group, member, records)
        self._write(group, records)

    def _write(self, group: ConsumerGroup, records: list[Record]) -> None:
        from odradek.coordinator.shard import StoreWrite

        if records:
            self.on_write(StoreWrite(group.group_id, None, lambda _e: None, records=records))

    # -- topics changed ---------------------------------------------------------------------
    def topics_changed(self) -> None:
        """Topic created, deleted or grown: groups whose subscribed topics changed get a
        new group epoch and target now (members pick it up on their next heartbeat)."""
        topics = self.topics()
        for group in list(self.groups.values()):
            if not group.members:
                continue
            metadata = self._subscription_metadata(group, topics)
            if metadata == group.subscription_metadata:
                continue
            records: list[Record] = []
            group.subscription_metadata = metadata
            group.topics_seen = topics
            group.group_epoch += 1
            records.append(self._epoch_record(group))
            self._compute_target(group, records)
            self._write(group, records)

    # -- records ----------------------------------------------------------------------------
    @staticmethod
    def _epoch_record(group: ConsumerGroup) -> Record:
        key = rec.ConsumerGroupKey(rec.CONSUMER_GROUP_METADATA, group.group_id)
        return rec.encode_key(key), rec.encode_value(rec.CONSUMER_GROUP_METADATA, group.group_epoch)

    @staticmethod
    def _member_record(group: ConsumerGroup, m: ConsumerGroupMember) -> Record:
        key = rec.ConsumerGroupKey(rec.CONSUMER_GROUP_MEMBER_METADATA, group.group_id, m.member_id)
        value = rec.MemberMetadataValue(
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=m.server_assignor,
            classic=m.classic,
        )
        return rec.encode_key(key), rec.encode_value(rec.CONSUMER_GROUP_MEMBER_METADATA, value)

    @staticmethod
    def _target_record(group: ConsumerGroup, member_id: str, assignment: Assignment) -> Record:
        key = rec.ConsumerGroupKey(
            rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id
        )
        return rec.encode_key(key), rec.encode_value(
            rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, dict(assignment)
        )

    @staticmethod
    def _current_record(group: ConsumerGroup, m: ConsumerGroupMember) -> Record:
        key = rec.ConsumerGroupKey(
            rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, m.member_id
        )
        value = rec.CurrentAssignmentValue(
            m.member_epoch,
            m.previous_member_epoch,
            int(m.state),
            dict(m.assigned),
            dict(m.pending_revocation),
        )
        return rec.encode_key(key), rec.encode_value(
            rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, value
        )

    @staticmethod
    def _member_tombstones(group: ConsumerGroup, member_id: str) -> list[Record]:
        # Kafka's order: current assignment, target assignment, then the member.
        return [
            (rec.encode_key(rec.ConsumerGroupKey(t, group.group_id, member_id)), None)
            for t in (
                rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                rec.CONSUMER_GROUP_MEMBER_METADATA,
            )
        ]

    def group_records(self, group: ConsumerGroup) -> list[Record]:
        """Every record of a group created whole (an upgrade), in Kafka's order
        (``createConsumerGroupRecords``)."""
        records = [self._member_record(group, m) for m in group.members.values()]
        records.append(self._epoch_record(group))
        records.extend(
            self._target_record(group, member_id, target)
            for member_id, target in group.target.items()
        )
        key = rec.ConsumerGroupKey(rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.group_id)
        records.append(
            (
                rec.encode_key(key),
                rec.encode_value(
                    rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, group.assignment_epoch
                ),
            )
        )
        records.extend(self._current_record(group, m) for m in group.members.values())
        return records

    def group_tombstones(self, group_id: str) -> list[Record]:
        return [
            (rec.encode_key(rec.ConsumerGroupKey(t, group_id)), None)
            for t in (rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, rec.CONSUMER_GROUP_METADATA)
        ]

    # -- loading ----------------------------------------------------------------------------
    def load(self, records: Iterable[tuple[bytes, bytes]]) -> None:
        """Rebuild groups from the latest record of every key (what compaction keeps)."""
        for key_bytes, value_bytes in records:
            key = rec.decode_key(key_bytes)
            value = rec.decode_value(key.record_type, value_bytes)
            group = self.groups.get(key.group)
            if group is None:
                group = self.groups[key.group] = ConsumerGroup(key.group)
            t = key.record_type
            if t == rec.CONSUMER_GROUP_METADATA and isinstance(value, int):
                group.group_epoch = value
            elif t == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA and isinstance(value, int):
                group.assignment_epoch = value
            elif t == rec.CONSUMER_GROUP_MEMBER_METADATA and isinstance(
                value, rec.MemberMetadataValue
            ):
                member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
                member.instance_id = value.instance_id
                member.rack_id = value.rack_id
                member.client_id = value.client_id
                member.client_host = value.client_host
                member.subscribed_topic_names = list(value.subscribed_topic_names)
                member.subscribed_topic_regex = value.subscribed_topic_regex
                member.rebalance_timeout_ms = value.rebalance_timeout_ms
                member.server_assignor = value.server_assignor
                member.classic = value.classic
                group.add(member)
            elif t == rec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER and isinstance(value, dict):
                group.target[key.member_id] = normalized(value)
            elif t == rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT and isinstance(
                value, rec.CurrentAssignmentValue
            ):
                member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
                member.member_epoch = value.member_epoch
                member.previous_member_epoch = value.previous_member_epoch
                member.state = (
                    MemberState(value.state) if value.state in (0, 1, 2) else MemberState.UNKNOWN
                )
                member.assigned = normalized(value.assigned)
                member.pending_revocation = normalized(value.pending_revocation)
                group.members.setdefault(member.member_id, member)
        topics = self.topics()
        for group in self.groups.values():
            # Targets of members that are gone are not kept.
            for member_id in [m for m in group.target if m not in group.members]:
                del group.target[member_id]
            group.subscription_metadata = self._subscription_metadata(group, topics)
            group.assignor_name = self._choose_assignor(group) if group.members else ""
            for member in group.members.values():
                self._schedule_session(group, member)

    def unload(self) -> None:
        for group in self.groups.values():
            for member_id in group.members:
                self._cancel_timers(group, member_id)
        self.groups.clear()

    # -- describe, list, delete, offsets ---------------------------------------------------
    def describe(self, group_id: str) -> ConsumerGroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return ConsumerGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            )
        return ConsumerGroupDescription(
            group_id,
            ErrorCode.NONE,
            state=group.state(),
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name,
            members=[
                DescribedConsumerMember(
                    m.member_id,
                    m.instance_id,
                    m.rack_id,
                    # A static member that left (epoch -2) is shown so, as Kafka writes
                    # it, until it returns, is removed or its session ends.
                    LEAVE_GROUP_STATIC_MEMBER_EPOCH if m.departed else m.member_epoch,
                    m.client_id,
                    m.client_host,
                    list(m.subscribed_topic_names),
                    m.subscribed_topic_regex,
                    dict(m.assigned),
                    dict(group.target.get(m.member_id, {})),
                    classic=m.uses_classic_protocol,
                )
                for m in group.members.values()
            ],
        )

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetCommit`` (OffsetCommit v9+ semantics):
        a commit without member id and epoch is an admin commit; else the member must
        exist and the epoch must be its current one."""
        group = self.groups[group_id]
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.uses_classic_protocol and member_epoch != member.member_epoch:
            # A classic member commits with its generation (Kafka's validateMemberEpoch).
            return ErrorCode.ILLEGAL_GENERATION
        if member_epoch > member.member_epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if member_epoch < member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        self._schedule_session(group, member)
        return ErrorCode.NONE

    def validate_offset_fetch(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetFetch`` (OffsetFetch v9+): checked only
        for consumer groups and only when the request names a member."""
        group = self.groups.get(group_id)
        if group is None or (member_epoch < 0 and not member_id):
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            if member.uses_classic_protocol:
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def deletable(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def subscribed_topics(self, group_id: str) -> set[str]:
        group = self.groups.get(group_id)
        return set(group.subscription_metadata) if group is not None else set()
