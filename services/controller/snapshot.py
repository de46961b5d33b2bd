"""The published form of the model: a ``ClusterMetadata`` message per version."""

from __future__ import annotations

from typing import cast

from odradek.acl import AclBinding
from odradek.client_quota_proto import entity_to_proto
from odradek.controller.cluster_state import NodeInfo, PartitionState, ShardState, TopicState
from odradek.controller.model import ClusterModel
from odradek.rpc.v1 import common_pb2


def node_proto(node: NodeInfo) -> common_pb2.Node:
    return common_pb2.Node(
        node_id=node.node_id,
        kind=cast(common_pb2.NodeKind, int(node.kind)),
        host=node.host,
        kafka_port=node.kafka_port,
        grpc_port=node.grpc_port,
        metrics_port=node.metrics_port,
        rack=node.rack,
        state=cast(common_pb2.NodeState, int(node.state)),
        incarnation=node.incarnation,
        advertised_host=node.advertised_host,
        broker_ports=node.broker_ports,
        data_port=node.data_port,
        data_socket=common_pb2.DataSocket(
            path=node.data_socket_path,
            host_id=node.data_socket_host,
            token=node.data_socket_token,
        )
        if node.data_socket_path
        else None,
        listeners=[
            common_pb2.ListenerEndpoint(
                name=lst.name, host=lst.host, port=lst.port, broker_ports=lst.broker_ports
            )
            for lst in node.listeners
        ],
    )


def partition_proto(p: PartitionState, model: ClusterModel | None = None) -> common_pb2.Partition:
    offline = [r for r in p.replicas if r in p.offline or (model is not None and not model.live(r))]
    return common_pb2.Partition(
        partition=p.partition,
        replicas=p.replicas,
        isr=p.isr,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        offline_replicas=offline,
        adding_replicas=p.adding_replicas,
        removing_replicas=p.removing_replicas,
    )


def topic_proto(topic: TopicState, model: ClusterModel) -> common_pb2.Topic:
    return common_pb2.Topic(
        name=topic.name,
        topic_id=topic.topic_id,
        configs=topic.configs,
        partitions=[partition_proto(p, model) for p in topic.partitions],
        internal=topic.internal,
    )


def build_metadata(
    model: ClusterModel, controller_id: int, controller_epoch: int
) -> common_pb2.ClusterMetadata:
    return common_pb2.ClusterMetadata(
        version=model.metadata_version,
        cluster_id=model.cluster_id,
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        nodes=[node_proto(model.nodes[n]) for n in sorted(model.nodes)],
        topics=[topic_proto(model.topics[t], model) for t in sorted(model.topics)],
        cluster_configs=model.effective_configs(),
        dynamic_cluster_configs=model.dynamic_configs,
        broker_configs={
            node_id: common_pb2.BrokerConfigs(configs=configs)
            for node_id, configs in model.broker_configs.items()
            if configs
        },
        coordinator_shards=[_shard_proto(s) for s in model.shards],
        transaction_shards=[_shard_proto(s) for s in model.transaction_shards],
        scram_credentials=[
            common_pb2.ScramCredential(
                user=user,
                mechanism=int(c.mechanism),
                salt=c.salt,
                stored_key=c.stored_key,
                server_key=c.server_key,
                iterations=c.iterations,
            )
            for user, creds in sorted(model.security.scram.items())
            for c in creds.values()
        ],
        acls=[acl_proto(a) for a in model.security.acls],
        client_quotas=[
            common_pb2.ClientQuota(entity=entity_to_proto(e), values=values)
            for e, values in model.client_quotas.quotas.items()
        ],
    )


def acl_proto(a: AclBinding) -> common_pb2.AclBinding:
    return common_pb2.AclBinding(
        resource_type=int(a.resource_type),
        resource_name=a.resource_name,
        pattern_type=int(a.pattern_type),
        principal=a.principal,
        host=a.host,
        operation=int(a.operation),
        permission_type=int(a.permission),
    )


def _shard_proto(s: ShardState) -> common_pb2.CoordinatorShard:
    return common_pb2.CoordinatorShard(
        shard=s.shard, coordinator_id=s.coordinator_id, epoch=s.epoch
    )
