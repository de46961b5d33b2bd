"""Partition log hot paths against plain file I/O on the same bytes, in one run.

* append: 1 MiB v2 batches through ``PartitionLog.append_as_leader`` (validation with
  CRC-32C, offset assignment, index maintenance, one pwrite) vs ``os.write`` of the same
  bytes to a plain file, under the same fsync policy (``end``: one fsync at the end, as
  Kafka's default flush policy; ``each``: fsync after every batch, i.e. flush.messages=1).
* read: sequential ``PartitionLog.read`` of the whole log in 1 MiB fetches vs ``os.pread``
  of the same file in 1 MiB chunks (page cache warm for both).
* lookup: fetch-path offset lookups (segment bisect, sparse index, header scan) on logs of
  1 to 1,000 segments; should stay flat.

    python -m bench log [--mib N] [--fsync-mib N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.batches import plain_builder
from odradek.log.log import PartitionLog
from odradek.topic_config import LogConfig

MIB = 1 << 20


def _batch(total: int, value_size: int) -> bytearray:
    """One uncompressed v2 batch of about ``total`` bytes."""
    builder = plain_builder(total * 2)
    value = os.urandom(value_size)
    now = int(time.time() * 1000)
    for i in range(max(1, (total - 61) // (value_size + 12))):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytearray(builder.build())


def _best(fn: Callable[[], float], rounds: int) -> float:
    return min(fn() for _ in range(rounds))


def bench_append(tmp: Path, count: int, fsync_each: bool, rounds: int) -> tuple[float, float]:
    """Seconds for ``count`` 1 MiB appends: (plain write, PartitionLog)."""
    data = _batch(MIB, 1000)

    def plain() -> float:
        path = tmp / "plain.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start = time.perf_counter()
        for _ in range(count):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync_each:
                os.fsync(fd)
        os.fsync(fd)
        elapsed = time.perf_counter() - start
        os.close(fd)
        path.unlink()
        return elapsed

    def partition_log() -> float:
        d = tmp / "log-0"
        shutil.rmtree(d, ignore_errors=True)
        cfg = LogConfig(flush_messages=1 if fsync_each else LogConfig().flush_messages)
        log = PartitionLog.open(d, "bench", 0, cfg)
        start = time.perf_counter()
        for _ in range(count):
            log.append_as_leader(data, 0)
        log.flush()
        elapsed = time.perf_counter() - start
        log.close(flush=False)
        shutil.rmtree(d)
        return elapsed

    plain_s = _best(plain, rounds)
    log_s = _best(partition_log, rounds)
    return plain_s, log_s


def bench_read(tmp: Path, count: int, rounds: int) -> tuple[float, float, int]:
    """Seconds to read a ``count`` MiB log: (plain pread in 1 MiB chunks, PartitionLog.read)."""
    data = _batch(MIB, 1000)
    d = tmp / "read-0"
    log = PartitionLog.open(d, "bench", 0, LogConfig())
    for _ in range(count):
        log.append_as_leader(data, 0)
    log.flush()
    log.high_watermark = log.log_end_offset
    path = log.active_segment.log_path
    size = path.stat().st_size

    def plain() -> float:
        fd = os.open(path, os.O_RDONLY)
        start = time.perf_counter()
        pos = 0
        while pos < size:
            chunk = os.pread(fd, MIB, pos)
            if not chunk:
                break
            pos += len(chunk)
        elapsed = time.perf_counter() - start
        os.close(fd)
        return elapsed

    def partition_log() -> float:
        start = time.perf_counter()
        offset = 0
        total = 0
        leo = log.log_end_offset
        while offset < leo:
            rr = log.read(offset, MIB, max_offset=log.high_watermark)
            total += rr.size
            # Next fetch offset: one past the last batch returned.
            last = rr.records
            pos = 0
            while pos < len(last):
                base = int.from_bytes(last[pos : pos + 8], "big")
                length = int.from_bytes(last[pos + 8 : pos + 12], "big")
                delta = int.from_bytes(last[pos + 23 : pos + 27], "big")
                offset = base + delta + 1
                pos += 12 + length
        elapsed = time.perf_counter() - start
        assert total == size
        return elapsed

    plain()  # warm the page cache
    plain_s = _best(plain, rounds)
    log_s = _best(partition_log, rounds)
    log.close(flush=False)
    return plain_s, log_s, size


def bench_lookup(tmp: Path, segments: int, probes: int) -> float:
    """Microseconds per fetch-path lookup (``read(offset, 1)``) on a log of ``segments`` segments."""
    d = tmp / f"lookup-{segments}-0"
    seg_bytes = 64 * 1024
    data = _batch(16 * 1024, 200)
    cfg = LogConfig(segment_bytes=seg_bytes, segment_index_bytes=64 * 1024)
    log = PartitionLog.open(d, "bench", 0, cfg)
    while log.segment_count < segments or log.active_segment.size + 2 * len(data) <= seg_bytes:
        log.append_as_leader(data, 0)
    log.high_watermark = log.log_end_offset
    leo = log.log_end_offset
    rng = random.Random(segments)
    offsets = [rng.randrange(leo) for _ in range(probes)]
    for o in range(0, leo, max(1, leo // (segments * 2))):  # open every segment's index once
        log.read(o, 1)
    start = time.perf_counter()
    for o in offsets:
        log.read(o, 1)
    elapsed = time.perf_counter() - start
    log.close(flush=False)
    shutil.rmtree(d)
    return elapsed / probes * 1e6


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_log")
    parser.add_argument("--mib", type=int, default=256, help="MiB appended/read (fsync at end)")
    parser.add_argument(
        "--fsync-mib", type=int, default=32, help="MiB appended with fsync per batch"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--probes", type=int, default=3000)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    try:
        print(f"log bench in {tmp}")
        for label, count, each in (("end", args.mib, False), ("each", args.fsync_mib, True)):
            plain_s, log_s = bench_append(tmp, count, each, args.rounds)
            ratio = plain_s / log_s
            print(
                f"append 1 MiB batches, fsync {label:4}: plain {count / plain_s:8.1f} MiB/s  "
                f"log {count / log_s:8.1f} MiB/s  ratio {ratio:.2f} (target >= 0.7)"
            )
        plain_s, log_s, size = bench_read(tmp, args.mib, args.rounds)
        mib = size / MIB
        print(
            f"read 1 MiB fetches:              plain {mib / plain_s:8.1f} MiB/s  "
            f"log {mib / log_s:8.1f} MiB/s  ratio {plain_s / log_s:.2f} (target >= 0.7)"
        )
        results = {}
        for n in (1, 10, 100, 1000):
            results[n] = bench_lookup(tmp, n, args.probes)
            print(f"offset lookup, {n:5} segments: {results[n]:7.1f} us")
        spread = max(results.values()) / min(results.values())
        print(f"offset lookup spread 1..1000 segments: {spread:.2f}x (target <= 2)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
