"""Transactions with real clients (issue 13): every client's transactional producer and
every client's read_committed consumer.

- Each transactional producer (confluent-kafka, kafka-python, aiokafka, Java,
  kafkajs) commits, aborts and commits a transaction; a read_committed consumer sees
  exactly the committed records, while a read_uncommitted one also sees the aborted
  records, which proves they were written (the test could fail).
- Each client's read_committed consumer reads a partition where two producers'
  transactions interleave, one committed and one aborted, batch by batch: only the
  aborted-transactions list of the Fetch response tells the client which batches to
  drop, and a transaction still open holds every consumer at the last stable offset.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest
from compat_clients import Client, JavaClient, create_topic
from compat_model import Rec
from compat_txn import TXN_CLIENTS, Txn, read_committed, read_uncommitted, run_transactions


def recs(tag: str, n: int) -> list[Rec]:
    return [Rec(f"{tag}-k{i}".encode(), f"{tag}-{i}".encode()) for i in range(n)]


@pytest.mark.parametrize("name", TXN_CLIENTS)
def test_transactional_producer(
    name: str, clients: Callable[[str], Client], bootstrap: str
) -> None:
    topic = f"txn-p-{name}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=1)
    first, aborted, last = recs("c1", 4), recs("ab", 3), recs("c2", 5)
    run_transactions(
        clients(name),
        topic,
        [Txn(first, True), Txn(aborted, False), Txn(last, True)],
        transactional_id=f"compat-{name}-{uuid.uuid4().hex[:6]}",
        partition=0,
    )
    reader = clients("confluent")
    committed = reader.consume(topic, [0], 9, config=read_committed("confluent"), timeout=30)
    assert [r.value for r in committed] == [r.value for r in first + last]
    # Each marker (a control batch) takes an offset of its own: 4 and 8.
    assert [r.offset for r in committed] == [0, 1, 2, 3, 9, 10, 11, 12, 13]
    everything = reader.consume(topic, [0], 12, config=read_uncommitted("confluent"), timeout=30)
    assert [r.value for r in everything] == [r.value for r in first + aborted + last]


@pytest.fixture(scope="module")
def interleaved(bootstrap: str) -> Iterator[tuple[str, list[Rec]]]:
    """A partition where a committed and an aborted transaction interleave batch by
    batch, followed by a plain (non-transactional) record; returns what committed."""
    topic = f"txn-mixed-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=1)

    def producer(tid: str) -> confluent_kafka.Producer:
        p = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0}
        )
        p.init_transactions(60)
        p.begin_transaction()
        return p

    good = producer(f"mixed-good-{uuid.uuid4().hex[:6]}")
    bad = producer(f"mixed-bad-{uuid.uuid4().hex[:6]}")
    kept: list[Rec] = []
    for i in range(4):
        for p, tag in ((good, "good"), (bad, "bad")):
            r = Rec(f"{tag}-{i}".encode(), f"{tag}-{i}".encode())
            p.produce(topic, key=r.key, value=r.value, partition=0)
            assert p.flush(30) == 0  # one batch each, alternating in the log
            if p is good:
                kept.append(r)
    bad.abort_transaction(60)
    good.commit_transaction(60)
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    tail = Rec(b"plain", b"plain")
    plain.produce(topic, key=tail.key, value=tail.value, partition=0)
    assert plain.flush(30) == 0
    yield topic, [*kept, tail]


@pytest.mark.parametrize("name", TXN_CLIENTS)
def test_read_committed_consumer(
    name: str, clients: Callable[[str], Client], interleaved: tuple[str, list[Rec]]
) -> None:
    topic, expected = interleaved
    got = clients(name).consume(topic, [0], len(expected), config=read_committed(name), timeout=30)
    assert [r.value for r in got] == [r.value for r in expected]


def test_open_transaction_holds_read_committed_consumers_at_the_lso(
    bootstrap: str, clients: Callable[[str], Client]
) -> None:
    """Records after an open transaction's first batch are invisible to read_committed
    consumers until it ends, even committed ones of other producers (Kafka's LSO)."""
    topic = f"txn-lso-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=1)
    open_txn = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"lso-{uuid.uuid4().hex[:6]}"}
    )
    open_txn.init_transactions(60)
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    assert plain.flush(30) == 0
    open_txn.begin_transaction()
    open_txn.produce(topic, value=b"in-txn", partition=0)
    assert open_txn.flush(30) == 0
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(30) == 0
    reader = clients("kafka-python")
    seen = reader.consume(topic, [0], 3, config=read_committed("kafka-python"), timeout=3)
    assert [r.value for r in seen] == [b"before"]
    uncommitted = reader.consume(topic, [0], 3, config=read_uncommitted("kafka-python"))
    assert [r.value for r in uncommitted] == [b"before", b"in-txn", b"after"]
    started = time.monotonic()
    open_txn.commit_transaction(60)
    seen = reader.consume(topic, [0], 3, config=read_committed("kafka-python"), timeout=30)
    assert [r.value for r in seen] == [b"before", b"in-txn", b"after"]
    assert time.monotonic() - started < 30


def test_java_admin_lists_and_describes_transactions_and_producers(
    bootstrap: str, java: JavaClient
) -> None:
    """``Admin.listTransactions/describeTransactions/describeProducers`` (what
    kafka-transactions.sh runs) against an open transaction."""
    topic = f"txn-admin-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=2)
    tid = f"admin-{uuid.uuid4().hex[:6]}"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=1)
    assert producer.flush(30) == 0
    try:
        listed = [row for row in java.run("list-transactions", {}) if row[0] == "TXN"]
        mine = [row for row in listed if row[1] == tid]
        assert len(mine) == 1 and mine[0][3] == "Ongoing", listed
        pid = int(mine[0][2])
        (desc,) = [
            row for row in java.run("describe-transactions", {"ids": tid}) if row[0] == "DESC"
        ]
        assert desc[1:] == [tid, "Ongoing", str(pid), "0", "60000", f"{topic}-1"]
        rows = java.run("describe-producers", {"topic": topic, "partitions": "0,1"})
        producers = [row for row in rows if row[0] == "PRODUCER"]
        assert [(r[1], r[2], r[3], r[5]) for r in producers] == [("1", str(pid), "0", "0")]
    finally:
        producer.commit_transaction(60)
    (desc,) = [row for row in java.run("describe-transactions", {"ids": tid}) if row[0] == "DESC"]
    assert desc[2] in ("PrepareCommit", "CompleteCommit")


def test_java_admin_aborts_a_hanging_transaction(
    bootstrap: str, java: JavaClient, clients: Callable[[str], Client]
) -> None:
    """``Admin.abortTransaction`` (kafka-transactions.sh abort, KIP-664): an ABORT marker
    written for a producer whose transaction holds the last stable offset, found with
    ``describeProducers``, releases read_committed consumers and drops its records."""
    topic = f"txn-abort-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions=1)
    hanging = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"hang-{uuid.uuid4().hex[:6]}",
            # outlive the JVM runs below on a loaded machine: a timed-out transaction is
            # aborted by its coordinator, which fences the producer (Kafka's behaviour)
            "transaction.timeout.ms": 600_000,
        }
    )
    hanging.init_transactions(60)
    hanging.begin_transaction()
    hanging.produce(topic, value=b"hanging", partition=0)
    assert hanging.flush(30) == 0
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(30) == 0
    reader = clients("kafka-python")
    held = reader.consume(topic, [0], 1, config=read_committed("kafka-python"), timeout=3)
    assert held == [], "the open transaction holds read_committed at the LSO"

    rows = java.run("describe-producers", {"topic": topic, "partitions": "0"})
    (txn,) = [r for r in rows if r[0] == "PRODUCER" and r[5] != "-1"]
    assert txn[5] == "0", "its transaction starts at offset 0"
    pid, epoch, coordinator_epoch = txn[2], txn[3], max(0, int(txn[6]))
    out = java.run(
        "abort-transaction",
        {
            "topic": topic,
            "partition": 0,
            "producer-id": pid,
            "producer-epoch": epoch,
            "coordinator-epoch": coordinator_epoch,
        },
    )
    assert ["ABORTED", f"{topic}-0"] in out
    seen = reader.consume(topic, [0], 1, config=read_committed("kafka-python"), timeout=30)
    assert [r.value for r in seen] == [b"after"]
    rows = java.run("describe-producers", {"topic": topic, "partitions": "0"})
    assert all(r[5] == "-1" for r in rows if r[0] == "PRODUCER"), rows
    hanging.abort_transaction(60)  # the coordinator's own ABORT marker is accepted too
