"""Consumer group offset translation: MirrorMaker 2's checkpoints and group offset sync.

Every ``emit.checkpoints.interval.seconds``, for each flow: the source's consumer
groups selected by ``groups``/``groups.exclude`` are read (ListGroups, OffsetFetch),
and each committed offset on a partition this instance mirrors is translated to the
target through the partition's offset syncs
(:meth:`~odradek.mirror.partition_mirror.PartitionMirror.translate`: the target
offset of the last batch boundary at or before it, so a consumer that switches over
re-reads at most one batch and never skips a record).

The translations are written as MM2 ``Checkpoint`` records to the target topic
``<source alias>.checkpoints.internal`` (compacted; key: group, topic, partition as
Kafka ``Struct`` strings and int32; value: version int16 0, upstream offset int64,
downstream offset int64, metadata string: what MM2's ``RemoteClusterUtils`` reads).
With ``sync.group.offsets.enabled`` they are also committed to the same group on
the target when that moves it forward, which Kafka's coordinator refuses while the
group has members there (so a consumer already on the target is never overridden);
``odradek groups describe`` on the target then shows them.
"""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass

from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.mirror import wire
from odradek.mirror.partition_mirror import PartitionMirror
from odradek.mirror.settings import Flow
from odradek.mirror.topic_sync import WorkUnit
from odradek.records.record import BatchBuilder

log = logging.getLogger(__name__)

CHECKPOINTS_SUFFIX = ".checkpoints.internal"


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # the target topic
    partition: int
    upstream: int
    downstream: int
    metadata: str = ""


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def encode_checkpoint(c: Checkpoint) -> tuple[bytes, bytes]:
    """MM2's ``Checkpoint.recordKey()`` and ``recordValue()`` bytes."""
    key = _string(c.group) + _string(c.topic) + struct.pack(">i", c.partition)
    value = struct.pack(">hqq", 0, c.upstream, c.downstream) + _string(c.metadata)
    return key, value


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    pos = 0

    def string() -> str:
        nonlocal pos
        (n,) = struct.unpack_from(">h", key, pos)
        text = key[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
        return text

    group, topic = string(), string()
    (partition,) = struct.unpack_from(">i", key, pos)
    _, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    (n,) = struct.unpack_from(">h", value, 18)
    return Checkpoint(group, topic, partition, upstream, downstream, value[20 : 20 + n].decode())


async def translate_groups(
    source: KafkaClient, flow: Flow, mirrors: dict[WorkUnit, PartitionMirror]
) -> list[Checkpoint]:
    """Checkpoints for every selected source group on partitions mirrored here."""
    by_source_tp = {
        unit.source_tp: (unit, m) for unit, m in mirrors.items() if unit.source == flow.source
    }
    out: list[Checkpoint] = []
    groups = await wire.list_groups(source)
    log.debug("%s: groups %s", flow.source, sorted(groups))
    for group in sorted(groups):
        if not flow.selects_group(group):
            continue
        coordinator = await wire.find_coordinator(source, group)
        for tp, (offset, metadata) in (await wire.offset_fetch(source, coordinator, group)).items():
            found = by_source_tp.get(tp)
            if found is None:
                continue
            unit, mirror = found
            downstream = mirror.translate(offset)
            if downstream is not None:
                out.append(
                    Checkpoint(
                        group, unit.target_topic, unit.partition, offset, downstream, metadata
                    )
                )
    return out


async def emit(target: KafkaClient, source_alias: str, checkpoints: list[Checkpoint]) -> None:
    """Append checkpoint records to ``<source>.checkpoints.internal`` on the target."""
    if not checkpoints:
        return
    topic = source_alias + CHECKPOINTS_SUFFIX
    if (topic, 0) not in await target.leaders_for([(topic, 0)]):
        await wire.create_topics(target, {topic: (1, {"cleanup.policy": "compact"})})
    leaders = await target.leaders_for([(topic, 0)], refresh=True)
    if (topic, 0) not in leaders:
        raise KafkaClientError(f"{topic} has no leader yet")
    builder = BatchBuilder()
    now = int(time.time() * 1000)
    for c in checkpoints:
        key, value = encode_checkpoint(c)
        builder.append(now, key, value)
    code, _, message = await wire.produce(
        target, leaders[(topic, 0)], (topic, 0), builder.build(), timeout_ms=30_000
    )
    if code:
        raise KafkaClientError(f"writing checkpoints to {topic}: {message or code}", code)


async def sync_group_offsets(target: KafkaClient, checkpoints: list[Checkpoint]) -> int:
    """Commit translated offsets into the target's groups where that moves them forward;
    returns how many partitions moved."""
    by_group: dict[str, list[Checkpoint]] = {}
    for c in checkpoints:
        by_group.setdefault(c.group, []).append(c)
    moved = 0
    for group, items in by_group.items():
        try:
            coordinator = await wire.find_coordinator(target, group)
            current = await wire.offset_fetch(target, coordinator, group)
            ahead = {
                (c.topic, c.partition): (c.downstream, c.metadata)
                for c in items
                if current.get((c.topic, c.partition), (-1, ""))[0] < c.downstream
            }
            if not ahead:
                continue
            errors = await wire.offset_commit(target, coordinator, group, ahead)
        except KafkaClientError as exc:
            log.debug("syncing offsets of group %s: %s", group, exc)
            continue
        moved += sum(1 for code in errors.values() if not code)
    return moved
