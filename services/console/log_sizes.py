"""Partition sizes on disk and each storage node's log dirs.

Kafka's way is DescribeLogDirs (API 35), asked of every broker; the console uses it
whenever the gateway advertises it. Until then it falls back to the storage nodes'
own ``DescribePartitions`` gRPC call (proto/odradek/v1/storage.proto), one call per
node, addresses taken from the controller's metadata. That fallback lives here and
nowhere else, so it goes away in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass, field

import grpc

from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.metadata_cache import NodeKind, Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import request_class
from odradek.rpc.channel import Channels
from odradek.rpc.v1 import storage_pb2, storage_pb2_grpc

TopicPartition = tuple[str, int]


@dataclass
class LogDir:
    node_id: int
    path: str
    size_bytes: int = 0
    partitions: int = 0
    error: str = ""


@dataclass
class LogSizes:
    partitions: dict[TopicPartition, int] = field(default_factory=dict)
    dirs: list[LogDir] = field(default_factory=list)
    source: str = ""

    def topic_size(self, topic: str, count: int) -> int | None:
        sizes = [self.partitions.get((topic, p)) for p in range(count)]
        known = [s for s in sizes if s is not None]
        return sum(known) if known else None


class LogSizeReader:
    """Reads sizes the best way the cluster offers; keeps gRPC channels for the fallback."""

    def __init__(self, rpc_timeout_s: float = 10.0) -> None:
        self.rpc_timeout_s = rpc_timeout_s
        self._channels: Channels[str, storage_pb2_grpc.StorageStub] = Channels(
            storage_pb2_grpc.StorageStub
        )

    async def read(self, client: KafkaClient, snapshot: Snapshot | None) -> LogSizes:
        if client.supports(ApiKey.DESCRIBE_LOG_DIRS) or snapshot is None:
            with contextlib.suppress(KafkaClientError):
                return await self._describe_log_dirs(client)
        if snapshot is None:
            return LogSizes(source="unavailable")
        return await self._from_storage_nodes(snapshot)

    async def _describe_log_dirs(self, client: KafkaClient) -> LogSizes:
        if not client.brokers:
            await client.metadata(topics=[])
        cls = request_class(ApiKey.DESCRIBE_LOG_DIRS)
        out = LogSizes(source="DescribeLogDirs")

        async def ask(node_id: int) -> None:
            response = await client.send(ApiKey.DESCRIBE_LOG_DIRS, cls(topics=None), node_id)
            for result in response.results:
                entry = LogDir(node_id, result.log_dir)
                if result.error_code:
                    entry.error = f"error {result.error_code}"
                for topic in result.topics:
                    for p in topic.partitions:
                        key = (topic.name, p.partition_index)
                        out.partitions[key] = max(out.partitions.get(key, 0), p.partition_size)
                        entry.size_bytes += p.partition_size
                        entry.partitions += 1
                out.dirs.append(entry)

        await asyncio.gather(*(ask(n) for n in sorted(client.brokers)))
        return out

    async def _from_storage_nodes(self, snapshot: Snapshot) -> LogSizes:
        out = LogSizes(source="storage nodes (DescribePartitions)")
        leader_sizes: dict[TopicPartition, int] = {}

        async def ask(node_id: int, address: str) -> None:
            dirs: dict[str, LogDir] = {}
            try:
                response = await self._stub(address).DescribePartitions(
                    storage_pb2.DescribePartitionsRequest(), timeout=self.rpc_timeout_s
                )
            except grpc.aio.AioRpcError as exc:
                out.dirs.append(LogDir(node_id, "", error=exc.code().name))
                return
            for p in response.partitions:
                key = (p.topic, p.partition)
                out.partitions[key] = max(out.partitions.get(key, 0), p.size_bytes)
                if p.is_leader:
                    leader_sizes[key] = p.size_bytes
                root = log_dir_of(p.log_dir, p.topic, p.partition)
                entry = dirs.get(root)
                if entry is None:
                    entry = dirs[root] = LogDir(node_id, root)
                entry.size_bytes += p.size_bytes
                entry.partitions += 1
            out.dirs.extend(dirs.values() or [LogDir(node_id, "")])

        nodes = snapshot.nodes_of(NodeKind.STORAGE)
        await asyncio.gather(
            *(
                ask(n.node_id, address)
                for n in nodes
                if (address := snapshot.grpc_address(n.node_id)) is not None
            )
        )
        out.partitions.update(leader_sizes)
        out.dirs.sort(key=lambda d: (d.node_id, d.path))
        return out

    def _stub(self, address: str) -> storage_pb2_grpc.StorageStub:
        return self._channels.stub(address, address)

    async def close(self) -> None:
        await self._channels.close()


def log_dir_of(path: str, topic: str, partition: int) -> str:
    """The log dir (an entry of ``log.dirs``) holding a partition directory."""
    parent, sep, name = path.rstrip("/").rpartition("/")
    return (parent or "/") if sep and name == f"{topic}-{partition}" else path


def sizes_by_node(sizes: LogSizes) -> dict[int, list[LogDir]]:
    by_node: dict[int, list[LogDir]] = defaultdict(list)
    for d in sizes.dirs:
        by_node[d.node_id].append(d)
    return dict(by_node)
