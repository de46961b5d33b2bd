"""The console's cluster reads against a real cluster: lag costs a fixed number of
requests however many partitions a group has, and partition sizes agree with the
segment files on disk."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.group_commits import commit_when_loaded

from odradek.console.groups import describe_groups
from odradek.console.log_sizes import LogSizeReader
from odradek.controller_client import ControllerClient
from odradek.kafka_client import ClientConfig, KafkaClient, Message
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.tools.launcher import Cluster

PARTITIONS = 12


class CountingClient(KafkaClient):
    """A KafkaClient that counts the requests it sends, by API."""

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self.sent: Counter[ApiKey] = Counter()

    async def send(self, api_key: ApiKey, request: Message, node_id: int | None = None) -> Message:
        self.sent[api_key] += 1
        return await super().send(api_key, request, node_id)


def _seed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(PARTITIONS * 10):
        producer.produce(topic, value=b"x" * 100, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    committed = {p: p for p in range(PARTITIONS)}  # partition p committed at offset p
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    commit_when_loaded(consumer, [TopicPartition(topic, p, o) for p, o in committed.items()])
    consumer.close()
    return committed


def test_lag_takes_one_list_offsets_and_one_offset_fetch(
    cluster: Cluster, unique_topic: str
) -> None:
    group = f"lag-{unique_topic}"
    committed = _seed(cluster.bootstrap_servers, unique_topic, group)

    async def run() -> tuple[Counter[ApiKey], dict[int, int | None]]:
        client = CountingClient(ClientConfig(tuple(cluster.bootstrap_servers.split(","))))
        try:
            (row,) = await describe_groups(client, [group])
            return client.sent, {o.partition: o.lag for o in row.offsets}
        finally:
            await client.close()

    sent, lags = asyncio.run(run())
    assert lags == {p: max(0, 10 - committed[p]) for p in range(PARTITIONS)}
    assert sent[ApiKey.LIST_OFFSETS] == 1  # one gateway leads every partition it fronts
    assert sent[ApiKey.OFFSET_FETCH] == 1
    assert sent[ApiKey.DESCRIBE_GROUPS] == 1
    assert sent[ApiKey.FIND_COORDINATOR] == 1
    assert sum(sent.values()) == 4, sent


def test_partition_sizes_match_the_segment_files(cluster: Cluster, unique_topic: str) -> None:
    _seed(cluster.bootstrap_servers, unique_topic, f"sizes-{unique_topic}")

    async def run() -> tuple[dict[tuple[str, int], int], list[str], str]:
        controller = ControllerClient(cluster.controller_address)
        client = KafkaClient(ClientConfig(tuple(cluster.bootstrap_servers.split(","))))
        reader = LogSizeReader()
        try:
            snapshot = Snapshot.build(await controller.get_metadata())
            await client.metadata(topics=[])
            sizes = await reader.read(client, snapshot)
            return sizes.partitions, [d.path for d in sizes.dirs], sizes.source
        finally:
            await reader.close()
            await client.close()
            await controller.close()

    partitions, dirs, source = asyncio.run(run())
    storage_dir = Path(cluster.data_dir) / "storage-100"
    assert str(storage_dir) in dirs
    for p in range(PARTITIONS):
        on_disk = sum(f.stat().st_size for f in (storage_dir / f"{unique_topic}-{p}").glob("*.log"))
        assert on_disk > 0
        assert partitions[(unique_topic, p)] == on_disk, (p, source)
