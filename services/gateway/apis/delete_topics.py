"""DeleteTopics (key 20), versions 0-6.

Forwarded to the controller. v0-v5 name topics; v6 names each by name or by topic
id (the answer then carries both, and a null name for an unknown id). Rows are
checked the way KRaft's ``ControllerApis.deleteTopics`` does, with its messages:
neither name nor id, both, a duplicate name or id, a name whose id another row
already names: INVALID_REQUEST. An unknown name is UNKNOWN_TOPIC_OR_PARTITION, an
unknown id UNKNOWN_TOPIC_ID. ``delete.topic.enable=false`` answers
TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, which has no such code).
Error messages are sent from v5.

``timeout_ms``: once the controller deleted the topics we wait, bounded by it,
until this gateway's metadata no longer shows them; running out of time is not an
error (KRaft answers after the controller's commit).
``controller_mutation_rate`` (KIP-599, odradek.gateway.throttling) counts the deleted
partitions; from v5 a topic over the quota gets THROTTLING_QUOTA_EXCEEDED.
Deviation: internal topics cannot be deleted (INVALID_REQUEST from the controller).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import (
    AdminDeadline,
    ControllerFailure,
    call_controller,
    message_or_none,
    wait_visible,
)
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.throttling import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from odradek.rpc.v1 import controller_pb2

API_KEY = ApiKey.DELETE_TOPICS

Result = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = uuid.UUID(int=0)

UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID_MESSAGE = "This server does not host this topic ID."


@dataclass
class _Row:
    name: str | None
    topic_id: uuid.UUID
    error_code: int = 0
    message: str | None = None

    def fail(self, code: int, message: str | None) -> None:
        self.error_code, self.message = code, message


def _rows(
    request: DeleteTopicsRequest, version: int, snap: Snapshot
) -> tuple[list[_Row], list[_Row], list[_Row]]:
    """(every row in answer order, rows to delete by name, rows to delete by id)."""
    given: list[tuple[str | None, uuid.UUID]]
    if version < 6:
        given = [(name, ZERO_UUID) for name in request.topic_names]
    else:
        given = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    names = Counter(n for n, tid in given if n is not None and tid == ZERO_UUID)
    ids = Counter(tid for n, tid in given if n is None and tid != ZERO_UUID)
    rows: list[_Row] = []
    by_name: list[_Row] = []
    by_id: list[_Row] = []
    reported: set[str | uuid.UUID] = set()
    for name, tid in given:
        row = _Row(name, tid)
        if name is None and tid == ZERO_UUID:
            row.fail(ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
        elif name is not None and tid != ZERO_UUID:
            row.fail(ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
        elif name is not None:
            if name in reported:
                continue
            if names[name] > 1:
                reported.add(name)
                row.fail(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            else:
                by_name.append(row)
        else:
            if tid in reported:
                continue
            if ids[tid] > 1:
                reported.add(tid)
                row.fail(ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
            else:
                by_id.append(row)
        rows.append(row)
    # A name that resolves to an id another row already names.
    wanted_ids = {row.topic_id.bytes for row in by_id}
    for row in list(by_name):
        topic = snap.topics.get(row.name or "")
        if topic is not None and bytes(topic.topic_id) in wanted_ids:
            row.topic_id = uuid.UUID(bytes=bytes(topic.topic_id))
            row.fail(
                ErrorCode.INVALID_REQUEST,
                "The provided topic name maps to an ID that was already supplied.",
            )
            by_name.remove(row)
    return rows, by_name, by_id


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    version = header.api_version
    deadline = AdminDeadline(gw, request.timeout_ms)
    snap = gw.metadata.current
    rows, by_name, by_id = _rows(request, version, snap)
    # KafkaApis.handleDeleteTopicsRequest: DELETE on each topic.
    for row in [*by_name, *by_id]:
        found = snap.topics_by_id.get(row.topic_id.bytes) if row.name is None else None
        name = row.name if row.name is not None else (found.name if found else None)
        if name is not None and not gw.authorizer.allowed(
            ctx, AclOperation.DELETE, ResourceType.TOPIC, name
        ):
            row.fail(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    # controller_mutation_rate (KIP-599): the partitions of each topic deleted.
    quota = MutationQuota(gw.quotas, ctx, header, strict_since=5)
    taken: dict[int, int] = {}
    for row in [*by_name, *by_id]:
        if row.error_code:
            continue
        found = (
            snap.topics.get(row.name)
            if row.name is not None
            else snap.topics_by_id.get(row.topic_id.bytes)
        )
        partitions = len(found.partitions) if found is not None else 0
        if not quota.admit(partitions):
            row.fail(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        else:
            taken[id(row)] = partitions
    by_name = [row for row in by_name if not row.error_code]
    by_id = [row for row in by_id if not row.error_code]
    if by_name or by_id:
        answer = await call_controller(
            gw,
            lambda s: s.DeleteTopics,
            controller_pb2.DeleteTopicsRequest(
                names=[row.name for row in by_name if row.name is not None],
                topic_ids=[row.topic_id.bytes for row in by_id],
            ),
            deadline,
        )
        targets = by_name + by_id
        if isinstance(answer, ControllerFailure):
            for row in targets:
                row.fail(answer.error_code, answer.message)
        else:
            # The controller answers names first, then ids, each in request order.
            for row, r in zip(targets, answer.results, strict=False):
                _apply(row, r, version)
            for row in targets[len(answer.results) :]:
                row.fail(ErrorCode.UNKNOWN_SERVER_ERROR, "The controller gave no answer.")
        for row in targets:
            if row.error_code:
                quota.give_back(taken.get(id(row), 0))
        deleted = [row for row in targets if not row.error_code]
        if deleted:
            gone_names = {row.name for row in deleted if row.name}
            gone_ids = {row.topic_id.bytes for row in deleted}

            def gone(snap: Snapshot) -> bool:
                return not any(n in snap.topics for n in gone_names) and not any(
                    i in snap.topics_by_id for i in gone_ids
                )

            await wait_visible(gw, gone, deadline.remaining())
    response = DeleteTopicsResponse(
        throttle_time_ms=0,
        responses=[
            Result(
                name=row.name,
                topic_id=row.topic_id,
                error_code=row.error_code,
                error_message=message_or_none(row.message, version, 5),
            )
            for row in rows
        ],
    )
    quota.finish(response)
    return response


def _apply(row: _Row, r: controller_pb2.TopicResult, version: int) -> None:
    if len(r.topic_id) == 16:
        row.topic_id = uuid.UUID(bytes=bytes(r.topic_id))
    if r.name:
        row.name = r.name
    code = r.error_code
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        row.fail(code, UNKNOWN_TOPIC_MESSAGE)
    elif code == ErrorCode.UNKNOWN_TOPIC_ID:
        row.fail(code, UNKNOWN_TOPIC_ID_MESSAGE)
    elif code == ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
        row.fail(ErrorCode.INVALID_REQUEST, "This version does not support topic deletion.")
    elif code:
        row.fail(code, r.error_message or None)
