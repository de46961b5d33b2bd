"""What OffsetCommit and TxnOffsetCommit share: one ``CommitOffsets`` call to the
group's coordinator, and the per-partition errors that answer it (OffsetDelete
answers its partitions the same way, :func:`partition_answers`).

Partitions the cluster does not know answer UNKNOWN_TOPIC_OR_PARTITION and are not
forwarded, as Kafka's ``KafkaApis.handleOffsetCommitRequest`` does; the coordinator's
top-level error (or NOT_COORDINATOR when it cannot be reached) stands for every
partition sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Protocol, TypeVar

from odradek.gateway.group_routing import GroupRouter
from odradek.metadata_cache import Snapshot
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import OffsetCommitRequest, TxnOffsetCommitRequest
from odradek.rpc.v1 import offsets_pb2

PartitionErrors = dict[tuple[str, int], int]
TopicAnswerT = TypeVar("TopicAnswerT")


# The topics of an OffsetCommit or a TxnOffsetCommit request (same partition fields).
CommittedTopic = (
    OffsetCommitRequest.OffsetCommitRequestTopic
    | TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
)


def name_topics_by_id(topics: Sequence[CommittedTopic], snapshot: Snapshot) -> None:
    """OffsetCommit v10 names topics by id (KIP-848): fill each topic's name from the
    cluster's metadata; an id nobody knows keeps the empty name, and
    :func:`add_partitions` answers its partitions UNKNOWN_TOPIC_ID."""
    for topic in topics:
        topic_id = getattr(topic, "topic_id", None)
        known = (
            snapshot.topics_by_id.get(topic_id.bytes) if isinstance(topic_id, uuid.UUID) else None
        )
        topic.name = known.name if known is not None else ""


def add_partitions(
    call: offsets_pb2.CommitOffsetsRequest,
    topics: Iterable[CommittedTopic],
    snapshot: Snapshot,
    with_leader_epoch: bool,
    denied: Collection[str] = frozenset(),
    denied_code: int = ErrorCode.NONE,
    *,
    by_id: bool = False,
) -> PartitionErrors:
    """Add every requested partition the cluster knows to ``call``; the errors of the
    others. ``with_leader_epoch``: the request version carries committed leader epochs;
    topics in ``denied`` (the authorizer's refusals) answer ``denied_code``; ``by_id``:
    the topics were named by id (:func:`name_topics_by_id`)."""
    errors: PartitionErrors = {}
    for topic in topics:
        for p in topic.partitions:
            if by_id and not topic.name:
                # v10: a topic id the cluster does not know (Kafka's UNKNOWN_TOPIC_ID).
                errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if topic.name in denied:
                errors[(topic.name, p.partition_index)] = denied_code
                continue
            if snapshot.partition(topic.name, p.partition_index) is None:
                errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            entry = call.partitions.add(
                topic=topic.name,
                partition=p.partition_index,
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if with_leader_epoch else -1,
            )
            if p.committed_metadata is not None:
                entry.metadata = p.committed_metadata
    return errors


async def commit(
    groups: GroupRouter, call: offsets_pb2.CommitOffsetsRequest, errors: PartitionErrors
) -> None:
    """Send ``call`` (when it holds any partition) and record each sent partition's
    error in ``errors``."""
    if not call.partitions:
        return
    answer = await groups.call(call.group_id, lambda s: s.CommitOffsets, call)
    response = (
        offsets_pb2.CommitOffsetsResponse(error_code=answer) if isinstance(answer, int) else answer
    )
    if not response.error_code:
        for pe in response.partitions:
            errors[(pe.topic, pe.partition)] = pe.error_code
    for sent in call.partitions:
        errors.setdefault((sent.topic, sent.partition), response.error_code)


class _RequestedPartition(Protocol):
    @property
    def partition_index(self) -> int: ...


class RequestedTopic(Protocol):
    """A topic of an OffsetCommit, TxnOffsetCommit or OffsetDelete request."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[_RequestedPartition]: ...


def partition_answers(
    topics: Iterable[RequestedTopic],
    errors: PartitionErrors,
    topic_answer: Callable[..., TopicAnswerT],
    partition_answer: Callable[..., object],
    *,
    missing: int = ErrorCode.NONE,
    for_client: Callable[[int], int] = int,
    with_topic_ids: bool = False,
) -> list[TopicAnswerT]:
    """The response's topics: each requested partition with its error from ``errors``
    (``missing`` when it has none), as ``for_client`` shows it to the request's version;
    ``with_topic_ids``: each topic answers with the id it was named by (OffsetCommit v10)."""
    return [
        topic_answer(
            name=topic.name,
            **({"topic_id": getattr(topic, "topic_id", None)} if with_topic_ids else {}),
            partitions=[
                partition_answer(
                    partition_index=p.partition_index,
                    error_code=for_client(errors.get((topic.name, p.partition_index), missing)),
                )
                for p in topic.partitions
            ],
        )
        for topic in topics
    ]
