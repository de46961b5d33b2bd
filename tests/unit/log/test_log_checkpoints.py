"""Node-level checkpoint files, meta.properties and the log directory lock."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from odradek.log.checkpoints import (
    CheckpointError,
    DirLock,
    MetaProperties,
    OffsetCheckpointFile,
    parse_properties,
)
from odradek.log.errors import KafkaStorageError, LogDirLockedError


def test_offset_checkpoint_format_matches_kafka(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint")
    offsets = {
        ("nginx_access_log", 0): 5033168,
        ("nginx_access_log", 1): 5033166,
        ("nginx_access_log", 2): 5033168,
    }
    f.write(offsets)
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == (
        "0\n3\nnginx_access_log 0 5033168\nnginx_access_log 1 5033166\nnginx_access_log 2 5033168\n"
    )
    assert f.read() == offsets
    assert not (tmp_path / "cleaner-offset-checkpoint.tmp").exists()
    empty = OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint")
    empty.write({})
    # An empty checkpoint is the 4-byte "0\n0\n" of the seed's listing.
    assert (tmp_path / "log-start-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert OffsetCheckpointFile(tmp_path / "missing").read() == {}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0\n2\nt 0 5\n", "Expected 2 entries"),
        ("0\n1\nt 0\n", "Malformed line"),
        ("0\n1\nt x 5\n", "Malformed line"),
        ("1\n0\n", "Unrecognized version"),
        ("", "empty"),
        ("0\nabc\n", "Malformed line"),
    ],
)
def test_corrupt_checkpoint_raises_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(CheckpointError, match=message) as info:
        OffsetCheckpointFile(path).read()
    assert "recovery-point-offset-checkpoint" in str(info.value)


def test_meta_properties_round_trip_and_identity_checks(tmp_path: Path) -> None:
    meta = MetaProperties.ensure(tmp_path, 3, "MkU3OEVBNTcwNTJENDM2Qk")
    text = (tmp_path / "meta.properties").read_text()
    props = parse_properties(text)
    assert props["version"] == "1"
    assert props["node.id"] == "3"
    assert props["cluster.id"] == "MkU3OEVBNTcwNTJENDM2Qk"
    assert len(props["directory.id"]) == 22
    assert text.startswith("#\n#")
    again = MetaProperties.ensure(tmp_path, 3, "MkU3OEVBNTcwNTJENDM2Qk")
    assert again.directory_id == meta.directory_id
    with pytest.raises(KafkaStorageError, match="node id"):
        MetaProperties.ensure(tmp_path, 4, "MkU3OEVBNTcwNTJENDM2Qk")
    with pytest.raises(KafkaStorageError, match="Cluster ID"):
        MetaProperties.ensure(tmp_path, 3, "other")


def _try_lock(path: str, q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        DirLock(Path(path))
        q.put("locked")
    except LogDirLockedError as exc:
        q.put(f"refused: {exc}")


def test_second_opener_gets_log_dir_locked(tmp_path: Path) -> None:
    lock = DirLock(tmp_path)
    with pytest.raises(LogDirLockedError, match=r"\.lock"):
        DirLock(tmp_path)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_try_lock, args=(str(tmp_path), q))
    p.start()
    p.join(10)
    assert q.get(timeout=5).startswith("refused")
    lock.release()
    DirLock(tmp_path).release()
