"""The ``consumer`` embedded protocol: the opaque bytes consumers put in JoinGroup
metadata (their subscription) and SyncGroup assignments. The broker only stores and
forwards them; the group tools decode them to show who owns what.

Subscription payload (big-endian)::

    version INT16 | topics ARRAY[STRING] | user_data NULLABLE_BYTES
    | v1+: owned_partitions ARRAY[topic STRING, partitions ARRAY[INT32]]
    | v2+: generation_id INT32 | v3+: rack_id NULLABLE_STRING

Assignment payload::

    version INT16 | assigned_partitions ARRAY[topic STRING, partitions ARRAY[INT32]]
    | user_data NULLABLE_BYTES

Never flexible. Like Kafka's ``ConsumerProtocol``, a version newer than we know is
read with our highest version and trailing bytes are ignored (newer versions only
append fields); a negative version is an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from odradek.protocol.decoder import as_byte_view, decode_struct
from odradek.protocol.exceptions import InvalidRequestError

CONSUMER_PROTOCOL_TYPE = "consumer"
HIGHEST_VERSION = 3

_VERSION = struct.Struct(">h")

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]


def _topic_partitions(cls: Any, partitions: Mapping[str, Iterable[int]]) -> list[Any]:
    return [cls(topic=topic, partitions=sorted(parts)) for topic, parts in partitions.items()]


def encode_subscription(
    topics: Sequence[str],
    *,
    user_data: bytes | None = None,
    owned_partitions: Mapping[str, Iterable[int]] | None = None,
    generation_id: int = -1,
    rack_id: str | None = None,
    version: int = HIGHEST_VERSION,
) -> bytes:
    subscription = ConsumerProtocolSubscription(
        topics=list(topics),
        user_data=user_data,
        owned_partitions=_topic_partitions(
            ConsumerProtocolSubscription.TopicPartition, owned_partitions or {}
        ),
        generation_id=generation_id,
        rack_id=rack_id,
    )
    return bytes(subscription.encode(version=version, header=True))


def encode_assignment(
    partitions: Mapping[str, Iterable[int]],
    *,
    user_data: bytes | None = None,
    version: int = HIGHEST_VERSION,
) -> bytes:
    assignment = ConsumerProtocolAssignment(
        assigned_partitions=_topic_partitions(
            ConsumerProtocolAssignment.TopicPartition, partitions
        ),
        user_data=user_data,
    )
    return bytes(assignment.encode(version=version, header=True))


def _decode(cls: Any, payload: bytes | bytearray | memoryview) -> Any:
    view = as_byte_view(payload)
    if len(view) < 2:
        raise InvalidRequestError(f"{cls.__name__} payload of {len(view)} bytes has no version")
    (version,) = _VERSION.unpack_from(view, 0)
    if version < 0:
        raise InvalidRequestError(f"{cls.__name__} version {version} is negative")
    return decode_struct(cls, min(version, HIGHEST_VERSION), False, view[2:], exact=False)


def decode_subscription(payload: bytes | bytearray | memoryview) -> ConsumerProtocolSubscription:
    """JoinGroup member metadata of protocol type ``consumer``. InvalidRequestError
    when it does not parse."""
    return _decode(ConsumerProtocolSubscription, payload)


def decode_assignment(payload: bytes | bytearray | memoryview) -> ConsumerProtocolAssignment:
    """A SyncGroup assignment. An empty payload (a member the leader gave nothing)
    is an empty assignment."""
    if len(payload) == 0:
        return ConsumerProtocolAssignment(assigned_partitions=[], user_data=None, version=0)
    return _decode(ConsumerProtocolAssignment, payload)
