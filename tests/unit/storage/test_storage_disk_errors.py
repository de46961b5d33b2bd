"""Disk errors take the log directory offline, never a silent retry (Kafka's
LogDirFailureChannel): a failed fsync (injected at the OS call, only for files of one
directory) and a real full filesystem (a small tmpfs mounted for the test).

In both, the partitions of that directory answer KAFKA_STORAGE_ERROR from then on,
the recovery point never passes what was not synced, and the other directory keeps
working. A replica assigned to the node whose log cannot be created there (the
directory fails while creating it, or none is online) is offline too, so the node
reports it and the controller moves it out of the ISR (the chaos campaign's seed 62:
a disk filled as a new topic was created).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.small_disks import fill, mount_tmpfs, unmount
from test_storage_log_dirs import BROKER, ME, batch, snapshot

from odradek.log.manager import LogManager
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager


class Node:
    def __init__(self, dirs: list[Path], settings: dict[str, str]) -> None:
        self.dirs = dirs
        self.logs = LogManager(dirs, ME, "c", settings)
        self.failures: list[Path] = []
        self.logs.on_dir_failure = lambda d, _reason: self.failures.append(d)
        self.replicas = ReplicaManager(ME, self.logs, settings, replica_lag_time_max_ms=30_000)
        self.replicas.on_io_error = lambda p, exc: self.logs.io_failure((p.topic, p.index), exc)
        self.replicas.apply(snapshot(1))

    def part(self, index: int) -> Partition:
        p = self.replicas.get("t", index)
        assert p is not None
        return p

    def on(self, d: Path) -> list[int]:
        return [i for i in range(4) if self.logs.dir_of("t", i) == d]


def _failing_fsync_under(d: Path, real: Callable[[int], None]) -> Callable[[int], None]:
    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(d)):
            raise OSError(errno.EIO, "Input/output error (injected)")
        real(fd)

    return fsync


def test_fsync_error_on_append_takes_the_directory_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node([tmp_path / "d1", tmp_path / "d2"], {**BROKER, "log.flush.interval.messages": "1"})
    bad = tmp_path / "d1"
    victim, survivor = node.on(bad)[0], node.on(tmp_path / "d2")[0]
    node.part(victim).append_as_leader(batch(), -1)
    log = node.logs.get_log("t", victim)
    assert log is not None and log.recovery_point == 5
    monkeypatch.setattr(os, "fsync", _failing_fsync_under(bad, os.fsync))
    with pytest.raises(KafkaError) as info:
        node.part(victim).append_as_leader(batch(), -1)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.recovery_point == 5  # the unsynced append never counts as durable
    assert node.failures == [bad] and node.logs.offline_dirs == {bad}
    for i in node.on(bad) or [victim]:
        with pytest.raises(KafkaError) as again:
            node.part(i).append_as_leader(batch(), -1)
        assert again.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    node.part(survivor).append_as_leader(batch(), -1)  # fsyncs fine in the other directory
    monkeypatch.undo()
    node.logs.shutdown()


def test_fsync_error_in_the_periodic_flush_takes_the_directory_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = Node([tmp_path / "d1", tmp_path / "d2"], BROKER)
    bad = tmp_path / "d1"
    victim = node.on(bad)[0]
    for _ in range(60):  # several rolled segments, none synced yet
        node.part(victim).append_as_leader(batch(), -1)
    monkeypatch.setattr(os, "fsync", _failing_fsync_under(bad, os.fsync))
    node.logs.run_flush()
    assert node.logs.offline_dirs == {bad} and node.failures == [bad]
    assert node.logs.get_log("t", victim) is None
    monkeypatch.undo()
    node.logs.shutdown()


@contextlib.contextmanager
def _small_filesystem(path: Path, size: str) -> Iterator[None]:
    try:
        mount_tmpfs(path, size)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a small tmpfs here: {exc}")
    try:
        yield
    finally:
        unmount(path)


def test_full_filesystem_takes_only_that_directory_offline(tmp_path: Path) -> None:
    small = tmp_path / "small"
    with _small_filesystem(small, "192k"):
        node = Node([small, tmp_path / "d2"], BROKER)
        victim, survivor = node.on(small)[0], node.on(tmp_path / "d2")[0]
        with pytest.raises(KafkaError) as info:
            for _ in range(1000):  # ~0.6 MB into 192 KiB
                node.part(victim).append_as_leader(batch(), -1)
        assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert node.logs.offline_dirs == {small} and node.failures == [small]
        node.part(survivor).append_as_leader(batch(), -1)
        node.logs.shutdown()


def test_a_replica_whose_log_cannot_be_created_is_offline(tmp_path: Path) -> None:
    node = Node([tmp_path / "d1"], BROKER)
    node.logs.mark_dir_offline(tmp_path / "d1", "failed earlier")
    node.replicas.apply(snapshot(2, partitions=6))  # t-4 and t-5 are new here
    assert {("t", 4), ("t", 5)} <= node.replicas.offline
    node.logs.shutdown()


def test_a_full_filesystem_while_creating_a_log_takes_that_replica_offline(
    tmp_path: Path,
) -> None:
    small = tmp_path / "small"
    with _small_filesystem(small, "192k"):
        node = Node([small], BROKER)
        fill(small)
        node.replicas.apply(snapshot(2, partitions=6))  # creating t-4 hits ENOSPC
        assert node.logs.offline_dirs == {small} and node.failures == [small]
        assert {("t", 4), ("t", 5)} <= node.replicas.offline
        node.logs.shutdown()
