"""Round trips through every client: what goes in comes out, byte for byte, in order.

Each client produces keys (binary too), null keys, tombstones, empty values and
headers (repeated names, non-ASCII names, null values), then reads them back with
its own consumer and with a second client, so one client's quirk cannot hide a
broker bug. kafkajs can only consume in a consumer group; its reading test runs
once groups are served.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable

import pytest
from compat_clients import CLIENT_NAMES, Client, ConfluentClient, KafkajsClient, create_topic
from compat_model import (
    MIB,
    Features,
    Rec,
    assert_consecutive,
    assert_same_records,
    standard_records,
)

Clients = Callable[[str], Client]


def _reader(name: str, clients: Clients) -> Client:
    """The client's own consumer; kafkajs reads through librdkafka (no group-less consumer)."""
    return clients("confluent") if name == "kafkajs" else clients(name)


def _second_reader(name: str, clients: Clients) -> Client:
    return clients("java") if name == "confluent" else clients("confluent")


def _check_timestamps(records: list[Rec], before_ms: int, what: str) -> None:
    after_ms = int(time.time() * 1000) + 1000
    for r in records:
        assert r.timestamp is not None and before_ms - 1000 <= r.timestamp <= after_ms, (
            f"{what}: timestamp {r.timestamp} of {r.short()} is not the produce time"
        )


@pytest.mark.parametrize("name", CLIENT_NAMES)
def test_keys_nulls_tombstones_headers_in_order(
    name: str, clients: Clients, unique_topic: str
) -> None:
    client = clients(name)
    records = standard_records(client.features)
    before = int(time.time() * 1000)
    acked = client.produce(unique_topic, records, partition=0)
    if all(a.offset >= 0 for a in acked):
        assert_consecutive(acked, 0, f"{name} producer acks")
    for reader in (_reader(name, clients), _second_reader(name, clients)):
        got = reader.consume(unique_topic, [0], len(records))
        what = f"produced by {name}, consumed by {reader.name}"
        assert_same_records(got, records, what)
        assert_consecutive(got, 0, what)
        if reader.features.timestamps:
            _check_timestamps(got, before, what)


@pytest.mark.parametrize("name", CLIENT_NAMES)
def test_one_mib_values(name: str, clients: Clients, unique_topic: str, bootstrap: str) -> None:
    """1 MiB values. Kafka's default max.message.bytes (1048588) bounds the whole batch,
    header and framing included, so a 1 MiB value needs a topic that allows more (the
    exact default boundary is tested in test_compat_errors); kafkajs sends all three in
    one batch."""
    create_topic(bootstrap, unique_topic, 1, {"max.message.bytes": str(4 * MIB)})
    client = clients(name)
    if client.features.binary:
        values = [os.urandom(MIB), os.urandom(MIB - 1), os.urandom(MIB)]
    else:
        values = [bytes([97 + i]) * MIB for i in range(3)]
    records = [Rec(f"big-{i}".encode(), v) for i, v in enumerate(values)]
    client.produce(unique_topic, records, partition=0)
    got = _reader(name, clients).consume(unique_topic, [0], len(records), timeout=60)
    assert_same_records(got, records, f"1 MiB values produced and consumed by {name}")
    assert_consecutive(got, 0, name)


@pytest.mark.parametrize("name", CLIENT_NAMES)
def test_many_partitions_keep_per_key_order(
    name: str, clients: Clients, unique_topic: str, bootstrap: str
) -> None:
    """3,000 keyed records through the client's own partitioner over 24 partitions:
    every key lands in one partition, in send order, and nothing is lost or doubled."""
    partitions = 24
    create_topic(bootstrap, unique_topic, partitions)
    client = clients(name)
    records = [Rec(b"k%d" % (i % 97), b"%d" % i) for i in range(3000)]
    acked = client.produce(unique_topic, records)
    got = _reader(name, clients).consume(unique_topic, range(partitions), len(records), timeout=60)
    assert sorted(int(r.value or b"") for r in got) == list(range(len(records))), (
        f"{name}: lost or duplicated records ({len(got)} consumed of {len(records)})"
    )
    per_key: dict[bytes | None, list[int]] = defaultdict(list)
    key_partitions: dict[bytes | None, set[int]] = defaultdict(set)
    per_partition: dict[int, list[Rec]] = defaultdict(list)
    for r in got:
        per_key[r.key].append(int(r.value or b""))
        key_partitions[r.key].add(r.partition)
        per_partition[r.partition].append(r)
    for key, values in per_key.items():
        assert values == sorted(values), f"{name}: key {key!r} out of order: {values[:20]}"
        assert len(key_partitions[key]) == 1, f"{name}: key {key!r} in {key_partitions[key]}"
    assert len(per_partition) > partitions // 2, f"{name} used only {sorted(per_partition)}"
    for p, recs in per_partition.items():
        assert_consecutive(recs, 0, f"{name} partition {p}")
    if all(a.partition >= 0 and a.offset >= 0 for a in acked):
        where = {(a.partition, a.offset): a.value for a in acked}
        assert {(r.partition, r.offset): r.value for r in got} == where, (
            f"{name}: records are not where the produce acks said"
        )


def test_kafkajs_consumes_in_a_group(
    kafkajs: KafkajsClient, confluent: ConfluentClient, unique_topic: str
) -> None:
    records = standard_records(Features(null_header_values=False))
    confluent.produce(unique_topic, records, partition=0)
    got = kafkajs.consume(unique_topic, [0], len(records), timeout=30)
    assert_same_records(got, records, "produced by confluent, consumed by kafkajs")
    assert_consecutive(got, 0, "kafkajs")
