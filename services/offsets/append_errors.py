"""Storage errors of an append to ``__consumer_offsets`` as Kafka's group coordinator
reports them to clients (``GroupMetadataManager``'s mapping)."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode


def map_append_error(code: int, *, for_group: bool = False) -> int:
    """Storage errors as Kafka's group coordinator reports them to clients."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.LEADER_NOT_AVAILABLE,
    ):
        return ErrorCode.NOT_COORDINATOR
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS if for_group else ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR if for_group else ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code
