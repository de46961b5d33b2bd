"""Consumer groups: state, members, committed offsets, lag, and offset resets.

Lag costs a fixed number of requests however many partitions a group has: one
FindCoordinator for all groups (v4 batches keys), one DescribeGroups and one
OffsetFetch per coordinator (v8 batches groups), and one ListOffsets(LATEST) per
leader broker for the union of their partitions. Lag is the log end offset minus the
committed offset, as ``kafka-consumer-groups.sh --describe`` prints it.

Resets follow ``kafka-consumer-groups.sh --reset-offsets``: the plan is computed
first (a dry run shows it), a target offset is clamped into [log start, log end],
a timestamp with no later record resolves to the log end, and only an inactive group
(Empty or Dead) can be reset; the commit is an OffsetCommit with generation -1 and no
member id, as Kafka's admin client sends it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

from odradek.console.offsets import EARLIEST, LATEST, OffsetResult, TopicPartition, list_offsets
from odradek.kafka_client import (
    Broker,
    KafkaClient,
    KafkaClientError,
    Message,
    check,
    error_text,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.consumer_protocol import decode_assignment
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

INACTIVE_STATES = ("Empty", "Dead")
RESET_STRATEGIES = ("earliest", "latest", "timestamp", "offset")


@dataclass
class MemberRow:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass
class OffsetRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    owner: str = ""

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None or self.log_end < 0:
            return None
        return max(0, self.log_end - self.committed)


@dataclass
class GroupRow:
    group_id: str
    state: str = "Unknown"
    protocol_type: str = ""
    protocol: str = ""
    coordinator: int = -1
    members: list[MemberRow] = field(default_factory=list)
    offsets: list[OffsetRow] = field(default_factory=list)
    error: str = ""

    @cached_property  # read once the offsets are complete (describe_groups fills them)
    def lag(self) -> int | None:
        lags = [o.lag for o in self.offsets if o.lag is not None]
        return sum(lags) if lags else None

    @property
    def topics(self) -> list[str]:
        return sorted({o.topic for o in self.offsets})


@dataclass
class ResetRow:
    topic: str
    partition: int
    current: int | None
    new: int


async def list_group_ids(client: KafkaClient) -> dict[str, tuple[str, str]]:
    """Every group on every broker: id -> (state, protocol type)."""
    if not client.brokers:
        await client.metadata(topics=[])
    cls = ListGroupsRequest
    found: dict[str, tuple[str, str]] = {}

    async def ask(node_id: int) -> None:
        response = await client.send(ApiKey.LIST_GROUPS, cls(states_filter=[]), node_id)
        check(response.error_code)
        for g in response.groups:
            found[g.group_id] = (g.group_state or "", g.protocol_type or "")

    await asyncio.gather(*(ask(n) for n in sorted(client.brokers)))
    return found


async def find_coordinators(client: KafkaClient, group_ids: list[str]) -> dict[str, int]:
    if not group_ids:
        return {}
    cls = FindCoordinatorRequest
    version = await client.version_for(ApiKey.FIND_COORDINATOR)
    out: dict[str, int] = {}
    if version >= 4:
        response = await client.send(
            ApiKey.FIND_COORDINATOR, cls(key_type=0, coordinator_keys=group_ids)
        )
        for c in response.coordinators:
            check(c.error_code, c.error_message)
            _remember(client, c.node_id, c.host, c.port)
            out[c.key] = c.node_id
        return out
    for group_id in group_ids:
        response = await client.send(ApiKey.FIND_COORDINATOR, cls(key=group_id, key_type=0))
        check(response.error_code, response.error_message)
        _remember(client, response.node_id, response.host, response.port)
        out[group_id] = response.node_id
    return out


def _remember(client: KafkaClient, node_id: int, host: str, port: int) -> None:
    if node_id not in client.brokers:
        client.brokers[node_id] = Broker(node_id, host, port)


def _assignment(payload: bytes | None) -> list[TopicPartition]:
    if not payload:
        return []
    try:
        decoded = decode_assignment(payload)
    except Exception:  # another protocol type (connect, a custom assignor): nothing to show
        return []
    return sorted((tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions)


async def describe_groups(
    client: KafkaClient,
    group_ids: list[str],
    *,
    with_lag: bool = True,
    expected: set[TopicPartition] | None = None,
) -> list[GroupRow]:
    """Groups with members, committed offsets and lag (a fixed number of requests).

    ``expected``: the partitions these groups had last time. Their log end offsets are
    then asked for at once, alongside the group requests instead of after them (one
    round trip less); partitions the groups gained since are asked for afterwards."""
    early = (
        asyncio.ensure_future(list_offsets(client, dict.fromkeys(expected, LATEST)))
        if with_lag and expected
        else None
    )
    try:
        return await _describe_groups(client, group_ids, with_lag, early, expected or set())
    finally:
        if early is not None:
            if not early.done():
                early.cancel()
            elif not early.cancelled():
                early.exception()  # retrieved: a failure there was raised by the await


async def _describe_groups(
    client: KafkaClient,
    group_ids: list[str],
    with_lag: bool,
    early: asyncio.Future[dict[TopicPartition, OffsetResult]] | None,
    expected: set[TopicPartition],
) -> list[GroupRow]:
    coordinators = await find_coordinators(client, group_ids)
    by_coordinator: dict[int, list[str]] = defaultdict(list)
    for g, node in coordinators.items():
        by_coordinator[node].append(g)
    rows = {g: GroupRow(g, coordinator=coordinators.get(g, -1)) for g in group_ids}
    describe_cls = DescribeGroupsRequest
    fetch_cls = OffsetFetchRequest
    committed: dict[str, dict[TopicPartition, int]] = defaultdict(dict)

    async def fetch_offsets(node: int, groups: list[str]) -> list[tuple[str, int, Message]]:
        version = await client.version_for(ApiKey.OFFSET_FETCH, node)
        if version >= 8:
            fetched = await client.send(
                ApiKey.OFFSET_FETCH,
                fetch_cls(
                    groups=[
                        fetch_cls.OffsetFetchRequestGroup(group_id=g, topics=None) for g in groups
                    ],
                    require_stable=False,
                ),
                node,
            )
            return [(g.group_id, g.error_code, g.topics) for g in fetched.groups]
        results = []  # one group per request on old brokers
        for g in groups:
            r = await client.send(ApiKey.OFFSET_FETCH, fetch_cls(group_id=g, topics=None), node)
            results.append((g, r.error_code, r.topics))
        return results

    async def ask(node: int, groups: list[str]) -> None:
        # DescribeGroups and OffsetFetch go out together (one round trip, pipelined).
        described, results = await asyncio.gather(
            client.send(
                ApiKey.DESCRIBE_GROUPS,
                describe_cls(groups=groups, include_authorized_operations=False),
                node,
            ),
            fetch_offsets(node, groups),
        )
        for d in described.groups:
            row = rows[d.group_id]
            if d.error_code:
                row.error = error_text(d.error_code)
                continue
            row.state, row.protocol_type, row.protocol = (
                d.group_state,
                d.protocol_type,
                d.protocol_data,
            )
            for m in d.members:
                assignment = (
                    _assignment(m.member_assignment) if d.protocol_type == "consumer" else []
                )
                row.members.append(
                    MemberRow(
                        m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment
                    )
                )
        for group_id, code, topics in results:
            if code:
                rows[group_id].error = error_text(code)
                continue
            for t in topics:
                for p in t.partitions:
                    if not p.error_code and p.committed_offset >= 0:
                        committed[group_id][(t.name, p.partition_index)] = p.committed_offset

    await asyncio.gather(*(ask(node, groups) for node, groups in by_coordinator.items()))
    wanted: set[TopicPartition] = set()
    for row in rows.values():
        owners = {tp: m.member_id for m in row.members for tp in m.assignment}
        tps = sorted(set(committed[row.group_id]) | set(owners))
        row.offsets = [
            OffsetRow(t, p, committed[row.group_id].get((t, p)), None, owners.get((t, p), ""))
            for t, p in tps
        ]
        wanted.update(tps)
    if with_lag and wanted:
        ends = dict(await early) if early is not None else {}
        missing = wanted - expected if early is not None else wanted
        if missing:
            ends.update(await list_offsets(client, dict.fromkeys(missing, LATEST)))
        for row in rows.values():
            for o in row.offsets:
                end = ends.get((o.topic, o.partition))
                o.log_end = end.offset if end is not None and not end.error else None
    return [rows[g] for g in group_ids]


async def describe_group(client: KafkaClient, group_id: str) -> GroupRow:
    return (await describe_groups(client, [group_id]))[0]


async def plan_reset(
    client: KafkaClient,
    group: GroupRow,
    strategy: str,
    value: str,
    topic: str | None,
) -> list[ResetRow]:
    """The offsets a reset would commit, computed as kafka-consumer-groups.sh does."""
    if strategy not in RESET_STRATEGIES:
        raise KafkaClientError(f"Unknown reset strategy {strategy!r}", ErrorCode.INVALID_REQUEST)
    current = {(o.topic, o.partition): o.committed for o in group.offsets}
    if topic:
        t = await client.topic(topic)
        tps = [
            (topic, p.partition_index)
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ]
    else:
        tps = sorted(current)
    if not tps:
        raise KafkaClientError(
            f"Consumer group '{group.group_id}' has no committed offsets; name a topic",
            ErrorCode.INVALID_REQUEST,
        )
    starts = await list_offsets(client, dict.fromkeys(tps, EARLIEST))
    ends = await list_offsets(client, dict.fromkeys(tps, LATEST))
    for tp in tps:
        for found in (starts[tp], ends[tp]):
            if found.error:
                raise KafkaClientError(f"{tp[0]}-{tp[1]}: {found.error}")
    if strategy == "earliest":
        new = {tp: starts[tp].offset for tp in tps}
    elif strategy == "latest":
        new = {tp: ends[tp].offset for tp in tps}
    elif strategy == "offset":
        target = _parse_int(value, "offset")
        new = {tp: min(max(target, starts[tp].offset), ends[tp].offset) for tp in tps}
    else:
        when = _parse_int(value, "timestamp")
        at = await list_offsets(client, dict.fromkeys(tps, when))
        new = {}
        for tp in tps:
            if at[tp].error:
                raise KafkaClientError(f"{tp[0]}-{tp[1]}: {at[tp].error}")
            new[tp] = at[tp].offset if at[tp].offset >= 0 else ends[tp].offset
    return [ResetRow(t, p, current.get((t, p)), new[(t, p)]) for t, p in tps]


def _parse_int(value: str, what: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise KafkaClientError(
            f"Invalid {what} {value!r}: expected an integer", ErrorCode.INVALID_REQUEST
        ) from None
    if number < 0:
        raise KafkaClientError(
            f"Invalid {what} {number}: must not be negative", ErrorCode.INVALID_REQUEST
        )
    return number


def require_inactive(group: GroupRow) -> None:
    if group.state not in INACTIVE_STATES:
        raise KafkaClientError(
            f"Assignments can only be reset if the group '{group.group_id}' is inactive, "
            f"but the current state is {group.state}.",
            ErrorCode.NON_EMPTY_GROUP,
        )


async def execute_reset(client: KafkaClient, group: GroupRow, plan: list[ResetRow]) -> None:
    require_inactive(group)
    coordinator = (await find_coordinators(client, [group.group_id]))[group.group_id]
    cls = OffsetCommitRequest
    by_topic: dict[str, list[ResetRow]] = defaultdict(list)
    for row in plan:
        by_topic[row.topic].append(row)
    request = cls(
        group_id=group.group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            cls.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                        partition_index=r.partition,
                        committed_offset=r.new,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for r in rows
                ],
            )
            for topic, rows in by_topic.items()
        ],
    )
    response = await client.send(ApiKey.OFFSET_COMMIT, request, coordinator)
    for t in response.topics:
        for p in t.partitions:
            check(p.error_code)


async def delete_group(client: KafkaClient, group_id: str) -> None:
    coordinator = (await find_coordinators(client, [group_id]))[group_id]
    cls = DeleteGroupsRequest
    response = await client.send(ApiKey.DELETE_GROUPS, cls(groups_names=[group_id]), coordinator)
    for r in response.results:
        check(r.error_code)
