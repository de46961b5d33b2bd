"""Partition offsets in bulk: one ListOffsets request per leader broker, never per partition.

``LATEST`` (-1) is the log end offset a consumer's lag is measured against (the high
watermark under read_uncommitted), ``EARLIEST`` (-2) the log start offset, any other
value a timestamp: the first offset whose record timestamp is at or after it (-1 when
none is), as Kafka's ``ListOffsets`` defines it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.kafka_client import KafkaClient, KafkaClientError, Message, error_text
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import ListOffsetsRequest

LATEST = -1
EARLIEST = -2

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetResult:
    offset: int
    timestamp: int = -1
    error: str = ""
    code: int = 0


# Errors after which the leader is looked up again and the partition asked once more.
STALE_LEADER = {3, 5, 6, 74, 75}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
# NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH


async def list_offsets(
    client: KafkaClient,
    specs: dict[TopicPartition, int],
    metadata: Message | None = None,
    *,
    leaders: dict[TopicPartition, int] | None = None,
) -> dict[TopicPartition, OffsetResult]:
    """``specs`` maps partitions to LATEST, EARLIEST or a timestamp (ms).

    Leaders come from ``leaders`` or ``metadata`` when given, else from the client's
    last Metadata answers (asking only for topics it has not seen); partitions whose
    leader moved are retried once after a refresh."""
    if not specs:
        return {}
    if leaders is not None:
        leader_of = leaders
    elif metadata is not None:
        leader_of = {
            (t.name, p.partition_index): p.leader_id
            for t in metadata.topics
            for p in t.partitions
            if not t.error_code
        }
    else:
        leader_of = await client.leaders_for(specs)
    out = await _ask_leaders(client, specs, leader_of)
    stale = {tp: specs[tp] for tp, r in out.items() if r.code in STALE_LEADER}
    if stale:
        out.update(await _ask_leaders(client, stale, await client.leaders_for(stale, refresh=True)))
    return out


async def _ask_leaders(
    client: KafkaClient, specs: dict[TopicPartition, int], leader_of: dict[TopicPartition, int]
) -> dict[TopicPartition, OffsetResult]:
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    out: dict[TopicPartition, OffsetResult] = {}
    for tp in specs:
        leader = leader_of.get(tp, -1)
        if leader < 0:
            code = 5 if tp in leader_of else 3
            out[tp] = OffsetResult(-1, error=error_text(code), code=code)
        else:
            by_leader[leader].append(tp)
    cls = ListOffsetsRequest

    async def ask(leader: int, tps: list[TopicPartition]) -> None:
        topics: dict[str, list[Message]] = defaultdict(list)
        for topic, partition in tps:
            topics[topic].append(
                cls.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition,
                    current_leader_epoch=-1,
                    timestamp=specs[(topic, partition)],
                )
            )
        request = cls(
            replica_id=-1,
            isolation_level=0,
            topics=[cls.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        try:
            response = await client.send(ApiKey.LIST_OFFSETS, request, leader)
        except KafkaClientError as exc:
            for tp in tps:
                out[tp] = OffsetResult(-1, error=exc.message, code=exc.code)
            return
        for t in response.topics:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = OffsetResult(
                    p.offset if not p.error_code else -1,
                    p.timestamp,
                    error_text(p.error_code) if p.error_code else "",
                    p.error_code,
                )

    await asyncio.gather(*(ask(leader, tps) for leader, tps in by_leader.items()))
    return out


def partitions_of(metadata: Message, topics: Iterable[str] | None = None) -> list[TopicPartition]:
    wanted = None if topics is None else set(topics)
    return [
        (t.name, p.partition_index)
        for t in metadata.topics
        if not t.error_code and (wanted is None or t.name in wanted)
        for p in t.partitions
    ]
