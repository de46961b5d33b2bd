"""Where the mirror keeps its source positions: committed offsets of its group on the target.

The group ``mirror.group.id`` on the target cluster commits, for each target
partition, the *source* offset after the last record the target holds (what a restart
resumes from), with metadata ``<source alias>:<target offset>`` (the offset sync
for that position, so group offset translation survives a restart). The target's own
group coordinator stores them: no extra topic, and with transactions the same commit
joins the records' transaction (TxnOffsetCommit), which is what makes a copy exactly
once. ``odradek groups describe --group odradek-mirror-<target>`` shows them.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.mirror import wire
from odradek.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


def encode_metadata(source: str, target_offset: int) -> str:
    return f"{source}:{target_offset}"


def decode_metadata(metadata: str) -> tuple[str, int]:
    source, _, offset = metadata.rpartition(":")
    try:
        return source, int(offset)
    except ValueError:
        return metadata, -1


class OffsetStore:
    def __init__(self, target: KafkaClient, group_id: str) -> None:
        self.target = target
        self.group_id = group_id
        self._coordinator: int | None = None

    async def coordinator(self) -> int:
        if self._coordinator is None:
            self._coordinator = await wire.find_coordinator(self.target, self.group_id)
        return self._coordinator

    async def load(self) -> dict[TopicPartition, tuple[int, str]]:
        try:
            return await wire.offset_fetch(self.target, await self.coordinator(), self.group_id)
        except KafkaClientError:
            self._coordinator = None
            raise

    async def commit(
        self,
        offsets: Mapping[TopicPartition, tuple[int, str]],
        *,
        generation: int = -1,
        member_id: str = "",
    ) -> dict[TopicPartition, int]:
        if not offsets:
            return {}
        try:
            errors = await wire.offset_commit(
                self.target,
                await self.coordinator(),
                self.group_id,
                offsets,
                generation=generation,
                member_id=member_id,
            )
        except KafkaClientError:
            self._coordinator = None
            raise
        if any(
            code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            for code in errors.values()
        ):
            self._coordinator = None
        return {tp: code for tp, code in errors.items() if code}
