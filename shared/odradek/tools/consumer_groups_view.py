"""``odradek groups describe`` for KIP-848 consumer groups: ConsumerGroupDescribe over
one connection, printed with the group and assignment epochs and each member's type
(classic or consumer protocol), epoch (-2: a static member that left and may come
back), current and target assignment.

kafka-python's admin client has no ConsumerGroupDescribe, so the request is sent with
Odradek's own codec (:mod:`odradek.protocol.messages`) on a plain blocking socket to
the bootstrap broker, which forwards it to the group's coordinator. Groups that are
not consumer groups answer GROUP_ID_NOT_FOUND and are left to the classic view.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from typing import Any, TextIO

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    ConsumerGroupDescribeRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version

VERSION = 1
# ConsumerGroupDescribe v1's MemberType (KIP-1099): a classic member inside a consumer
# group while it migrates, or a consumer-protocol one.
MEMBER_TYPES = {0: "classic", 1: "consumer"}


def describe(bootstrap: str, group_ids: list[str], timeout: float = 15.0) -> list[Any]:
    """The DescribedGroup entries, in request order."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    key = ApiKey.CONSUMER_GROUP_DESCRIBE
    request = ConsumerGroupDescribeRequest(group_ids=group_ids, include_authorized_operations=False)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(encode_request(key, VERSION, 1, "odradek-groups", request))
        (size,) = struct.unpack(">i", _read(sock, 4))
        payload = _read(sock, size)
    _, pos = parse_response_header(payload, response_header_version(key, VERSION))
    return list(decode_response(key, VERSION, payload[pos:]).groups)


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def is_consumer_group(group: Any) -> bool:
    return int(group.error_code) == ErrorCode.NONE


def _partitions(assignment: Any) -> str:
    parts = [
        f"{tp.topic_name or tp.topic_id}:{','.join(map(str, sorted(tp.partitions)))}"
        for tp in sorted(assignment.topic_partitions, key=lambda t: t.topic_name)
        if tp.partitions
    ]
    return " ".join(parts) or "-"


def render(group: Any, out: TextIO, table: Any) -> None:
    """One group: header line, then a member table (``table(rows, out)`` draws it)."""
    out.write(
        f"GROUP {group.group_id}  type consumer  state {group.group_state}  "
        f"epoch {group.group_epoch}  assignment-epoch {group.assignment_epoch}  "
        f"assignor {group.assignor_name or '-'}  members {len(group.members)}\n"
    )
    rows: list[Sequence[Any]] = [
        (
            "CONSUMER-ID",
            "TYPE",
            "EPOCH",
            "INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "ASSIGNMENT",
            "TARGET",
        )
    ]
    for m in sorted(group.members, key=lambda m: m.member_id):
        rows.append(
            (
                m.member_id,
                MEMBER_TYPES.get(int(m.member_type), "-"),
                m.member_epoch,
                m.instance_id or "-",
                m.client_host or "-",
                m.client_id or "-",
                _partitions(m.assignment),
                _partitions(m.target_assignment),
            )
        )
    if len(rows) > 1:
        table(rows, out)
    out.write("\n")
