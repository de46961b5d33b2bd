"""The sink's direct producer (``odradek.pipeline.arrow_producer``) against the shared
cluster, without Spark: pipelined Produce keeps every record once and in order per
partition, also when its connections are cut with batches in flight (resent with
the same sequence numbers, which the broker deduplicates)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pipeline_kafka import create_topic, read_all

from odradek.pipeline.arrow_producer import MAX_QUEUED_BATCHES, ArrowProducer
from odradek.pipeline.wire_connection import close_metadata_clients
from odradek.tools.launcher import Cluster

PARTITIONS = 3
ROWS_PER_BATCH = 3000


@pytest.fixture(autouse=True, scope="module")
def metadata_clients() -> Iterator[None]:
    """Close the pooled metadata clients before the shared cluster stops."""
    yield
    close_metadata_clients()


def arrow_batch(first: int) -> tuple[pa.Array, pa.Array]:
    """Keys (every fourth null: sticky partition) and values naming their row."""
    rows = range(first, first + ROWS_PER_BATCH)
    keys = pa.array([None if i % 4 == 0 else f"k{i % 97}" for i in rows], pa.string())
    values = pa.array([b"%08d" % i + b"." * 300 for i in rows], pa.binary())
    return keys, values


def conf(cluster: Cluster) -> dict[str, str]:
    return {"bootstrap.servers": cluster.bootstrap_servers}


def check_once_in_order(cluster: Cluster, topic: str, n: int) -> None:
    got = read_all(cluster.bootstrap_servers, topic, PARTITIONS)
    rows = [int(r.value[:8]) for r in got]
    assert sorted(rows) == list(range(n))  # every row once
    for p in range(PARTITIONS):
        in_log = [int(r.value[:8]) for r in got if r.partition == p]
        assert in_log == sorted(in_log)  # the order they were sent in


def test_pipelined_produce_keeps_every_record_once_and_in_order(
    cluster: Cluster, unique_topic: str
) -> None:
    create_topic(cluster.bootstrap_servers, unique_topic, PARTITIONS)
    producer = ArrowProducer(conf(cluster))
    batches = 2 * MAX_QUEUED_BATCHES  # more than the queue holds: send waits for acks
    try:
        assert producer.knows(unique_topic)
        for b in range(batches):
            keys, values = arrow_batch(b * ROWS_PER_BATCH)
            producer.send(unique_topic, keys, values, None)
        producer.flush()
    finally:
        producer.close()
    check_once_in_order(cluster, unique_topic, batches * ROWS_PER_BATCH)


def test_cut_connections_resend_without_duplicates(cluster: Cluster, unique_topic: str) -> None:
    create_topic(cluster.bootstrap_servers, unique_topic, PARTITIONS)
    producer = ArrowProducer(conf(cluster))
    batches = 12
    try:
        assert producer.knows(unique_topic)
        for b in range(batches):
            keys, values = arrow_batch(b * ROWS_PER_BATCH)
            producer.send(unique_topic, keys, values, None)
            if b % 4 == 1:  # cut every connection, requests in flight or not
                for conn in producer._conns.values():
                    conn.sock.shutdown(socket.SHUT_RDWR)
        producer.flush()
    finally:
        producer.close()
    check_once_in_order(cluster, unique_topic, batches * ROWS_PER_BATCH)
