from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_KIND_UNSPECIFIED: _ClassVar[NodeKind]
    GATEWAY: _ClassVar[NodeKind]
    STORAGE: _ClassVar[NodeKind]
    CONTROLLER: _ClassVar[NodeKind]
    COORDINATOR: _ClassVar[NodeKind]
    OFFSET_STORE: _ClassVar[NodeKind]
    TRANSACTION_COORDINATOR: _ClassVar[NodeKind]

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATE_UNSPECIFIED: _ClassVar[NodeState]
    ONLINE: _ClassVar[NodeState]
    OFFLINE: _ClassVar[NodeState]
    SHUTTING_DOWN: _ClassVar[NodeState]
NODE_KIND_UNSPECIFIED: NodeKind
GATEWAY: NodeKind
STORAGE: NodeKind
CONTROLLER: NodeKind
COORDINATOR: NodeKind
OFFSET_STORE: NodeKind
TRANSACTION_COORDINATOR: NodeKind
NODE_STATE_UNSPECIFIED: NodeState
ONLINE: NodeState
OFFLINE: NodeState
SHUTTING_DOWN: NodeState

class Node(_message.Message):
    __slots__ = ("node_id", "kind", "host", "kafka_port", "grpc_port", "metrics_port", "rack", "state", "incarnation", "advertised_host", "broker_ports", "data_port", "listeners", "data_socket")
    class BrokerPortsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    KAFKA_PORT_FIELD_NUMBER: _ClassVar[int]
    GRPC_PORT_FIELD_NUMBER: _ClassVar[int]
    METRICS_PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    ADVERTISED_HOST_FIELD_NUMBER: _ClassVar[int]
    BROKER_PORTS_FIELD_NUMBER: _ClassVar[int]
    DATA_PORT_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    DATA_SOCKET_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    kind: NodeKind
    host: str
    kafka_port: int
    grpc_port: int
    metrics_port: int
    rack: str
    state: NodeState
    incarnation: int
    advertised_host: str
    broker_ports: _containers.ScalarMap[int, int]
    data_port: int
    listeners: _containers.RepeatedCompositeFieldContainer[ListenerEndpoint]
    data_socket: DataSocket
    def __init__(self, node_id: _Optional[int] = ..., kind: _Optional[_Union[NodeKind, str]] = ..., host: _Optional[str] = ..., kafka_port: _Optional[int] = ..., grpc_port: _Optional[int] = ..., metrics_port: _Optional[int] = ..., rack: _Optional[str] = ..., state: _Optional[_Union[NodeState, str]] = ..., incarnation: _Optional[int] = ..., advertised_host: _Optional[str] = ..., broker_ports: _Optional[_Mapping[int, int]] = ..., data_port: _Optional[int] = ..., listeners: _Optional[_Iterable[_Union[ListenerEndpoint, _Mapping]]] = ..., data_socket: _Optional[_Union[DataSocket, _Mapping]] = ...) -> None: ...

class DataSocket(_message.Message):
    __slots__ = ("path", "host_id", "token")
    PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    path: str
    host_id: str
    token: bytes
    def __init__(self, path: _Optional[str] = ..., host_id: _Optional[str] = ..., token: _Optional[bytes] = ...) -> None: ...

class ListenerEndpoint(_message.Message):
    __slots__ = ("name", "host", "port", "broker_ports")
    class BrokerPortsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    BROKER_PORTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    broker_ports: _containers.ScalarMap[int, int]
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., broker_ports: _Optional[_Mapping[int, int]] = ...) -> None: ...

class Partition(_message.Message):
    __slots__ = ("partition", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "offline_replicas", "adding_replicas", "removing_replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    offline_replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., offline_replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class Topic(_message.Message):
    __slots__ = ("name", "topic_id", "configs", "partitions", "internal")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    configs: _containers.ScalarMap[str, str]
    partitions: _containers.RepeatedCompositeFieldContainer[Partition]
    internal: bool
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., configs: _Optional[_Mapping[str, str]] = ..., partitions: _Optional[_Iterable[_Union[Partition, _Mapping]]] = ..., internal: _Optional[bool] = ...) -> None: ...

class CoordinatorShard(_message.Message):
    __slots__ = ("shard", "coordinator_id", "epoch")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    shard: int
    coordinator_id: int
    epoch: int
    def __init__(self, shard: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ClusterMetadata(_message.Message):
    __slots__ = ("version", "cluster_id", "controller_id", "controller_epoch", "nodes", "topics", "cluster_configs", "coordinator_shards", "dynamic_cluster_configs", "broker_configs", "transaction_shards", "scram_credentials", "acls", "client_quotas")
    class ClusterConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class DynamicClusterConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class BrokerConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: BrokerConfigs
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[BrokerConfigs, _Mapping]] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_SHARDS_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_CLUSTER_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    BROKER_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_SHARDS_FIELD_NUMBER: _ClassVar[int]
    SCRAM_CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_QUOTAS_FIELD_NUMBER: _ClassVar[int]
    version: int
    cluster_id: str
    controller_id: int
    controller_epoch: int
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    cluster_configs: _containers.ScalarMap[str, str]
    coordinator_shards: _containers.RepeatedCompositeFieldContainer[CoordinatorShard]
    dynamic_cluster_configs: _containers.ScalarMap[str, str]
    broker_configs: _containers.MessageMap[int, BrokerConfigs]
    transaction_shards: _containers.RepeatedCompositeFieldContainer[CoordinatorShard]
    scram_credentials: _containers.RepeatedCompositeFieldContainer[ScramCredential]
    acls: _containers.RepeatedCompositeFieldContainer[AclBinding]
    client_quotas: _containers.RepeatedCompositeFieldContainer[ClientQuota]
    def __init__(self, version: _Optional[int] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ..., cluster_configs: _Optional[_Mapping[str, str]] = ..., coordinator_shards: _Optional[_Iterable[_Union[CoordinatorShard, _Mapping]]] = ..., dynamic_cluster_configs: _Optional[_Mapping[str, str]] = ..., broker_configs: _Optional[_Mapping[int, BrokerConfigs]] = ..., transaction_shards: _Optional[_Iterable[_Union[CoordinatorShard, _Mapping]]] = ..., scram_credentials: _Optional[_Iterable[_Union[ScramCredential, _Mapping]]] = ..., acls: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ..., client_quotas: _Optional[_Iterable[_Union[ClientQuota, _Mapping]]] = ...) -> None: ...

class QuotaEntityPart(_message.Message):
    __slots__ = ("entity_type", "entity_name")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_NAME_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    entity_name: str
    def __init__(self, entity_type: _Optional[str] = ..., entity_name: _Optional[str] = ...) -> None: ...

class ClientQuota(_message.Message):
    __slots__ = ("entity", "values")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    entity: _containers.RepeatedCompositeFieldContainer[QuotaEntityPart]
    values: _containers.ScalarMap[str, float]
    def __init__(self, entity: _Optional[_Iterable[_Union[QuotaEntityPart, _Mapping]]] = ..., values: _Optional[_Mapping[str, float]] = ...) -> None: ...

class ScramCredential(_message.Message):
    __slots__ = ("user", "mechanism", "salt", "stored_key", "server_key", "iterations")
    USER_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    user: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    def __init__(self, user: _Optional[str] = ..., mechanism: _Optional[int] = ..., salt: _Optional[bytes] = ..., stored_key: _Optional[bytes] = ..., server_key: _Optional[bytes] = ..., iterations: _Optional[int] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class BrokerConfigs(_message.Message):
    __slots__ = ("configs",)
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    configs: _containers.ScalarMap[str, str]
    def __init__(self, configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...
