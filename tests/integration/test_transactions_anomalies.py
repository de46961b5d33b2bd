"""The anomalies Jepsen found in Kafka-compatible systems, as named tests (issue 13;
docs/compatibility.md C20), with real clients against a real cluster.

- aborted reads: a read_committed consumer must never see a record of an aborted
  transaction, however transactions of several producers interleave;
- torn transactions: a committed transaction over several partitions is visible on
  all of them or on none, never on some only;
- hanging transactions: a produce that arrives after its transaction ended (a late
  retry) must not open a new transaction that nobody will ever end, which would hold
  the last stable offset, and every read_committed consumer, forever (KIP-890 part 1);
- offsets committed for aborted work: offsets sent with an aborted transaction must
  not move the group, so the aborted input is read again;
- zombie fencing: of two producers with one transactional id, the older is fenced and
  nothing it writes afterwards becomes visible.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from fault_tools import create_topic
from helpers.wire import WireClient
from txn_tools import (
    Loop,
    differences,
    expected_output,
    read_committed,
    wait_storage_online,
    write_input,
)
from txn_wire import READ_COMMITTED, TxnSession, fetch, list_offset, offset_fetch, until

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import DescribeProducersRequest
from odradek.tools.launcher import Cluster

PARTITIONS = 3


@pytest.fixture
def topic(bootstrap: str, cluster: Cluster) -> Iterator[str]:
    wait_storage_online(cluster)
    name = f"jep-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, PARTITIONS, 1)
    yield name


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 2}
    )
    p.init_transactions(60)
    return p


def test_aborted_reads(bootstrap: str, topic: str) -> None:
    """Three producers interleave transactions over three partitions, aborting about
    half; a consumer reads concurrently. It sees every committed record once and no
    aborted one, in each producer's order."""
    committed: dict[int, list[tuple[int, bytes]]] = {}  # producer -> (partition, value)
    aborted: set[bytes] = set()
    errors: list[BaseException] = []

    def produce(n: int) -> None:
        rng = random.Random(n)
        p = txn_producer(bootstrap, f"jep-aborted-{n}-{uuid.uuid4().hex[:6]}")
        kept: list[tuple[int, bytes]] = []
        try:
            for t in range(12):
                values = [
                    ((n + i) % PARTITIONS, f"P{n}-T{t}-{i}".encode())
                    for i in range(rng.randint(1, 6))
                ]
                p.begin_transaction()
                for part, v in values:
                    p.produce(topic, value=v, partition=part)
                    if rng.random() < 0.5:
                        p.flush(30)  # interleave batches with the other producers
                if rng.random() < 0.5:
                    p.abort_transaction(60)
                    aborted.update(v for _, v in values)
                else:
                    p.commit_transaction(60)
                    kept.extend(values)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
        committed[n] = kept

    seen: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def consume() -> None:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "unused",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        try:
            while not stop.is_set():
                seen.extend(
                    (m.partition() or 0, m.value() or b"")
                    for m in c.consume(100, 0.1)
                    if m.error() is None
                )
        finally:
            c.close()

    reader = threading.Thread(target=consume)
    reader.start()
    writers = [threading.Thread(target=produce, args=(n,)) for n in range(3)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(180)
    total = sum(len(v) for v in committed.values())
    try:
        until(lambda: len(seen) >= total, timeout=60, what="every committed record")
    finally:
        stop.set()
        reader.join(30)
    assert not errors, errors
    assert aborted and total, "the schedule must both commit and abort"
    leaked = [v for _, v in seen if v in aborted]
    assert not leaked, f"aborted reads: {leaked[:10]}"
    assert sorted(seen) == sorted(pv for pvs in committed.values() for pv in pvs)
    for values in committed.values():  # each producer's order, per partition
        for part in range(PARTITIONS):
            mine = [v for q, v in values if q == part]
            assert [v for q, v in seen if q == part and v in set(mine)] == mine


def test_torn_transactions(bootstrap: str, topic: str) -> None:
    """Each transaction writes one record to every partition: read back, every
    committed transaction is on all partitions, every aborted one on none."""
    p = txn_producer(bootstrap, f"jep-torn-{uuid.uuid4().hex[:6]}")
    outcome: dict[int, bool] = {}
    for t in range(20):
        p.begin_transaction()
        for part in range(PARTITIONS):
            p.produce(topic, value=f"T{t}".encode(), partition=part)
        if t % 3 == 2:
            p.abort_transaction(60)
            outcome[t] = False
        else:
            p.commit_transaction(60)
            outcome[t] = True
    expected = sum(outcome.values()) * PARTITIONS
    got = read_committed(bootstrap, topic, PARTITIONS, expected, timeout=60)
    for part in range(PARTITIONS):
        assert got[part] == [f"T{t}".encode() for t, ok in sorted(outcome.items()) if ok], part


def test_hanging_transaction_after_a_late_produce(bootstrap: str, topic: str) -> None:
    """A batch of an already aborted (or committed) transaction that arrives late, as a
    retry would, is refused by the partition leader after it asked the coordinator
    (KIP-890): it cannot start a transaction nobody ends, so the last stable offset
    keeps up with the high watermark."""
    with TxnSession(bootstrap, f"jep-hang-{uuid.uuid4().hex[:6]}") as s:
        assert s.init().error_code == E.NONE
        for commit in (False, True):
            assert s.add_partitions(topic, [0]) == {(topic, 0): E.NONE}
            assert s.produce(topic, 0, [b"in-time"])[0] == E.NONE
            assert s.end(commit=commit) == E.NONE
            until(
                lambda: (
                    list_offset(bootstrap, topic, 0, isolation=READ_COMMITTED)
                    == list_offset(bootstrap, topic, 0, isolation=0)
                ),
                what="the marker",
            )
            end = list_offset(bootstrap, topic, 0, isolation=0)
            # The late batch: same producer, same epoch, next sequence. Until the
            # coordinator has completed the transaction (its markers acknowledged) it
            # answers the leader's check CONCURRENT_TRANSACTIONS, which the producer
            # gets as NOT_ENOUGH_REPLICAS and retries, as a client would (nothing is
            # appended meanwhile).
            deadline = time.monotonic() + 30
            while (code := s.produce(topic, 0, [b"late"])[0]) == E.NOT_ENOUGH_REPLICAS:
                assert list_offset(bootstrap, topic, 0, isolation=0) == end
                assert time.monotonic() < deadline, "the transaction never completed"
                time.sleep(0.1)
            assert code == E.INVALID_TXN_STATE
            assert list_offset(bootstrap, topic, 0, isolation=0) == end
            assert list_offset(bootstrap, topic, 0, isolation=READ_COMMITTED) == end
        T = DescribeProducersRequest.TopicRequest
        with WireClient(bootstrap) as c:
            r = c.call(DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[0])]), 0)
        (state,) = [p for p in r.topics[0].partitions[0].active_producers if p.producer_id == s.pid]
        assert state.current_txn_start_offset == -1
        entry = fetch(bootstrap, topic, 0, isolation=READ_COMMITTED)
        assert entry.last_stable_offset == entry.high_watermark


def test_offsets_committed_for_aborted_work(bootstrap: str, topic: str, tmp_path: Path) -> None:
    """Input consumed in an aborted transaction is consumed again: the offsets sent with
    it never reach the group (they vanish with the abort marker)."""
    source, group = f"{topic}-in", f"jep-offsets-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, source, 1, 1)
    write_input(bootstrap, source, 1, 10)

    def consume_all() -> tuple[Consumer, list[confluent_kafka.Message]]:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        c.subscribe([source])
        got: list[confluent_kafka.Message] = []
        until(
            lambda: got.extend(m for m in c.consume(10, 0.2) if m.error() is None) or len(got) >= 10
        )
        return c, got

    p = txn_producer(bootstrap, f"jep-offsets-{uuid.uuid4().hex[:6]}")
    for attempt, commit in enumerate((False, True)):
        consumer, messages = consume_all()
        assert [m.offset() for m in messages] == list(range(10)), attempt
        p.begin_transaction()
        for m in messages:
            p.produce(topic, value=(m.value() or b"") + b"!", partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(source, 0, 10)], consumer.consumer_group_metadata(), 60
        )
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
        consumer.close()
        want = (10, E.NONE) if commit else (-1, E.NONE)
        until(
            lambda want=want: offset_fetch(bootstrap, group, source, [0], stable=True)[0] == want,
            what=f"the group's offset after {'commit' if commit else 'abort'}",
        )
    got = read_committed(bootstrap, topic, PARTITIONS, 10, timeout=30)
    assert got[0] == [f"v0-{n}!".encode() for n in range(10)]


def test_zombie_fencing(bootstrap: str, topic: str) -> None:
    """Two producers with one transactional id: the second's InitProducerId bumps the
    epoch, aborts what the first left open and fences it for good."""
    shared = f"jep-zombie-{uuid.uuid4().hex[:6]}"
    zombie = txn_producer(bootstrap, shared)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-open", partition=0)
    assert zombie.flush(30) == 0
    successor = txn_producer(bootstrap, shared)  # fences the zombie
    with pytest.raises(KafkaException) as info:
        zombie.produce(topic, value=b"zombie-late", partition=0)
        zombie.commit_transaction(30)
    assert info.value.args[0].fatal(), info.value.args[0]
    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=0)
    successor.commit_transaction(60)
    got = read_committed(bootstrap, topic, PARTITIONS, 1, timeout=30)
    assert got[0] == [b"successor"]


def test_zombie_loop_is_fenced_and_output_stays_exactly_once(
    bootstrap: str, topic: str, tmp_path: Path
) -> None:
    """Two consume-transform-produce loops with one transactional id and one group: the
    later one fences the earlier (which stops with a fatal error), and the output is
    still the input exactly once."""
    source, tag = f"{topic}-src", uuid.uuid4().hex[:6]
    create_topic(bootstrap, source, PARTITIONS, 1)
    write_input(bootstrap, source, PARTITIONS, 100)
    args = (bootstrap, source, topic, f"zloop-{tag}", f"zloop-{tag}", tmp_path)
    first = Loop(*args).start()
    second = Loop(*args, idle_exit=8.0)
    second.runs = 10  # its own output file
    # Input keeps coming, so the first loop keeps working when the second starts.
    feeder = threading.Thread(
        target=write_input,
        args=(bootstrap, source, PARTITIONS, 400),
        kwargs={"start": 100, "pace": 0.01},
    )
    try:
        first.wait_committed(100)
        feeder.start()
        second.start()
        assert first.wait_exit(60) != 0  # fenced: a fatal error, not a silent duplicate
        assert any(line.startswith("FATAL") for line in first.lines()), first.lines()[-5:]
        feeder.join(60)
        got = read_committed(bootstrap, topic, PARTITIONS, PARTITIONS * 400, timeout=120)
    finally:
        first.stop()
        second.stop()
    assert not differences(expected_output(PARTITIONS, 400), got)
