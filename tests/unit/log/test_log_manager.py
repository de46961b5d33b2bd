"""LogManager: log dirs (lock, meta.properties), checkpoints, clean shutdown, deletes, periodic work."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from helpers.waiting import wait_until_async
from log_testkit import NOW, batch, read_everything

from odradek.log.checkpoints import OffsetCheckpointFile, parse_properties
from odradek.log.errors import KafkaStorageError, LogDirLockedError
from odradek.log.manager import LogManager
from odradek.records.batch import BatchView
from odradek.records.header import HEADER_STRUCT
from odradek.storage.log_maintenance import run_log_maintenance

BROKER = {
    "log.segment.bytes": "1000",
    "log.index.interval.bytes": "200",
    "log.index.size.max.bytes": "800",
    "log.segment.delete.delay.ms": "0",
}


def manager(dirs: list[Path], **kw: object) -> LogManager:
    return LogManager(dirs, 1, "Q8c1iVrxTaaOPOtnLlS5Jg", BROKER, **kw)  # type: ignore[arg-type]


def produce(mgr: LogManager, topic: str, partition: int, n: int) -> None:
    log = mgr.create_log(topic, partition)
    for i in range(n):
        log.append_as_leader(batch(2, NOW + i), 0)
    log.high_watermark = log.log_end_offset


def test_lock_and_meta_properties(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    mgr = manager([d])
    with pytest.raises(LogDirLockedError):
        manager([d])
    props = parse_properties((d / "meta.properties").read_text())
    assert (props["node.id"], props["cluster.id"], props["version"]) == (
        "1",
        "Q8c1iVrxTaaOPOtnLlS5Jg",
        "1",
    )
    assert (d / ".lock").exists()
    mgr.shutdown()
    with pytest.raises(KafkaStorageError, match="node id"):
        LogManager([d], 2, "Q8c1iVrxTaaOPOtnLlS5Jg", BROKER)
    manager([d]).shutdown()  # the failed attempt released the lock


def test_clean_shutdown_writes_checkpoints_and_skips_recovery(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    mgr = manager([d])
    produce(mgr, "orders", 0, 20)
    produce(mgr, "orders", 1, 5)
    mgr.get_log("orders", 0).delete_records_before(4)  # type: ignore[union-attr]
    before = read_everything(mgr.get_log("orders", 0))  # type: ignore[arg-type]
    mgr.shutdown()
    assert (d / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read() == {
        ("orders", 0): 40,
        ("orders", 1): 10,
    }
    assert OffsetCheckpointFile(d / "log-start-offset-checkpoint").read() == {
        ("orders", 0): 4,
        ("orders", 1): 0,
    }
    assert OffsetCheckpointFile(d / "replication-offset-checkpoint").read() == {
        ("orders", 0): 40,
        ("orders", 1): 10,
    }
    assert (
        d / "recovery-point-offset-checkpoint"
    ).read_text() == "0\n2\norders 0 40\norders 1 10\n"
    mgr = manager([d])
    assert not (d / ".kafka_cleanshutdown").exists()
    log = mgr.get_log("orders", 0)
    assert log is not None
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (4, 40, 40)
    assert log.recovery_point == 40
    assert read_everything(log) == before
    mgr.shutdown()


def test_unclean_restart_recovers_from_checkpointed_recovery_points(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    mgr = manager([d])
    produce(mgr, "t", 0, 10)
    mgr.run_flush()
    mgr.write_checkpoints()
    produce(mgr, "t", 0, 10)
    log = mgr.get_log("t", 0)
    assert log is not None
    tail = log.active_segment.log_path
    mgr.close_without_shutdown()  # crash
    with open(tail, "ab") as f:
        f.write(b"\x00" * 100)
    mgr = manager([d])
    log = mgr.get_log("t", 0)
    assert log is not None
    assert log.log_end_offset == 40
    assert log.last_recovery_truncated_bytes == 100
    assert [o for o, *_ in read_everything(log)] == list(range(40))
    mgr.shutdown()


def test_delete_log_renames_then_removes(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    mgr = manager([d])
    produce(mgr, "gone", 0, 3)
    assert mgr.delete_log("gone", 0)
    assert mgr.get_log("gone", 0) is None
    renamed = [p.name for p in d.iterdir() if p.is_dir()]
    assert len(renamed) == 1 and renamed[0].startswith("gone-0.") and renamed[0].endswith("-delete")
    assert mgr.purge_deleted_logs() == 1
    assert [p for p in d.iterdir() if p.is_dir()] == []
    # A crash between rename and removal: the next start removes the leftover.
    produce(mgr, "gone", 1, 1)
    mgr.delete_log("gone", 1)
    mgr.close_without_shutdown()
    mgr = manager([d])
    assert mgr.get_log("gone", 1) is None
    mgr.run_retention()
    assert [p for p in d.iterdir() if p.is_dir()] == []
    mgr.shutdown()


def test_partitions_spread_over_log_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    mgr = manager(dirs)
    for p in range(4):
        produce(mgr, "spread", p, 1)
    counts = [len([x for x in d.iterdir() if x.is_dir()]) for d in dirs]
    assert counts == [2, 2]
    mgr.shutdown()
    mgr = manager(dirs)
    assert sorted(mgr) == [("spread", p) for p in range(4)]
    mgr.shutdown()


def test_retention_flush_and_cleaner_jobs(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    mgr = manager(
        [d],
        topic_configs={
            "compacted": {"cleanup.policy": "compact"},
            "timed": {"retention.ms": "1000"},
        },
    )
    timed = mgr.create_log("timed", 0)
    for _ in range(30):
        timed.append_as_leader(batch(2, NOW - 10_000), 0)
    timed.high_watermark = timed.log_end_offset
    assert timed.segment_count > 2
    assert timed.recovery_point == 0
    assert mgr.run_flush() == 1  # rolled segments are flushed, as Kafka does after a roll
    assert timed.recovery_point == timed.active_segment.base_offset
    assert mgr.run_retention(NOW) >= timed.segment_count
    assert timed.log_start_offset == timed.log_end_offset
    compacted = mgr.create_log("compacted", 0)
    for r in range(4):
        for k in range(5):
            compacted.append_as_leader(
                batch(1, NOW, key=f"k{k}".encode(), value=f"{r}".encode() * 30), 0
            )
    compacted.roll()
    compacted.high_watermark = compacted.log_end_offset
    result = mgr.run_cleaner_once(NOW)
    assert result is not None and result.end_offset == compacted.active_segment.base_offset
    assert OffsetCheckpointFile(d / "cleaner-offset-checkpoint").read() == {
        ("compacted", 0): result.end_offset
    }
    assert [v for _o, _k, v, _t in read_everything(compacted)] == [b"3" * 30] * 5
    assert mgr.run_cleaner_once(NOW) is None  # nothing dirty any more
    mgr.update_config("timed", {"retention.ms": "-1"})
    assert timed.config.retention_ms == -1
    mgr.shutdown()


async def test_run_periodic_runs_jobs_until_stopped(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    settings = {
        **BROKER,
        "log.retention.check.interval.ms": "20",
        "log.flush.offset.checkpoint.interval.ms": "20",
        "log.retention.ms": "1000",
    }
    mgr = LogManager([d], 1, "Q8c1iVrxTaaOPOtnLlS5Jg", settings)
    log = mgr.create_log("p", 0)
    for _ in range(20):
        log.append_as_leader(batch(2, NOW - 10_000), 0)
    log.high_watermark = log.log_end_offset
    stop = asyncio.Event()
    task = asyncio.create_task(run_log_maintenance(mgr, stop))
    await wait_until_async(
        lambda: (
            log.log_start_offset == log.log_end_offset
            and (d / "recovery-point-offset-checkpoint").exists()
        ),
        "retention to delete every segment and the checkpoint to be written",
        timeout=10,
    )
    stop.set()
    await asyncio.wait_for(task, 5)
    assert log.log_start_offset == log.log_end_offset == 40
    assert ("p", 0) in OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read()
    mgr.shutdown()
    assert os.path.exists(d / ".kafka_cleanshutdown")


def test_corrupt_checkpoints_fall_back_to_full_recovery(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    mgr = manager([d])
    produce(mgr, "t", 0, 10)
    mgr.write_checkpoints()
    mgr.close_without_shutdown()
    (d / "recovery-point-offset-checkpoint").write_text("0\n5\ngarbage\n")
    (d / "replication-offset-checkpoint").write_text("zzz")
    mgr = manager([d])
    log = mgr.get_log("t", 0)
    assert log is not None
    assert (log.log_end_offset, log.recovery_point, log.high_watermark) == (20, 0, 0)
    assert [o for o, *_ in read_everything(log)] == list(range(20))
    mgr.shutdown()


def test_cleaner_sets_aside_a_log_it_cannot_read(tmp_path: Path) -> None:
    """A corrupt compacted log (replicas do not re-validate records) must not stop the
    cleaner: it is marked uncleanable and the other logs are still compacted."""
    d = tmp_path / "logs"
    mgr = manager([d], topic_configs={t: {"cleanup.policy": "compact"} for t in ("bad", "good")})
    bad, good = mgr.create_log("bad", 0), mgr.create_log("good", 0)
    for log in (bad, good):
        for r in range(4):
            for k in range(5):
                log.append_as_leader(batch(1, NOW, key=f"k{k}".encode(), value=b"%d" % r * 30), 0)
    garbage = bytearray(
        HEADER_STRUCT.pack(bad.log_end_offset, 49 + 40, 0, 2, 0, 0, 0, NOW, NOW, -1, -1, -1, 1)
    )
    garbage += bytes(range(7, 47))
    BatchView(garbage).update_crc()
    bad.append_as_follower(garbage)
    for log in (bad, good):
        log.roll()
        log.high_watermark = log.log_end_offset
    results = [mgr.run_cleaner_once(NOW) for _ in range(3)]
    assert mgr.uncleanable == {("bad", 0)}
    cleaned = [r for r in results if r is not None]
    assert len(cleaned) == 1 and mgr.cleaner_offset("good", 0) == good.active_segment.base_offset
    assert mgr.cleaner_offset("bad", 0) is None
    assert [v for _o, _k, v, _t in read_everything(good)] == [b"3" * 30] * 5
    mgr.shutdown()
