"""What the transaction fault and anomaly tests share: the consume-transform-produce
loop as a process (tests/integration/txn_loop.py), input written and output read back
with real clients, and the exactly-once verdict.

Input records are numbered: key ``p<partition>-<n>``, value ``v<partition>-<n>``; the
loop writes ``v<partition>-<n>!`` to the output partition of the same number. The
verdict: the committed output of every partition is exactly its input, transformed,
in order (no record lost, none twice, none from an aborted transaction).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from fault_tools import cluster_metadata
from helpers.waiting import wait_until

from odradek.process import terminate
from odradek.rpc.v1 import common_pb2
from odradek.tools.launcher import Cluster
from odradek.transaction_shard import transaction_coordinator_of, transaction_shard_of

LOOP = Path(__file__).resolve().parent / "txn_loop.py"


def write_input(
    bootstrap: str,
    topic: str,
    partitions: int,
    per_partition: int,
    *,
    start: int = 0,
    pace: float = 0.0,
) -> None:
    """Numbers ``start`` .. ``per_partition - 1`` to every partition, ``pace`` seconds
    apart (0: as fast as the client goes)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for n in range(start, per_partition):
        for p in range(partitions):
            producer.produce(
                topic, key=f"p{p}-{n}".encode(), value=f"v{p}-{n}".encode(), partition=p
            )
        producer.poll(0)
        if pace:
            time.sleep(pace)
    assert producer.flush(60) == 0


def expected_output(partitions: int, per_partition: int) -> dict[int, list[bytes]]:
    return {p: [f"v{p}-{n}!".encode() for n in range(per_partition)] for p in range(partitions)}


def read_committed(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    timeout: float = 90.0,
    settle: float = 2.0,
) -> dict[int, list[bytes]]:
    """Every committed value per partition: reads until ``count`` arrived, then
    ``settle`` seconds more so that extra (duplicate) records would show."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-verify",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        seen = 0
        settle_until = None
        while time.monotonic() < deadline:
            if settle_until is None and seen >= count:
                settle_until = time.monotonic() + settle
            if settle_until is not None and time.monotonic() > settle_until:
                break
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    out[m.partition() or 0].append(m.value() or b"")
                    seen += 1
    finally:
        consumer.close()
    return out


def differences(expected: dict[int, list[bytes]], got: dict[int, list[bytes]]) -> list[str]:
    problems = []
    for p, want in expected.items():
        have = got.get(p, [])
        if have != want:
            dups = len(have) - len(set(have))
            missing = len(set(want) - set(have))
            first = next(
                (i for i, (a, b) in enumerate(zip(have, want, strict=False)) if a != b), None
            )
            problems.append(
                f"partition {p}: {len(have)} records for {len(want)}, {dups} duplicates, "
                f"{missing} missing, first difference at {first}"
            )
    return problems


class Loop:
    """One run of txn_loop.py; its stdout goes to a file the test can read."""

    def __init__(
        self,
        bootstrap: str,
        source: str,
        sink: str,
        group: str,
        transactional_id: str,
        log_dir: Path,
        idle_exit: float = 0.0,
    ) -> None:
        self.args = [bootstrap, source, sink, group, transactional_id]
        if idle_exit:
            self.args += ["--idle-exit", str(idle_exit)]
        self.log_dir = log_dir
        self.runs = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.output: Path | None = None

    def start(self) -> Loop:
        self.runs += 1
        self.output = self.log_dir / f"loop-{self.runs}.out"
        with open(self.output, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(LOOP), *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return self

    def lines(self) -> list[str]:
        return self.output.read_text(errors="replace").splitlines() if self.output else []

    def committed(self) -> int:
        """Records this run has committed so far."""
        return sum(int(line.split()[1]) for line in self.lines() if line.startswith("COMMITTED"))

    def wait_committed(self, at_least: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.committed() < at_least:
            assert self.process is not None
            assert self.process.poll() is None, f"loop exited: {self.lines()[-20:]}"
            assert time.monotonic() < deadline, f"loop made no progress: {self.lines()[-20:]}"
            time.sleep(0.05)

    def kill9(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def wait_exit(self, timeout: float = 120.0) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 10)


def wait_storage_online(cluster: Cluster, count: int = 1, timeout: float = 30.0) -> None:
    """Until the controller lists ``count`` storage nodes ONLINE (a cluster that has just
    started may still be registering them: topics could not be placed yet)."""

    def online() -> bool:
        nodes = cluster_metadata(cluster).nodes
        return (
            sum(n.kind == common_pb2.STORAGE and n.state == common_pb2.ONLINE for n in nodes)
            >= count
        )

    wait_until(online, f"{count} storage node(s) online", timeout=timeout)


def transaction_coordinator_name(
    metadata: common_pb2.ClusterMetadata, transactional_id: str
) -> str:
    """The launcher's name of the transaction coordinator owning the id's shard."""
    owner, _ = transaction_coordinator_of(
        metadata, transaction_shard_of(metadata, transactional_id)
    )
    assert owner >= 0, f"no transaction coordinator owns {transactional_id}'s shard"
    return f"transactions-{owner}"
