"""The mirror instance as a member of its group (``mirror.group.id``) on the target.

Instances with the same ``mirror.group.id`` split the work through Kafka's classic
group protocol, served by any Kafka-compatible coordinator (Odradek's included):
JoinGroup with protocol type ``consumer`` and the subscription of Kafka's
``ConsumerProtocol`` (the target topics this instance mirrors and the partitions it
owns), SyncGroup with the leader's plan (:func:`odradek.mirror.assignor.assign`),
Heartbeat every ``heartbeat.interval.ms``, LeaveGroup on a clean stop. Because the
payloads are the consumer's, ``odradek groups describe --group <mirror.group.id>``
(or ``kafka-consumer-groups --describe --members --verbose``) shows which instance
copies which partitions.

Rebalancing is incremental cooperative (KIP-429): partitions an instance keeps are
copied on through a rebalance; one it loses is first stopped and its position
committed (:attr:`on_revoked`), then the instance rejoins so that the next
generation hands it to another. A member whose session has run out (no successful
heartbeat for ``session.timeout.ms``), or whom the coordinator no longer knows,
stops everything it owns without committing (``lost``, Kafka's
``onPartitionsLost``): another instance owns those partitions now. A killed instance
is removed by the coordinator when its session expires, and the next generation
gives its partitions to the others, which resume from the committed positions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.mirror import wire
from odradek.mirror.assignor import Member, TopicPartition, assign
from odradek.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.exceptions import InvalidRequestError

log = logging.getLogger(__name__)

# The assignor's name in JoinGroup (members of one group must share one).
ASSIGNOR = "odradek-mirror-cooperative"
BACKOFF_S = (0.1, 0.5, 1.0, 2.0)
# Answers after which this member's partitions belong to someone else.
FENCED = frozenset(
    {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}
)
COORDINATOR_MOVED = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION}
)

PartitionsCallback = Callable[[set[TopicPartition]], Awaitable[None]]
RevokedCallback = Callable[[set[TopicPartition], bool], Awaitable[None]]


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        out.setdefault(topic, []).append(partition)
    return out


class GroupMembership:
    """One asyncio task owning this instance's membership: generation, member id and
    the partitions assigned to it."""

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        on_assigned: PartitionsCallback,
        on_revoked: RevokedCallback,
    ) -> None:
        # A client of its own: the coordinator holds a JoinGroup for a whole rebalance,
        # and a connection answers in order, so no other request may wait behind it.
        self.client = client
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.member_id = ""
        self.generation = -1
        self.leader = False
        self.assigned: set[TopicPartition] = set()
        self.topics: frozenset[str] = frozenset()
        self.counts: dict[str, int] = {}
        self.rebalances = 0
        self.joined = asyncio.Event()  # set by the first completed rebalance
        self._coordinator: int | None = None
        self._rejoin = asyncio.Event()
        self._subscribed = asyncio.Event()
        self._last_ok = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    # -- what this instance mirrors ----------------------------------------------------
    def subscribe(self, counts: dict[str, int]) -> None:
        """The target topics this instance mirrors, with their partition counts; a
        change (a topic selected, or partitions added) makes the group rebalance."""
        if counts == self.counts and self._subscribed.is_set():
            return
        self.counts = dict(counts)
        self.topics = frozenset(counts)
        self._subscribed.set()
        self._rejoin.set()

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Join the group (once; later calls do nothing)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="mirror-group")

    async def stop(self) -> None:
        """Stop taking part; the caller has stopped and committed its partitions."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def leave(self) -> None:
        """LeaveGroup: the others take this member's partitions over at once."""
        if not self.member_id:
            return
        with contextlib.suppress(KafkaClientError, OSError):
            await wire.leave_group(
                self.client, await self.coordinator(), self.group_id, self.member_id
            )
        self.member_id, self.generation, self.assigned = "", -1, set()

    async def coordinator(self) -> int:
        if self._coordinator is None:
            self._coordinator = await wire.find_coordinator(self.client, self.group_id)
        return self._coordinator

    # -- the member's loop ---------------------------------------------------------------
    async def _run(self) -> None:
        await self._subscribed.wait()
        failures = 0
        while True:
            try:
                self._rejoin.clear()
                await self._join_and_sync()
                failures = 0
                await self._heartbeat_until_rejoin()
                continue
            except asyncio.CancelledError:
                raise
            except (KafkaClientError, OSError, InvalidRequestError) as exc:
                code = getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
                if code == ErrorCode.REBALANCE_IN_PROGRESS:
                    continue  # rejoin at once
                log.warning("group %s: %s", self.group_id, exc)
                if code in COORDINATOR_MOVED:
                    self._coordinator = None
                if code in FENCED:
                    await self._lose(f"{ErrorCode(code).name}")
                    if code == ErrorCode.UNKNOWN_MEMBER_ID:
                        self.member_id = ""
            if self._session_expired():
                await self._lose("no heartbeat answered within session.timeout.ms")
            await asyncio.sleep(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])
            failures += 1

    def _session_expired(self) -> bool:
        return time.monotonic() - self._last_ok > self.session_timeout_ms / 1000.0

    async def _lose(self, why: str) -> None:
        """The partitions are someone else's now: stop them without committing."""
        self.generation = -1
        if self.assigned:
            lost, self.assigned = self.assigned, set()
            log.warning("group %s: %d partitions lost (%s)", self.group_id, len(lost), why)
            await self.on_revoked(lost, True)

    async def _join_and_sync(self) -> None:
        coordinator = await self.coordinator()
        metadata = encode_subscription(
            sorted(self.topics),
            owned_partitions=_by_topic(self.assigned),
            generation_id=self.generation,
            version=2,
        )
        while True:
            joined = await wire.join_group(
                self.client,
                coordinator,
                self.group_id,
                self.member_id,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols={ASSIGNOR: metadata},
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
            )
            if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394
                self.member_id = joined.member_id
                continue
            if joined.error_code:
                raise KafkaClientError(
                    f"JoinGroup: {ErrorCode(joined.error_code).name}", joined.error_code
                )
            break
        self.member_id = joined.member_id
        self.leader = joined.leader == joined.member_id
        plan: dict[str, bytes] = {}
        if self.leader:
            plan = await self._plan(joined.members)
        code, payload = await wire.sync_group(
            self.client,
            coordinator,
            self.group_id,
            joined.generation,
            self.member_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=joined.protocol_name or ASSIGNOR,
            assignments=plan,
            timeout_s=self.rebalance_timeout_ms / 1000.0 + 5.0,
        )
        if code:
            raise KafkaClientError(f"SyncGroup: {ErrorCode(code).name}", code)
        self._last_ok = time.monotonic()
        self.generation = joined.generation
        self.rebalances += 1
        self.joined.set()
        assignment = decode_assignment(payload)
        new = {(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions}
        revoked, added = self.assigned - new, new - self.assigned
        log.info(
            "group %s generation %d: %d partitions (%d added, %d revoked)%s",
            self.group_id,
            self.generation,
            len(new),
            len(added),
            len(revoked),
            " as leader" if self.leader else "",
        )
        if revoked:
            self.assigned -= revoked  # first: nothing may restart them meanwhile
            await self.on_revoked(revoked, False)
            self._rejoin.set()  # cooperative: the next generation hands them to others
        if added:
            self.assigned |= added
            await self.on_assigned(added)

    async def _plan(self, members: dict[str, bytes]) -> dict[str, bytes]:
        """The leader's assignment of every member's subscribed partitions."""
        subscriptions: dict[str, Member] = {}
        for member_id, metadata in members.items():
            sub = decode_subscription(metadata)
            subscriptions[member_id] = Member(
                frozenset(sub.topics),
                frozenset((t.topic, p) for t in (sub.owned_partitions or []) for p in t.partitions),
                getattr(sub, "generation_id", -1),
            )
        topics = sorted(set().union(*(m.topics for m in subscriptions.values())))
        counts = dict(self.counts)
        unknown = [t for t in topics if t not in counts]
        if unknown:  # topics other instances mirror and this one does not (yet)
            response = await self.client.metadata(unknown)
            for t in response.topics:
                if not t.error_code and t.partitions:
                    counts[t.name] = len(t.partitions)
        plan = assign(subscriptions, counts)
        return {m: encode_assignment(_by_topic(tps)) for m, tps in plan.items()}

    async def _heartbeat_until_rejoin(self) -> None:
        """Heartbeats until the group rebalances or this member must rejoin."""
        interval = self.heartbeat_interval_ms / 1000.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rejoin.wait(), interval)
                return
            code = await wire.heartbeat(
                self.client,
                await self.coordinator(),
                self.group_id,
                self.generation,
                self.member_id,
            )
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self._last_ok = time.monotonic()
                return
            if code:
                raise KafkaClientError(f"Heartbeat: {ErrorCode(code).name}", code)
            self._last_ok = time.monotonic()


__all__ = ["ASSIGNOR", "GroupMembership"]
