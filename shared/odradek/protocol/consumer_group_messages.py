"""The KIP-848 consumer group APIs, ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), as message classes of the same codec as every other API.

kafka-python 3.0.12 ships no schema for them, so their request/response layouts are
written here, field by field, from Kafka's published message specifications (KIP-848;
Kafka 4.0's ``ConsumerGroupHeartbeat{Request,Response}`` and
``ConsumerGroupDescribe{Request,Response}``, Describe v1 adding ``MemberType`` per
KIP-1099). :class:`_SpecMessageData` hands these definitions to kafka-python's message
machinery instead of a JSON resource, so the classes decode with the strict decoder of
:mod:`odradek.protocol.decoder` and encode with the compiled encoders, and
:mod:`odradek.protocol.catalog` indexes them by API key like every other API.

All four messages are flexible from v0 (compact strings/arrays, tagged fields).
"""

from __future__ import annotations

from typing import Any, ClassVar

from kafka.protocol.api_message import ApiMessage, ApiMessageData
from kafka.protocol.data_container import SlotsBuilder
from kafka.protocol.schemas import StructField

Spec = dict[str, Any]


def _field(
    name: str,
    type_: str,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    default: object = None,
    fields: list[Spec] | None = None,
) -> Spec:
    spec: Spec = {"name": name, "type": type_, "versions": versions}
    if nullable is not None:
        spec["nullableVersions"] = nullable
    if default is not None:
        spec["default"] = default
    if fields is not None:
        spec["fields"] = fields
    return spec


def _message(api_key: int, kind: str, name: str, valid: str, fields: list[Spec]) -> Spec:
    return {
        "apiKey": api_key,
        "type": kind,
        "name": name,
        "validVersions": valid,
        "flexibleVersions": "0+",
        "fields": fields,
    }


def _topic_partitions(with_name: bool) -> list[Spec]:
    """Kafka's ``TopicPartitions`` common struct (Describe also names the topic)."""
    fields = [_field("TopicId", "uuid")]
    if with_name:
        fields.append(_field("TopicName", "string"))
    fields.append(_field("Partitions", "[]int32"))
    return fields


HEARTBEAT_REQUEST = _message(
    68,
    "request",
    "ConsumerGroupHeartbeatRequest",
    "0-1",
    [
        _field("GroupId", "string"),
        _field("MemberId", "string"),
        # 0 joins, -1 leaves, -2 a static member leaving temporarily.
        _field("MemberEpoch", "int32"),
        _field("InstanceId", "string", nullable="0+", default="null"),
        _field("RackId", "string", nullable="0+", default="null"),
        _field("RebalanceTimeoutMs", "int32", default=-1),
        _field("SubscribedTopicNames", "[]string", nullable="0+", default="null"),
        _field("SubscribedTopicRegex", "string", "1+", nullable="1+", default="null"),
        _field("ServerAssignor", "string", nullable="0+", default="null"),
        _field(
            "TopicPartitions",
            "[]TopicPartitions",
            nullable="0+",
            default="null",
            fields=_topic_partitions(with_name=False),
        ),
    ],
)

HEARTBEAT_RESPONSE = _message(
    68,
    "response",
    "ConsumerGroupHeartbeatResponse",
    "0-1",
    [
        _field("ThrottleTimeMs", "int32"),
        _field("ErrorCode", "int16"),
        _field("ErrorMessage", "string", nullable="0+", default="null"),
        _field("MemberId", "string", nullable="0+", default="null"),
        _field("MemberEpoch", "int32"),
        _field("HeartbeatIntervalMs", "int32"),
        _field(
            "Assignment",
            "Assignment",
            nullable="0+",
            default="null",
            fields=[
                _field(
                    "TopicPartitions",
                    "[]TopicPartitions",
                    fields=_topic_partitions(with_name=False),
                )
            ],
        ),
    ],
)

DESCRIBE_REQUEST = _message(
    69,
    "request",
    "ConsumerGroupDescribeRequest",
    "0-1",
    [
        _field("GroupIds", "[]string"),
        _field("IncludeAuthorizedOperations", "bool"),
    ],
)


def _assignment(name: str) -> Spec:
    return _field(
        name,
        "Assignment",
        fields=[
            _field("TopicPartitions", "[]TopicPartitions", fields=_topic_partitions(with_name=True))
        ],
    )


DESCRIBE_RESPONSE = _message(
    69,
    "response",
    "ConsumerGroupDescribeResponse",
    "0-1",
    [
        _field("ThrottleTimeMs", "int32"),
        _field(
            "Groups",
            "[]DescribedGroup",
            fields=[
                _field("ErrorCode", "int16"),
                _field("ErrorMessage", "string", nullable="0+", default="null"),
                _field("GroupId", "string"),
                _field("GroupState", "string"),
                _field("GroupEpoch", "int32"),
                _field("AssignmentEpoch", "int32"),
                _field("AssignorName", "string"),
                _field(
                    "Members",
                    "[]Member",
                    fields=[
                        _field("MemberId", "string"),
                        _field("InstanceId", "string", nullable="0+", default="null"),
                        _field("RackId", "string", nullable="0+", default="null"),
                        _field("MemberEpoch", "int32"),
                        _field("ClientId", "string"),
                        _field("ClientHost", "string"),
                        _field("SubscribedTopicNames", "[]string"),
                        _field("SubscribedTopicRegex", "string", nullable="0+", default="null"),
                        _assignment("Assignment"),
                        _assignment("TargetAssignment"),
                        # KIP-1099: 0 classic, 1 consumer, -1 unknown.
                        _field("MemberType", "int8", "1+", default=-1),
                    ],
                ),
                _field("AuthorizedOperations", "int32", default="-2147483648"),
            ],
        ),
    ],
)


class _SpecMessageData(ApiMessageData):
    """kafka-python's message metaclass, fed a definition from this module instead of
    a JSON resource of its package (the rest of its machinery is unchanged)."""

    def __new__(
        metacls,
        name: str,
        bases: tuple[type, ...],
        attrs: dict[str, Any],
        spec: Spec | None = None,
        **kw: Any,
    ) -> _SpecMessageData:
        if spec is None:  # versioned wrappers (Foo_v1) are created with init=False
            return super().__new__(metacls, name, bases, attrs, **kw)  # type: ignore[no-any-return]
        attrs["_json"] = spec
        attrs["_struct"] = StructField(spec)
        return SlotsBuilder.__new__(metacls, name, bases, attrs)  # type: ignore[no-any-return]

    def __init__(
        cls,
        name: str,
        bases: tuple[type, ...],
        attrs: dict[str, Any],
        spec: Spec | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(name, bases, attrs, **kw)


class ConsumerGroupHeartbeatRequest(ApiMessage, metaclass=_SpecMessageData, spec=HEARTBEAT_REQUEST):
    __slots__ = ()
    TopicPartitions: ClassVar[Any]  # nested struct class, set by the codec


class ConsumerGroupHeartbeatResponse(
    ApiMessage, metaclass=_SpecMessageData, spec=HEARTBEAT_RESPONSE
):
    __slots__ = ()
    Assignment: ClassVar[Any]  # nested struct class, set by the codec


class ConsumerGroupDescribeRequest(ApiMessage, metaclass=_SpecMessageData, spec=DESCRIBE_REQUEST):
    __slots__ = ()


class ConsumerGroupDescribeResponse(ApiMessage, metaclass=_SpecMessageData, spec=DESCRIBE_RESPONSE):
    __slots__ = ()
    DescribedGroup: ClassVar[Any]  # nested struct class, set by the codec


__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]
