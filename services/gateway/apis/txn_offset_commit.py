"""TxnOffsetCommit (key 28), versions 0-4: a transactional producer's offset commit.

Checked by the group's coordinator and written by the offset store as for
OffsetCommit (:mod:`odradek.gateway.apis.offset_commit`), but as a transactional
batch of the producer (``CommitOffsets`` with ``transactional``): the offsets stay
**pending**, invisible to OffsetFetch (which answers UNSTABLE_OFFSET_COMMIT to
``require_stable`` readers) until the transaction's COMMIT marker lands in
``__consumer_offsets``; an ABORT marker drops them. The storage leader verifies the
write against the transaction coordinator (KIP-890), so offsets for a partition not
added by AddOffsetsToTxn are refused.

Partitions of unknown topics or partitions answer UNKNOWN_TOPIC_OR_PARTITION and are
not forwarded; an empty group id is INVALID_GROUP_ID (Kafka's KafkaApis and
GroupCoordinatorService). v3+ carry the member id, generation and group instance id,
checked as KIP-447 says (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID);
v0-v2 (and generation -1) skip the member checks. Versions below 2 get
COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS, versions below 4
INVALID_TXN_STATE for TRANSACTION_ABORTABLE. Deviation: v5 (KIP-890 part 2, no
AddOffsetsToTxn) is not served. Commits of one connection are forwarded one after
another, as for OffsetCommit.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.offset_commits import (
    PartitionErrors,
    add_partitions,
    commit,
    partition_answers,
)
from odradek.gateway.txn_routing import for_version
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from odradek.rpc.v1 import offsets_pb2

API_KEY = ApiKey.TXN_OFFSET_COMMIT

TopicResp = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartResp = TopicResp.TxnOffsetCommitResponsePartition


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    # KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, READ on the
    # group, READ on each topic.
    authz = gw.authorizer
    refused: int | None = None
    if not authz.allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authz.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
    denied = authz.denied(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    original = list(request.topics)
    pre = {
        (t.name, p.partition_index): int(
            refused if refused is not None else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
        for t in original
        for p in t.partitions
        if refused is not None or t.name in denied
    }
    errors: PartitionErrors = {}
    request.topics = [t for t in original if refused is None and t.name not in denied]
    try:
        if request.topics or not pre:
            async with ctx.lanes.lane(API_KEY):
                errors = await _commit(gw, header.api_version, request)
    finally:
        request.topics = original
    errors.update(pre)
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=partition_answers(
            request.topics,
            errors,
            TopicResp,
            PartResp,
            for_client=lambda code: _for_version(code, header.api_version),
        ),
    )


def _for_version(error: int, version: int) -> int:
    if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < 2:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return for_version(error, version, fenced_since=0, abortable_since=4)


async def _commit(gw: GatewayApi, version: int, request: TxnOffsetCommitRequest) -> PartitionErrors:
    if not request.group_id:
        return {
            (t.name, p.partition_index): ErrorCode.INVALID_GROUP_ID
            for t in request.topics
            for p in t.partitions
        }
    call = offsets_pb2.CommitOffsetsRequest(
        group_id=request.group_id,
        generation_id=request.generation_id if version >= 3 else -1,
        member_id=request.member_id if version >= 3 else "",
        retention_time_ms=-1,
        transactional=True,
        transactional_id=request.transactional_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
    )
    if version >= 3 and request.group_instance_id is not None:
        call.group_instance_id = request.group_instance_id
    errors = add_partitions(call, request.topics, gw.metadata.current, version >= 2)
    await commit(gw.groups, call, errors)
    return errors
