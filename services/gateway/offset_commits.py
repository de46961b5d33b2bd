"""What OffsetCommit and TxnOffsetCommit share: one ``CommitOffsets`` call to the
group's coordinator, and the per-partition errors that answer it (OffsetDelete
answers its partitions the same way, :func:`partition_answers`).

Partitions the cluster does not know answer UNKNOWN_TOPIC_OR_PARTITION and are not
forwarded, as Kafka's ``KafkaApis.handleOffsetCommitRequest`` does; the coordinator's
top-level error (or NOT_COORDINATOR when it cannot be reached) stands for every
partition sent.
"""

from __future__ import annotations

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


def add_partitions(
    call: offsets_pb2.CommitOffsetsRequest,
    topics: Iterable[CommittedTopic],
    snapshot: Snapshot,
    with_leader_epoch: bool,
    denied: Collection[str] = frozenset(),
    denied_code: int = ErrorCode.NONE,
) -> PartitionErrors:
    """Add every requested partition the cluster knows to ``call``; the errors of the
    others. ``with_leader_epoch``: the request version carries committed leader epochs;
    topics in ``denied`` (the authorizer's refusals) answer ``denied_code``."""
    errors: PartitionErrors = {}
    for topic in topics:
        for p in topic.partitions:
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
) -> list[TopicAnswerT]:
    """The response's topics: each requested partition with its error from ``errors``
    (``missing`` when it has none), as ``for_client`` shows it to the request's version."""
    return [
        topic_answer(
            name=topic.name,
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
