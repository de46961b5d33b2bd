from odradek.rpc.v1 import common_pb2 as _common_pb2
from odradek.rpc.v1 import transactions_pb2 as _transactions_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OffsetCommitPartition(_message.Message):
    __slots__ = ("topic", "partition", "offset", "leader_epoch", "metadata")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ...) -> None: ...

class CommitOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "retention_time_ms", "partitions", "coordinator_id", "coordinator_epoch", "transactional", "transactional_id", "producer_id", "producer_epoch")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RETENTION_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    retention_time_ms: int
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitPartition]
    coordinator_id: int
    coordinator_epoch: int
    transactional: bool
    transactional_id: str
    producer_id: int
    producer_epoch: int
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., retention_time_ms: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitPartition, _Mapping]]] = ..., coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., transactional: _Optional[bool] = ..., transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class PartitionError(_message.Message):
    __slots__ = ("topic", "partition", "error_code")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[int] = ...) -> None: ...

class CommitOffsetsResponse(_message.Message):
    __slots__ = ("error_code", "partitions")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionError]
    def __init__(self, error_code: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionError, _Mapping]]] = ...) -> None: ...

class FetchOffsetsGroup(_message.Message):
    __slots__ = ("group_id", "all_topics", "partitions")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    all_topics: bool
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, group_id: _Optional[str] = ..., all_topics: _Optional[bool] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class FetchOffsetsRequest(_message.Message):
    __slots__ = ("groups", "require_stable")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[FetchOffsetsGroup]
    require_stable: bool
    def __init__(self, groups: _Optional[_Iterable[_Union[FetchOffsetsGroup, _Mapping]]] = ..., require_stable: _Optional[bool] = ...) -> None: ...

class CommittedOffset(_message.Message):
    __slots__ = ("topic", "partition", "offset", "leader_epoch", "metadata", "error_code", "commit_timestamp")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error_code: int
    commit_timestamp: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., error_code: _Optional[int] = ..., commit_timestamp: _Optional[int] = ...) -> None: ...

class FetchOffsetsGroupResult(_message.Message):
    __slots__ = ("group_id", "error_code", "offsets")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    error_code: int
    offsets: _containers.RepeatedCompositeFieldContainer[CommittedOffset]
    def __init__(self, group_id: _Optional[str] = ..., error_code: _Optional[int] = ..., offsets: _Optional[_Iterable[_Union[CommittedOffset, _Mapping]]] = ...) -> None: ...

class FetchOffsetsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[FetchOffsetsGroupResult]
    def __init__(self, groups: _Optional[_Iterable[_Union[FetchOffsetsGroupResult, _Mapping]]] = ...) -> None: ...

class DeleteOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "partitions", "coordinator_id", "coordinator_epoch")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    coordinator_id: int
    coordinator_epoch: int
    def __init__(self, group_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class DeleteOffsetsResponse(_message.Message):
    __slots__ = ("error_code", "partitions")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionError]
    def __init__(self, error_code: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionError, _Mapping]]] = ...) -> None: ...

class GroupMember(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms", "session_timeout_ms", "subscription", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., rebalance_timeout_ms: _Optional[int] = ..., session_timeout_ms: _Optional[int] = ..., subscription: _Optional[bytes] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class GroupMetadata(_message.Message):
    __slots__ = ("group_id", "protocol_type", "generation", "protocol", "leader", "current_state_timestamp", "members")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    CURRENT_STATE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    protocol_type: str
    generation: int
    protocol: str
    leader: str
    current_state_timestamp: int
    members: _containers.RepeatedCompositeFieldContainer[GroupMember]
    def __init__(self, group_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., generation: _Optional[int] = ..., protocol: _Optional[str] = ..., leader: _Optional[str] = ..., current_state_timestamp: _Optional[int] = ..., members: _Optional[_Iterable[_Union[GroupMember, _Mapping]]] = ...) -> None: ...

class CoordinatorRecord(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class StoreGroupsRequest(_message.Message):
    __slots__ = ("shard", "coordinator_id", "coordinator_epoch", "groups", "deleted_groups", "records")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    DELETED_GROUPS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    shard: int
    coordinator_id: int
    coordinator_epoch: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupMetadata]
    deleted_groups: _containers.RepeatedScalarFieldContainer[str]
    records: _containers.RepeatedCompositeFieldContainer[CoordinatorRecord]
    def __init__(self, shard: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupMetadata, _Mapping]]] = ..., deleted_groups: _Optional[_Iterable[str]] = ..., records: _Optional[_Iterable[_Union[CoordinatorRecord, _Mapping]]] = ...) -> None: ...

class StoreGroupsResponse(_message.Message):
    __slots__ = ("error_code",)
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    def __init__(self, error_code: _Optional[int] = ...) -> None: ...

class LoadShardRequest(_message.Message):
    __slots__ = ("shard", "coordinator_id", "coordinator_epoch")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    shard: int
    coordinator_id: int
    coordinator_epoch: int
    def __init__(self, shard: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class LoadShardResponse(_message.Message):
    __slots__ = ("error_code", "groups", "offset_groups", "records")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_GROUPS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupMetadata]
    offset_groups: _containers.RepeatedScalarFieldContainer[str]
    records: _containers.RepeatedCompositeFieldContainer[CoordinatorRecord]
    def __init__(self, error_code: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupMetadata, _Mapping]]] = ..., offset_groups: _Optional[_Iterable[str]] = ..., records: _Optional[_Iterable[_Union[CoordinatorRecord, _Mapping]]] = ...) -> None: ...
