"""Request and response bodies: decode what clients send, encode what we answer.

The message objects are kafka-python's generated classes (one per API, from Apache
Kafka's JSON schemas); this module is the only door to them, so the rest of Odradek
never touches kafka-python's codec directly.

Decoding goes through :mod:`odradek.protocol.decoder` (strict, bounded, zero-copy
``records``); encoding uses kafka-python's compiled encoders, writing size + header
+ body into one buffer.

Building a response: construct the class with keyword arguments named as in the
JSON schema, in snake_case; fields left out take the schema default. Nested
structures are classes hanging off the message class, named after the JSON type::

    P = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    resp = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="orders",
                partition_responses=[P(index=0, error_code=0, base_offset=42)],
            )
        ],
        throttle_time_ms=0,
    )
    frame = encode_response(header, resp)

``schema_outline(ProduceResponse, 9)`` prints the field tree of any version; the
``.pyi`` files next to kafka-python's modules (e.g.
``kafka/protocol/producer/produce.pyi``) list every field with its type.
Fields that only exist in other versions are simply not written, so one builder
serves every version of an API.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from struct import pack_into
from typing import Any, TypeVar, cast

from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafka.protocol.admin.cluster import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from odradek.protocol import catalog
from odradek.protocol.api_keys import ApiKey, api_key_or_none
from odradek.protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from odradek.protocol.decoder import as_byte_view, decode_struct
from odradek.protocol.exceptions import (
    InvalidRequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from odradek.protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
)
from odradek.protocol.versions import SUPPORTED, is_flexible, response_header_version

# A decoded request or a response to encode: an instance of one of the kafka-python
# classes re-exported below. kafka-python ships a .pyi stub per message module (field
# names and types, nested classes such as ``ProduceResponse.TopicProduceResponse``) but
# no py.typed marker; pyproject.toml tells mypy to read them (follow_untyped_imports).
Message = ApiMessage

__all__ = [
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "AlterClientQuotasRequest",
    "AlterClientQuotasResponse",
    "AlterConfigsRequest",
    "AlterConfigsResponse",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "AlterReplicaLogDirsRequest",
    "AlterReplicaLogDirsResponse",
    "AlterUserScramCredentialsRequest",
    "AlterUserScramCredentialsResponse",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeAclsRequest",
    "DescribeAclsResponse",
    "DescribeClientQuotasRequest",
    "DescribeClientQuotasResponse",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "DescribeUserScramCredentialsRequest",
    "DescribeUserScramCredentialsResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "Message",
    "MetadataRequest",
    "MetadataResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "ProduceRequest",
    "ProduceResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
    "authorized_operations",
    "decode_request",
    "decode_request_body",
    "decode_response",
    "encode_body",
    "encode_request",
    "encode_response",
    "expects_response",
    "request_class",
    "response_class",
    "schema_outline",
]


def _known(api_key: int, correlation_id: int | None = None) -> ApiKey:
    key = api_key_or_none(api_key)
    if key is None or key not in catalog.REQUESTS:
        raise UnknownApiKeyError(api_key, correlation_id=correlation_id)
    return key


def request_class(api_key: int) -> type[Message]:
    """The kafka-python request class of ``api_key`` (UnknownApiKeyError if none)."""
    return catalog.REQUESTS[_known(api_key)]


def response_class(api_key: int) -> type[Message]:
    """The kafka-python response class of ``api_key`` (UnknownApiKeyError if none)."""
    return catalog.RESPONSES[_known(api_key)]


def _codec_range(api_key: ApiKey) -> tuple[int, int]:
    return 0, int(catalog.REQUESTS[api_key].max_version)


def decode_request(header: RequestHeader, body: bytes | bytearray | memoryview) -> Message:
    """Decode the body that follows ``header`` in a request frame. Only versions in
    :data:`~odradek.protocol.versions.SUPPORTED` are accepted; bytes after the last
    field are ignored, as Kafka's parsers do. Raises UnknownApiKeyError, UnsupportedVersionError or
    InvalidRequestError, all carrying the correlation id."""
    key = _known(header.api_key, header.correlation_id)
    supported = SUPPORTED.get(key)
    if supported is None or not supported[0] <= header.api_version <= supported[1]:
        raise UnsupportedVersionError(
            key, header.api_version, correlation_id=header.correlation_id, supported=supported
        )
    # Like Kafka's request parsers, ignore bytes after the last field: librdkafka 2.16
    # sends three extra bytes after an "all topics" Metadata v12 request.
    return _decode(
        catalog.REQUESTS[key], key, header.api_version, body, header.correlation_id, exact=False
    )


def decode_request_body(
    api_key: int, version: int, body: bytes | bytearray | memoryview
) -> Message:
    """Decode a request body at any version the codec knows, supported or not (for
    tools; the gateway uses :func:`decode_request`)."""
    key = _known(api_key)
    low, high = _codec_range(key)
    if not low <= version <= high:
        raise UnsupportedVersionError(key, version, supported=(low, high))
    return _decode(catalog.REQUESTS[key], key, version, body, None)


def decode_response(api_key: int, version: int, body: bytes | bytearray | memoryview) -> Message:
    """Decode a response body (clients, tools and tests). An ApiVersions response that
    carries an error is decoded as v0, which is how brokers send it."""
    key = _known(api_key)
    low, high = _codec_range(key)
    if not low <= version <= high:
        raise UnsupportedVersionError(key, version, supported=(low, high))
    view = as_byte_view(body)
    if key == ApiKey.API_VERSIONS and len(view) >= 2 and (view[0] or view[1]):
        version = 0
    return _decode(catalog.RESPONSES[key], key, version, view, None)


def _decode(
    cls: Any,
    key: ApiKey,
    version: int,
    body: bytes | bytearray | memoryview,
    cid: int | None,
    *,
    exact: bool = True,
) -> Message:
    try:
        return decode_struct(cls, version, is_flexible(key, version), body, exact=exact)
    except InvalidRequestError as exc:
        exc.api_key, exc.api_version, exc.correlation_id = int(key), version, cid
        raise


def _check_class(message: Message, expected: Any) -> None:
    if not isinstance(message, expected):
        raise TypeError(f"expected a {expected.__name__}, got {type(message).__name__}")


def _take(out: Any) -> bytes:
    """The encoded bytes, copied once out of the pooled (reused) buffer."""
    with memoryview(out.buf) as view:
        return view[: out.pos].tobytes()


def _encoder(message: Message, version: int, flexible: bool) -> Callable[[Message, Any], None]:
    """kafka-python's compiled encoder of ``message``'s class at ``version``."""
    # Every generated class sets its schema (a StructField); DataContainer declares None.
    schema: Any = message._struct
    encoder: Callable[[Message, Any], None] = schema.compiled_encode_into(
        version, compact=flexible, tagged=flexible
    )
    return encoder


def _encode_frame(prefix: bytes, message: Message, version: int, flexible: bool) -> bytes:
    """size + prefix + body in one buffer, so the transport gets one write."""
    encoder = _encoder(message, version, flexible)
    with EncodeBufferPool.acquire() as out:
        start = 4 + len(prefix)
        out.ensure(start)
        out.buf[4:start] = prefix
        out.pos = start
        encoder(message, out)
        pack_into(">i", out.buf, 0, out.pos - 4)
        return _take(out)


def encode_body(message: Message, version: int) -> bytes:
    """Just the body of ``message`` at ``version`` (no size, no header)."""
    key = _known(message.API_KEY)
    encoder = _encoder(message, version, is_flexible(key, version))
    with EncodeBufferPool.acquire() as out:
        encoder(message, out)
        return _take(out)


def encode_response(header: RequestHeader, response: Message) -> bytes:
    """The complete response frame for the request ``header``: INT32 size, response
    header of the version Kafka uses for this API version, body at the request's
    version. Raises TypeError when ``response`` is not this API's response class."""
    key = _known(header.api_key)
    _check_class(response, catalog.RESPONSES[key])
    version = header.api_version
    prefix = encode_response_header(header.correlation_id, response_header_version(key, version))
    return _encode_frame(prefix, response, version, is_flexible(key, version))


def encode_request(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    request: Message,
) -> bytes:
    """A complete request frame, as a client would send it."""
    key = _known(api_key)
    _check_class(request, catalog.REQUESTS[key])
    prefix = encode_request_header(key, version, correlation_id, client_id)
    return _encode_frame(prefix, request, version, is_flexible(key, version))


def authorized_operations(operations: Collection[int] | None) -> set[int]:
    """An ``authorized_operations`` field: the AclOperation codes allowed, or None for
    Kafka's "not requested" (INT32_MIN on the wire). kafka-python writes None as that,
    though its stubs type these fields ``set[int]``."""
    return set(operations) if operations is not None else cast("set[int]", None)


_PRODUCE = int(ApiKey.PRODUCE)  # an int: an enum member lookup costs ~0.3 us (3.11)


def expects_response(header: RequestHeader, request: Message) -> bool:
    """False for Produce with acks=0: Kafka sends no response at all (docs/compatibility.md C6)."""
    return not (header.api_key == _PRODUCE and request.acks == 0)


def schema_outline(cls: Any, version: int) -> str:
    """The field tree of ``cls`` at ``version``: one line per field, indented by
    nesting, with its JSON type, e.g. ``  partition_responses: []PartitionProduceResponse``."""
    lines: list[str] = [f"{cls.__name__} v{version}"]

    def walk(struct_field: Any, depth: int) -> None:
        for field in struct_field._fields:
            if not field.for_version_q(version):
                continue
            tagged = " (tagged)" if field.tagged_field_q(version) else ""
            nullable = " (nullable)" if field.nullable_for_version_q(version) else ""
            lines.append(f"{'  ' * depth}{field.name}: {field._type_str}{nullable}{tagged}")
            if field.is_struct_array():
                walk(field.array_of, depth + 1)
            elif field.is_struct():
                walk(field, depth + 1)

    walk(cls._struct, 1)
    return "\n".join(lines)


_M = TypeVar("_M")


def blank_message(cls: type[_M]) -> _M:
    """An instance of a kafka-python message class with no field set yet, as
    ``cls()`` would leave it but without ``DataContainer.__init__``'s walk over the
    schema (odradek.protocol.produce_response and fetch_response set the fields of
    the gateway's hottest answers on it directly). An unset field reads as its
    schema default."""
    obj: Any = object.__new__(cls)
    obj._version = None
    obj.tags = None
    obj.unknown_tags = None
    return obj  # (Any: no runtime ``typing.cast`` call on the per-request path, issue 18)
