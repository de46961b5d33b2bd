"""``partition.metadata``: the topic id a partition directory belongs to (Kafka's
PartitionMetadataFile, KIP-516).

Layout, UTF-8 text with no trailing newline, exactly as Kafka writes it::

    version: 0
    topic_id: <topic id as base64 UUID>

Invariants: written once, when the log is first opened with a topic id; a later
open with a different id is refused (the directory belongs to a deleted topic of the
same name). Crash behaviour: written to a temp file, fsynced and renamed (see
:func:`odradek.log.checkpoints.atomic_write_text`), so the file is absent or whole;
a malformed file raises :class:`~odradek.log.errors.KafkaStorageError` on read.
"""

from __future__ import annotations

from pathlib import Path

from odradek.log.checkpoints import atomic_write_text, read_text_file
from odradek.log.errors import KafkaStorageError

PARTITION_METADATA_FILE = "partition.metadata"
VERSION = "0"


def read_topic_id(directory: Path) -> str | None:
    """The topic id recorded in ``directory``; None when no file was written yet."""
    path = directory / PARTITION_METADATA_FILE
    text = read_text_file(path)
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    if fields.get("version") != VERSION or "topic_id" not in fields:
        raise KafkaStorageError(f"Malformed partition metadata file {path}")
    return fields["topic_id"]


def write_topic_id(directory: Path, topic_id: str, partition_name: str) -> None:
    """Record ``topic_id`` unless already there; refuse a different one."""
    existing = read_topic_id(directory)
    if existing is None:
        atomic_write_text(
            directory / PARTITION_METADATA_FILE, f"version: {VERSION}\ntopic_id: {topic_id}"
        )
    elif existing != topic_id:
        raise KafkaStorageError(
            f"Tried to assign topic ID {topic_id} to log for {partition_name}, "
            f"but log already contained topic ID {existing}"
        )
