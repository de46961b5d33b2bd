"""kafka-reassign-partitions.sh's JSON files, read and written the way Kafka's tool does.

Topics to move (``--topics-to-move-json-file``)::

    {"topics": [{"topic": "foo"}], "version": 1}

Reassignment (``--reassignment-json-file``, and what ``--generate`` prints)::

    {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}

``log_dirs`` is optional; an entry other than ``"any"`` asks for that replica's log
directory (AlterReplicaLogDirs). Output is compact JSON with partitions sorted by topic
and partition, as Kafka's ``formatAsReassignmentJson``. Validation errors carry Kafka's
messages. Pure: strings in, data out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ANY_LOG_DIR = "any"

TopicPartition = tuple[str, int]


class ReassignFileError(ValueError):
    """A file Kafka's tool would refuse, with Kafka's message."""


@dataclass
class Reassignment:
    """What a reassignment file asks for."""

    partitions: list[tuple[TopicPartition, list[int]]] = field(default_factory=list)
    # (topic, partition, broker) -> absolute log directory
    log_dirs: dict[tuple[str, int, int], str] = field(default_factory=dict)

    @property
    def targets(self) -> dict[TopicPartition, list[int]]:
        return dict(self.partitions)


def tp_name(tp: TopicPartition) -> str:
    """Kafka's TopicPartition.toString."""
    return f"{tp[0]}-{tp[1]}"


def replica_name(topic: str, partition: int, broker: int) -> str:
    """Kafka's TopicPartitionReplica.toString."""
    return f"{topic}-{partition}-{broker}"


def _load(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError:
        raise ReassignFileError("The input string is not a valid JSON") from None
    if not isinstance(doc, dict):
        raise ReassignFileError("The input string is not a valid JSON")
    return doc


def _version(doc: Mapping[str, Any]) -> int:
    version = doc.get("version", 1)
    if version != 1:
        raise ReassignFileError(f"Not supported version field value {version}")
    return 1


def parse_topics(text: str) -> list[str]:
    """The topic names of a ``--topics-to-move-json-file``, duplicates refused."""
    doc = _load(text)
    _version(doc)
    try:
        topics = [str(entry["topic"]) for entry in doc.get("topics", [])]
    except (KeyError, TypeError):
        raise ReassignFileError('Each entry of "topics" needs a "topic" name') from None
    dupes = sorted({t for t in topics if topics.count(t) > 1})
    if dupes:
        raise ReassignFileError(
            f"List of topics to reassign contains duplicate entries: {', '.join(dupes)}"
        )
    return topics


def parse_reassignment(text: str) -> Reassignment:
    """A ``--reassignment-json-file`` (kept in file order, duplicates not yet refused)."""
    doc = _load(text)
    _version(doc)
    out = Reassignment()
    try:
        for entry in doc.get("partitions", []):
            topic = str(entry["topic"])
            partition = int(entry["partition"])
            replicas = [int(r) for r in entry["replicas"]]
            dirs = [str(d) for d in entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))]
            if len(dirs) != len(replicas):
                raise ReassignFileError(
                    f"Size of replicas list {_list(replicas)} is different from size of log "
                    f"dirs list {_list(dirs)} for partition {topic}-{partition}"
                )
            out.partitions.append(((topic, partition), replicas))
            for broker, d in zip(replicas, dirs, strict=True):
                if d != ANY_LOG_DIR:
                    out.log_dirs[(topic, partition, broker)] = d
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ReassignFileError):
            raise
        raise ReassignFileError(
            'Each partition needs "topic", "partition" and "replicas"'
        ) from None
    return out


def check_for_execute(reassignment: Reassignment) -> None:
    """Kafka's parseExecuteAssignmentArgs checks."""
    parts = reassignment.partitions
    if not parts:
        raise ReassignFileError("Partition reassignment list cannot be empty")
    if any(not replicas for _tp, replicas in parts):
        raise ReassignFileError("Partition replica list cannot be empty")
    names = [tp for tp, _r in parts]
    dupes = sorted({tp for tp in names if names.count(tp) > 1})
    if dupes:
        raise ReassignFileError(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(tp_name(tp) for tp in dupes)
        )
    bad = []
    for tp, replicas in parts:
        twice = sorted({r for r in replicas if replicas.count(r) > 1})
        if twice:
            bad.append(f"{tp_name(tp)} contains multiple entries for {','.join(map(str, twice))}")
    if bad:
        raise ReassignFileError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(bad)
        )


def _list(items: Sequence[object]) -> str:
    return "List(" + ", ".join(str(i) for i in items) + ")"


def format_reassignment(
    assignment: Mapping[TopicPartition, Sequence[int]],
    log_dirs: Mapping[tuple[str, int, int], str] | None = None,
) -> str:
    """Kafka's formatAsReassignmentJson: compact, sorted by topic then partition."""
    dirs = log_dirs or {}
    partitions = [
        {
            "topic": tp[0],
            "partition": tp[1],
            "replicas": list(assignment[tp]),
            "log_dirs": [dirs.get((tp[0], tp[1], r), ANY_LOG_DIR) for r in assignment[tp]],
        }
        for tp in sorted(assignment)
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b.strip()) for b in text.split(",") if b.strip()]
    except ValueError:
        raise ReassignFileError(f"Invalid broker list {text!r}") from None
    dupes = sorted({b for b in brokers if brokers.count(b) > 1})
    if dupes:
        raise ReassignFileError(
            f"Broker list contains duplicate entries: {', '.join(map(str, dupes))}"
        )
    return brokers


@dataclass(frozen=True)
class PartitionMove:
    """Kafka's PartitionMove: the replicas data comes from and the ones it goes to."""

    sources: frozenset[int]
    destinations: frozenset[int]


def move_map(
    ongoing: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int]]],
    proposed: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
) -> dict[TopicPartition, PartitionMove]:
    """Kafka's calculateProposedMoveMap. ``ongoing``: (replicas, adding) of reassignments
    already running, whose sources are their original replicas."""
    out: dict[TopicPartition, PartitionMove] = {}
    for tp, (replicas, adding) in ongoing.items():
        out[tp] = PartitionMove(frozenset(replicas) - set(adding), frozenset(adding))
    for tp, replicas in proposed.items():
        if tp in out:
            sources = out[tp].sources
        elif tp in current:
            sources = frozenset(current[tp])
        else:
            raise ReassignFileError(
                f"Trying to reassign a topic partition {tp_name(tp)} with 0 replicas"
            )
        out[tp] = PartitionMove(sources, frozenset(replicas) - sources)
    return out


def throttled_replicas(
    moves: Mapping[TopicPartition, PartitionMove],
) -> tuple[dict[str, str], dict[str, str]]:
    """Per topic, the ``leader.replication.throttled.replicas`` (every source, since any
    may lead) and ``follower.replication.throttled.replicas`` (every destination) values
    kafka-reassign-partitions.sh --throttle sets."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    for (topic, partition), move in moves.items():
        leader.setdefault(topic, set()).update((partition, b) for b in move.sources)
        follower.setdefault(topic, set()).update(
            (partition, b) for b in move.destinations if b not in move.sources
        )

    def text(entries: set[tuple[int, int]]) -> str:
        return ",".join(sorted(f"{p}:{b}" for p, b in entries))  # Kafka: a TreeSet of strings

    return (
        {t: text(e) for t, e in leader.items()},
        {t: text(e) for t, e in follower.items()},
    )


def reassigning_brokers(moves: Mapping[TopicPartition, PartitionMove]) -> list[int]:
    out: set[int] = set()
    for move in moves.values():
        out |= move.sources | move.destinations
    return sorted(out)
