"""What the fault tests share: a numbered-message producer with a real client, a
verifying consumer, and probes of the controller's view (which storage node leads,
which controller is active).

Every message's key and value are its sequence number. "Acknowledged" means the
delivery callback reported no error; the verdict is that every acknowledged number
is read back exactly once, in increasing order within its partition.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import re
import signal
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import grpc
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.waiting import wait_until

from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc
from odradek.tools.dump_log import dump_log
from odradek.tools.launcher import Cluster

# ---------------------------------------------------------------------- controller probes


async def _metadata_from(address: str, timeout: float) -> common_pb2.ClusterMetadata | None:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            return await controller_pb2_grpc.ControllerStub(channel).GetMetadata(
                controller_pb2.GetMetadataRequest(), timeout=timeout
            )
        except grpc.aio.AioRpcError:
            return None


def active_controllers(
    cluster: Cluster, timeout: float = 1.0
) -> dict[str, common_pb2.ClusterMetadata]:
    """Controller name -> metadata, for every running controller that answers as active."""

    async def probe() -> dict[str, common_pb2.ClusterMetadata]:
        out = {}
        for svc in cluster.controllers():
            if svc.process.poll() is not None:
                continue
            md = await _metadata_from(cluster.grpc_address(svc.spec.name), timeout)
            if md is not None:
                out[svc.spec.name] = md
        return out

    return asyncio.run(probe())


def cluster_metadata(cluster: Cluster, timeout: float = 15.0) -> common_pb2.ClusterMetadata:
    """The metadata of the active controller (the newest epoch should two answer)."""
    active = wait_until(
        lambda: active_controllers(cluster), "an active controller", timeout=timeout, interval=0.1
    )
    return max(active.values(), key=lambda md: md.controller_epoch)


def kill9_service(cluster: Cluster, name: str) -> None:
    """kill -9 one service of the cluster and reap it (``cluster.restart`` starts it again)."""
    svc = cluster.service(name)
    os.kill(svc.process.pid, signal.SIGKILL)
    svc.process.wait(10)


def partition_state(cluster: Cluster, topic: str, partition: int) -> common_pb2.Partition:
    md = cluster_metadata(cluster)
    for t in md.topics:
        if t.name == topic:
            return t.partitions[partition]
    raise AssertionError(f"no topic {topic}")


def wait_full_isr(cluster: Cluster, topic: str, partitions: int, timeout: float = 60.0) -> None:
    def full() -> bool:
        md = cluster_metadata(cluster)
        t = next((t for t in md.topics if t.name == topic), None)
        return t is not None and all(
            p.leader >= 0 and len(p.isr) == len(p.replicas) for p in t.partitions[:partitions]
        )

    wait_until(full, f"a full ISR on every partition of {topic}", timeout=timeout, interval=0.1)


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, rf, config=dict(configs))], request_timeout=30
    )
    futures[topic].result(30)


def online_storage_nodes(cluster: Cluster) -> int:
    """How many storage nodes the active controller holds ONLINE (placeable)."""
    return sum(
        n.kind == common_pb2.STORAGE and n.state == common_pb2.ONLINE
        for n in cluster_metadata(cluster).nodes
    )


def create_topic_once_placeable(
    cluster: Cluster, topic: str, partitions: int, rf: int, timeout: float = 60.0
) -> None:
    """:func:`create_topic` once ``rf`` storage nodes are ONLINE, again while it answers
    INVALID_REPLICATION_FACTOR (nothing was created then). A node paused just under
    ``broker.session.timeout.ms`` is fenced a moment after SIGCONT (heartbeat interval and
    loop lag add to the pause) and registers again a moment later: a CreateTopics in
    between finds one broker too few, as Kafka's would (chaos seed 95 after seed 94)."""

    def created() -> bool:
        if online_storage_nodes(cluster) < rf:
            return False
        try:
            create_topic(cluster.bootstrap_servers, topic, partitions, rf)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR:
                raise
            return False
        return True

    wait_until(
        created, f"{rf} placeable storage nodes to create {topic}", timeout=timeout, interval=0.2
    )


# ---------------------------------------------------------------------- producing


@dataclass
class NumberedProducer:
    """Writes 0, 1, 2, ... as fast as ``rate`` allows from a thread until stopped."""

    bootstrap: str
    topic: str
    rate: float = 400.0
    config: dict[str, Any] = field(default_factory=dict)
    # seq -> (partition, offset); offset -1 when the client could not tell it
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    sent: int = 0
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)
        self._lock = threading.Lock()
        # The client's own account of its produce errors, retries and epoch bumps
        # (librdkafka ``debug=eos,msg``), the last lines kept for a failure's message.
        self.client_log: deque[str] = deque(maxlen=20000)
        self._logger = logging.getLogger(f"numbered-producer-{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.DEBUG)
        self._logger.addHandler(_RingHandler(self.client_log))

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        key = msg.key()
        assert key is not None
        seq = int(key)
        with self._lock:
            if err is None:
                # Offset None: librdkafka acknowledged it implicitly (a later batch of the
                # idempotent producer succeeded, so this one is in the log; offset unknown).
                offset = msg.offset()
                self.acked[seq] = (msg.partition() or 0, -1 if offset is None else offset)
            else:
                self.failed[seq] = str(err)

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.errors.append(f"fatal: {err}")

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 100,
                "retry.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": self._on_error,
                "debug": "eos,msg",
                "logger": self._logger,
                **self.config,
            }
        )
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate) + 1
            while self.sent < due and not self._stop.is_set():
                seq = self.sent
                try:
                    producer.produce(
                        self.topic, key=str(seq), value=str(seq), on_delivery=self._on_delivery
                    )
                except BufferError:
                    producer.poll(0.05)
                    continue
                self.sent += 1
            producer.poll(0.01)
        remaining = producer.flush(120)
        if remaining:
            self.errors.append(f"{remaining} messages still undelivered after flush")

    def stop(self, timeout: float = 150.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the producer did not finish flushing"


class _RingHandler(logging.Handler):
    def __init__(self, ring: deque[str]) -> None:
        super().__init__(logging.DEBUG)
        self.ring = ring

    def emit(self, record: logging.LogRecord) -> None:
        self.ring.append(record.getMessage())


# ---------------------------------------------------------------------- verifying


def read_everything(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> dict[int, list[tuple[int, int]]]:
    """Partition -> [(offset, seq)] from the log start up to the high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, int]]] = defaultdict(list)
        positions = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(positions[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"could not read up to the high watermarks {ends}: {positions}"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            p, offset = msg.partition() or 0, msg.offset() or 0
            key = msg.key()
            assert key is not None
            out[p].append((offset, int(key)))
            positions[p] = offset + 1
        return dict(out)
    finally:
        consumer.close()


def verify(acked: dict[int, tuple[int, int]], log: dict[int, list[tuple[int, int]]]) -> list[str]:
    """Problems found: lost or duplicated acknowledged messages, order breaks, offsets
    that moved, duplicates of any message (idempotence)."""
    problems: list[str] = []
    where: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for p, entries in log.items():
        last_seq = -1
        for offset, seq in entries:
            where[seq].append((p, offset))
            if seq in acked and seq <= last_seq:
                problems.append(f"partition {p}: {seq} at offset {offset} after {last_seq}")
            if seq in acked:
                last_seq = max(last_seq, seq)
    for seq, (p, offset) in sorted(acked.items()):
        found = where.get(seq, [])
        if not found:
            problems.append(f"acknowledged {seq} (partition {p} offset {offset}) is lost")
        elif len(found) > 1:
            problems.append(f"acknowledged {seq} appears {len(found)} times: {found}")
        elif found[0] != (p, offset) and not (offset == -1 and found[0][0] == p):
            problems.append(f"acknowledged {seq} at {(p, offset)} is now at {found[0]}")
    for seq, found in where.items():
        if seq not in acked and len(found) > 1:
            problems.append(f"unacknowledged {seq} was written {len(found)} times: {found}")
    return problems


_PROBLEM_OFFSETS = re.compile(r"\((\d+), (\d+)\)|partition (\d+): \d+ at offset (\d+)")
_BATCH_OFFSETS = re.compile(r"baseOffset: (\d+) lastOffset: (\d+)")


def explain(
    cluster: Cluster, topic: str, problems: list[str], producer: NumberedProducer | None = None
) -> str:
    """What a failed verdict needs to be understood: every storage node's batches around
    the offsets the problems name (producer id, epoch, sequences, leader epoch: which
    leader wrote a duplicate, and under which producer epoch), and the client's last
    produce errors, retries and epoch bumps."""
    around: dict[int, set[int]] = defaultdict(set)
    for problem in problems:
        for m in _PROBLEM_OFFSETS.finditer(problem):
            part, offset = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            around[int(part)].add(int(offset))
    out = io.StringIO()
    for part, offsets in sorted(around.items()):
        low, high = min(offsets) - 6, max(offsets) + 6
        for node_dir in sorted(cluster.data_dir.glob("storage-*")):
            pdir = node_dir / f"{topic}-{part}"
            out.write(f"-- {node_dir.name} {pdir.name}, offsets {low}..{high}\n")
            for seg in sorted(pdir.glob("*.log")):
                dumped = io.StringIO()
                dump_log(str(seg), False, False, dumped)
                for line in dumped.getvalue().splitlines():
                    m = _BATCH_OFFSETS.search(line)
                    if m and int(m.group(2)) >= low and int(m.group(1)) <= high:
                        out.write(line.split(" isTransactional")[0] + "\n")
            checkpoint = pdir / "leader-epoch-checkpoint"
            if checkpoint.exists():
                epochs = checkpoint.read_text().split(chr(10))[2:]
                out.write("   leader epochs: " + "; ".join(e for e in epochs if e) + "\n")
    if producer is not None:
        lines = [
            line
            for line in producer.client_log
            if not line.startswith(("PRODUCE", "MSGSET")) or "error" in line.lower()
        ]
        out.write("-- the producer's last produce errors and idempotence events:\n")
        out.write("\n".join(lines[-150:]) + "\n")
    return out.getvalue()
