"""The admin calls behind ``odradek reassign`` and ``odradek cluster``, over kafka-python.

Plain Kafka APIs only (Metadata, DescribeCluster, AlterPartitionReassignments,
ListPartitionReassignments, DescribeLogDirs, AlterReplicaLogDirs,
IncrementalAlterConfigs, ElectLeaders), so the tools work against any Kafka cluster.
Throttles are set and cleared as kafka-reassign-partitions.sh does: the rates on every
broker involved, the throttled replica lists on every topic moved.

:class:`MoveProgress` turns DescribeLogDirs answers into progress while data moves:
for each replica being added, the bytes it holds against the partition's size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import kafka.errors as kafka_errors
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest

from odradek.tools.common import mb
from odradek.tools.reassign_files import PartitionMove, reassigning_brokers, throttled_replicas

TP = tuple[str, int]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

_Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
_Partition = _Topic.ReassignablePartition


@dataclass(frozen=True)
class Ongoing:
    replicas: list[int]
    adding: list[int]
    removing: list[int]


@dataclass(frozen=True)
class LogDirReplica:
    broker: int
    log_dir: str
    size: int
    offset_lag: int
    future: bool


class ReassignAdmin:
    def __init__(self, admin: KafkaAdminClient) -> None:
        self.admin = admin

    # -- cluster and topics ------------------------------------------------------------
    def brokers(self) -> dict[int, str | None]:
        """Broker id -> rack."""
        cluster: Any = self.admin.describe_cluster()
        return {int(b["broker_id"]): b.get("rack") for b in cluster["brokers"]}

    def assignment(self, topics: Iterable[str] | None = None) -> dict[TP, list[int]]:
        """Current replica lists; a missing topic raises UNKNOWN_TOPIC_OR_PARTITION."""
        wanted = None if topics is None else sorted(set(topics))
        out: dict[TP, list[int]] = {}
        for topic in self.admin.describe_topics(wanted):
            code = int(topic.get("error_code", 0))
            if code:
                error = kafka_errors.for_code(code)
                raise error(f"Topic {topic.get('name') or topic.get('topic')} not found.")
            name = topic.get("name") or topic.get("topic")
            for p in topic["partitions"]:
                out[(name, int(p["partition_index"]))] = [int(r) for r in p["replica_nodes"]]
        return out

    def ongoing(self) -> dict[TP, Ongoing]:
        answer: Any = self.admin.list_partition_reassignments()
        return {
            (tp.topic, tp.partition): Ongoing(
                list(r["replicas"]), list(r["adding_replicas"]), list(r["removing_replicas"])
            )
            for tp, r in answer.items()
        }

    def log_dirs(self, brokers: Iterable[int] | None = None) -> dict[TP, list[LogDirReplica]]:
        """Every replica's log directory, size and lag, from DescribeLogDirs on each broker."""
        out: dict[TP, list[LogDirReplica]] = {}
        wanted = None if brokers is None else sorted(set(brokers))
        answers: Any = self.admin.describe_log_dirs(brokers=wanted)
        for answer in answers:
            broker = int(answer["broker"])
            for d in answer["log_dirs"]:
                if d.get("error_code"):
                    continue
                for topic in d.get("topics", []):
                    for p in topic["partitions"]:
                        out.setdefault((topic["name"], int(p["partition_index"])), []).append(
                            LogDirReplica(
                                broker,
                                d["log_dir"],
                                int(p["partition_size"]),
                                int(p["offset_lag"]),
                                bool(p["is_future_key"]),
                            )
                        )
        return out

    def partition_sizes(self) -> dict[TP, int]:
        """Bytes of each partition: the largest of its current (not future) replicas."""
        sizes: dict[TP, int] = {}
        for tp, replicas in self.log_dirs().items():
            current = [r.size for r in replicas if not r.future]
            if current:
                sizes[tp] = max(current)
        return sizes

    # -- reassignments -----------------------------------------------------------------
    def alter(self, targets: Mapping[TP, Sequence[int] | None]) -> dict[TP, str]:
        """Start (replicas) or cancel (None) reassignments; returns the failures' messages.

        kafka-python's ``alter_partition_reassignments`` keeps only the error codes; the
        broker's messages say more (which broker is unknown, ...), so the request goes
        through the admin client's own controller routing when it has it.
        """
        if not targets:
            return {}
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(
                _Partition(
                    partition_index=partition, replicas=None if replicas is None else list(replicas)
                )
            )
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=30_000,
            topics=[_Topic(name=t, partitions=parts) for t, parts in by_topic.items()],
        )
        manager = getattr(self.admin, "_manager", None)
        send = getattr(self.admin, "_send_request_to_controller", None)
        errors: dict[TP, str] = {}
        if manager is None or send is None:  # another kafka-python: codes only
            answer: Any = self.admin.alter_partition_reassignments(
                {
                    TopicPartition(t, p): (None if r is None else list(r))
                    for (t, p), r in targets.items()
                }
            )
            for tp, error in answer.items():
                if error is not None:
                    errors[(tp.topic, tp.partition)] = _describe(error)
            return errors
        response: Any = manager.run(send, request)
        if response.error_code:
            error = kafka_errors.for_code(response.error_code)
            raise error(response.error_message or "")
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code:
                    errors[(topic.name, p.partition_index)] = p.error_message or _describe(
                        kafka_errors.for_code(p.error_code)
                    )
        return errors

    def elect_preferred(self, partitions: Iterable[TP]) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        if by_topic:
            self.admin.elect_leaders(0, by_topic, raise_errors=False)

    def alter_log_dirs(
        self, moves: Mapping[tuple[str, int, int], str]
    ) -> set[tuple[str, int, int]]:
        """AlterReplicaLogDirs; returns the replicas whose move started."""
        if not moves:
            return set()
        answer: Any = self.admin.alter_replica_log_dirs(dict(moves))
        return {
            (r.topic, r.partition, r.broker_id)
            for r, error in answer.items()
            if error is kafka_errors.NoError
        }

    # -- throttles ---------------------------------------------------------------------
    def _alter_configs(self, resources: list[ConfigResource]) -> None:
        if not resources:
            return
        results: Any = self.admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
        for kind in results.values():
            for name, result in kind.items():
                if result != "OK":
                    raise kafka_errors.KafkaError(f"Cannot alter configs of {name}: {result}")

    def set_throttles(self, moves: Mapping[TP, PartitionMove], rate: int) -> None:
        leader, follower = throttled_replicas(moves)
        self._alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    topic,
                    configs={
                        LEADER_REPLICAS: (AlterConfigOp.SET, leader.get(topic, "")),
                        FOLLOWER_REPLICAS: (AlterConfigOp.SET, follower.get(topic, "")),
                    },
                )
                for topic in sorted(set(leader) | set(follower))
            ]
        )
        self._alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER,
                    str(b),
                    configs={
                        LEADER_RATE: (AlterConfigOp.SET, str(rate)),
                        FOLLOWER_RATE: (AlterConfigOp.SET, str(rate)),
                    },
                )
                for b in reassigning_brokers(moves)
            ]
        )

    def set_log_dir_throttle(self, brokers: Iterable[int], rate: int) -> None:
        self._alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER,
                    str(b),
                    configs={LOG_DIR_RATE: (AlterConfigOp.SET, str(rate))},
                )
                for b in sorted(set(brokers))
            ]
        )

    def clear_throttles(self, brokers: Iterable[int], topics: Iterable[str]) -> None:
        self._alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.BROKER,
                    str(b),
                    configs={name: (AlterConfigOp.DELETE, None) for name in BROKER_THROTTLES},
                )
                for b in sorted(set(brokers))
            ]
        )
        self._alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    t,
                    configs={name: (AlterConfigOp.DELETE, None) for name in TOPIC_THROTTLES},
                )
                for t in sorted(set(topics))
            ]
        )


def _describe(error: Any) -> str:
    if isinstance(error, type):
        return str(getattr(error, "description", error.__name__))
    text = str(error)
    return text.split(": ", 1)[-1] if text else type(error).__name__


class MoveProgress:
    """How far the data of a set of reassignments has moved (for progress lines)."""

    def __init__(
        self,
        admin: ReassignAdmin,
        targets: Mapping[TP, Sequence[int]],
        before: Mapping[TP, Sequence[int]],
        sizes: Mapping[TP, int],
    ) -> None:
        self.admin = admin
        self.targets = {tp: list(r) for tp, r in targets.items()}
        self.adding = {
            tp: [b for b in r if b not in before.get(tp, [])] for tp, r in self.targets.items()
        }
        self.sizes = dict(sizes)
        self.total_bytes = sum(self.sizes.get(tp, 0) * len(a) for tp, a in self.adding.items())
        self.started = time.monotonic()
        self._last: tuple[float, int] = (self.started, 0)

    def poll(self) -> tuple[int, int, int]:
        """(partitions done, bytes copied so far, partitions still moving)."""
        ongoing = self.admin.ongoing()
        moving = [tp for tp in self.targets if tp in ongoing]
        replicas = (
            self.admin.log_dirs({b for a in self.adding.values() for b in a}) if moving else {}
        )
        copied = 0
        for tp, adding in self.adding.items():
            size = self.sizes.get(tp, 0)
            if tp not in ongoing:
                copied += size * len(adding)
                continue
            held = {r.broker: r.size for r in replicas.get(tp, []) if not r.future}
            copied += sum(min(held.get(b, 0), size) for b in adding)
        return len(self.targets) - len(moving), copied, len(moving)

    def line(self, done: int, copied: int) -> str:
        now = time.monotonic()
        last_t, last_b = self._last
        rate = (copied - last_b) / (now - last_t) if now > last_t else 0.0
        self._last = (now, copied)
        pct = 100.0 * copied / self.total_bytes if self.total_bytes else 100.0
        return (
            f"Progress: {done}/{len(self.targets)} partitions done, "
            f"{mb(copied):.1f}/{mb(self.total_bytes):.1f} MB copied ({pct:.0f}%), "
            f"{mb(max(rate, 0.0)):.2f} MB/s"
        )


def wait_for(
    progress: MoveProgress,
    out: TextIO,
    *,
    interval_s: float,
    timeout_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Print a progress line every ``interval_s`` until every reassignment completed;
    False if ``timeout_s`` passed first."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        done, copied, moving = progress.poll()
        print(progress.line(done, copied), file=out, flush=True)
        if not moving:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        sleep(interval_s)
