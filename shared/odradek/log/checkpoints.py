"""Node-level files of a log directory: offset checkpoints, ``meta.properties``, ``.lock``.

Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``, ``replication-offset-checkpoint``), Kafka's text format::

    0                              version
    <count>                        number of entries
    <topic> <partition> <offset>   one line per partition

``meta.properties`` is a Java properties file (``version=1``, ``node.id``,
``cluster.id``, ``directory.id``), written like ``Properties.store`` with a
comment header.

Crash behaviour: every write goes to ``<file>.tmp``, is fsynced, renamed over the
target, and the directory is fsynced, so a reader sees the old or the new content,
never a mix. A torn or hand-edited file is reported as :class:`CheckpointError` with
the file name and the offending line, never silently ignored.

The ``.lock`` file is held with ``flock(LOCK_EX | LOCK_NB)`` for the life of the
process; the kernel drops it when the process dies, so a crash never leaves a stale lock.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import fcntl
import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from odradek.log.errors import KafkaStorageError, LogDirLockedError

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_VERSION = 0


class CheckpointError(KafkaStorageError):
    """A checkpoint or properties file that cannot be parsed."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """tmp + fsync + rename + directory fsync."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, *, fsync: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)


# -- offset checkpoints -------------------------------------------------------------------
TopicPartition = tuple[str, int]


def read_text_file(path: Path) -> str | None:
    """A small text file of the log dir (checkpoint, properties, partition metadata);
    None when it does not exist. Bytes that are not UTF-8 are a corrupt file
    (CheckpointError, so the log dir goes offline as Kafka's KafkaStorageException
    does), never a UnicodeDecodeError escaping recovery."""
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CheckpointError(f"Malformed checkpoint file {path}: not UTF-8") from None


def format_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    lines = [str(_VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        lines.append(f"{topic} {partition} {offset}")
    return "\n".join(lines) + "\n"


def parse_offsets(text: str, source: str = "checkpoint") -> dict[TopicPartition, int]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CheckpointError(f"Malformed checkpoint file {source}: empty")
    try:
        version = int(lines[0])
    except ValueError:
        raise CheckpointError(f"Malformed line in checkpoint file {source}: '{lines[0]}'") from None
    if version != _VERSION:
        raise CheckpointError(f"Unrecognized version of the checkpoint file {source}: {version}")
    if len(lines) < 2:
        raise CheckpointError(f"Malformed checkpoint file {source}: missing entry count")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"Malformed line in checkpoint file {source}: '{lines[1]}'") from None
    body = lines[2:]
    if count != len(body):
        raise CheckpointError(
            f"Expected {count} entries in checkpoint file {source}, but found {len(body)}"
        )
    out: dict[TopicPartition, int] = {}
    for line in body:
        parts = line.split(" ")
        if len(parts) != 3:
            raise CheckpointError(f"Malformed line in checkpoint file {source}: '{line}'")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"Malformed line in checkpoint file {source}: '{line}'") from None
    return out


class OffsetCheckpointFile:
    """One ``<name>`` offset checkpoint in a log directory."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[TopicPartition, int], *, fsync: bool = True) -> None:
        atomic_write_text(self.path, format_offsets(offsets), fsync=fsync)

    def read(self) -> dict[TopicPartition, int]:
        """Entries of the file; a missing file is empty, a corrupt one raises CheckpointError."""
        text = read_text_file(self.path)
        return {} if text is None else parse_offsets(text, str(self.path))


# -- meta.properties ----------------------------------------------------------------------
def random_uuid_base64() -> str:
    """Kafka's Uuid.toString: URL-safe base64 of 16 random bytes without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def format_properties(props: Mapping[str, str], *, now: datetime.datetime | None = None) -> str:
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%a %b %d %H:%M:%S UTC %Y")
    lines = ["#", f"#{stamp}"] + [f"{k}={_escape(v)}" for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def _unescape(value: str) -> str:
    out: list[str] = []
    it = iter(value)
    for ch in it:
        if ch == "\\":
            nxt = next(it, "")
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
        else:
            out.append(ch)
    return "".join(out)


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = -1
        i = 0
        while i < len(line):
            if line[i] == "\\":
                i += 2
                continue
            if line[i] in "=:":
                sep = i
                break
            i += 1
        if sep < 0:
            raise CheckpointError(f"Malformed line in {source}: '{raw}'")
        props[_unescape(line[:sep].strip())] = _unescape(line[sep + 1 :].strip())
    return props


class MetaProperties:
    """``meta.properties`` of one log directory (KRaft ``version=1``)."""

    def __init__(self, node_id: int, cluster_id: str, directory_id: str | None = None) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.directory_id = directory_id or random_uuid_base64()

    def to_properties(self) -> dict[str, str]:
        return {
            "version": "1",
            "node.id": str(self.node_id),
            "cluster.id": self.cluster_id,
            "directory.id": self.directory_id,
        }

    def write(self, log_dir: Path) -> None:
        atomic_write_text(Path(log_dir) / META_PROPERTIES, format_properties(self.to_properties()))

    @classmethod
    def read(cls, log_dir: Path) -> MetaProperties | None:
        path = Path(log_dir) / META_PROPERTIES
        text = read_text_file(path)
        if text is None:
            return None
        props = parse_properties(text, str(path))
        version = props.get("version")
        if version not in ("0", "1"):
            raise CheckpointError(f"{path}: unsupported meta.properties version {version!r}")
        node = props.get("node.id", props.get("broker.id"))
        if node is None or "cluster.id" not in props:
            raise CheckpointError(f"{path}: node.id and cluster.id are required")
        try:
            node_id = int(node)
        except ValueError:
            raise CheckpointError(f"{path}: node.id {node!r} is not a number") from None
        return cls(node_id, props["cluster.id"], props.get("directory.id"))

    @classmethod
    def ensure(cls, log_dir: Path, node_id: int, cluster_id: str) -> MetaProperties:
        """Read and check the stored identity, or write a new one for an empty directory."""
        existing = cls.read(log_dir)
        if existing is None:
            meta = cls(node_id, cluster_id)
            meta.write(log_dir)
            return meta
        if existing.node_id != node_id:
            raise KafkaStorageError(
                f"Stored node id {existing.node_id} doesn't match previous node id {node_id} "
                f"in meta.properties in {log_dir}"
            )
        if existing.cluster_id != cluster_id:
            raise KafkaStorageError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId {existing.cluster_id} "
                f"in meta.properties in {log_dir}"
            )
        return existing


# -- .lock --------------------------------------------------------------------------------
class DirLock:
    """Exclusive ``flock`` on ``<log dir>/.lock``: one process per log directory."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / LOCK_FILE
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = -1
            raise LogDirLockedError(
                f"Failed to acquire lock on file .lock in {log_dir}. A Kafka instance in another "
                "process or thread is using this directory."
            ) from None

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
