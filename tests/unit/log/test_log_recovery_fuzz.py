"""Fuzzed segment, index, snapshot and checkpoint files fed to recovery (issue 14).

Each example writes a partition of several segments, "crashes" (handles dropped, no
clean-close work), damages one of its files the way a disk or a torn write could —
bytes flipped, the file cut short, garbage or zeros appended, a range zeroed — and
opens the partition again. What recovery may do, as Kafka's ``LogLoader`` does:

* open the partition and return only what was written: every record it returns was
  appended at that offset with the same key, value and timestamp, in offset order. A
  damaged index or snapshot loses nothing (indexes are rebuilt, snapshots rebuilt
  from the log). A damaged segment loses its batches from the first invalid byte on,
  and the segments after it; a segment cut exactly at a batch boundary (to zero bytes,
  say) is valid as it stands, so the segments after it stay and the log has a hole,
  as Kafka's ``LogLoader.recoverSegment`` leaves it too (it only drops later segments
  when it truncated bytes);
* or refuse with ``KafkaStorageError`` (Kafka's KafkaStorageException: the log dir
  goes offline) when a checkpoint file cannot be parsed.

Any other exception, a record that was never written, or a log that cannot take a new
append afterwards fails the example. ``LOG_RECOVERY_FUZZ_EXAMPLES`` sets the number of
examples (``make fuzz`` runs more; the default keeps the unit suite fast).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_testkit import NOW, batch, open_log, read_everything, small_config

from odradek.log.errors import KafkaStorageError

CFG = small_config(segment_bytes=1500, index_interval_bytes=100)
EXAMPLES = int(os.environ.get("LOG_RECOVERY_FUZZ_EXAMPLES", "40"))
Record = tuple[int, bytes | None, bytes | None, int]

MUTATIONS = ("flip", "truncate", "append", "zero")


def build(path: Path) -> list[Record]:
    log = open_log(path, CFG)
    for i in range(30):
        log.append_as_leader(batch(3, NOW + i, value=f"value-{i}".encode() * 3), i // 10)
    records = read_everything(log)
    log.close_handles()  # a crash: no flush of indexes, no clean-shutdown marker
    return records


def damage(victim: Path, how: str, data: st.DataObject) -> None:
    content = bytearray(victim.read_bytes())
    size = len(content)
    if how == "flip" and size:
        for _ in range(data.draw(st.integers(1, 8), label="flips")):
            at = data.draw(st.integers(0, size - 1), label="flip at")
            content[at] ^= data.draw(st.integers(1, 255), label="xor")
    elif how == "truncate":
        content = content[: data.draw(st.integers(0, max(size - 1, 0)), label="cut to")]
    elif how == "append":
        content += data.draw(st.binary(min_size=1, max_size=600), label="garbage")
    elif how == "zero" and size:
        start = data.draw(st.integers(0, size - 1), label="zero from")
        length = data.draw(st.integers(1, 200), label="zero length")
        content[start : start + length] = bytes(len(content[start : start + length]))
    victim.write_bytes(bytes(content))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_recovery_of_damaged_files_keeps_a_prefix_or_refuses(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        written = build(d)
        files = sorted(p for p in d.iterdir() if p.is_file())
        victim = data.draw(st.sampled_from(files), label="file")
        how = data.draw(st.sampled_from(MUTATIONS), label="mutation")
        damage(victim, how, data)
        try:
            log = open_log(d, CFG)
        except KafkaStorageError:
            # Only a checkpoint file may take the log dir offline: segments, indexes
            # and snapshots are recovered from the log itself.
            assert "checkpoint" in victim.name, f"{victim.name} ({how}) refused the log"
            return
        try:
            recovered = read_everything(log)
            by_offset = {r[0]: r for r in written}
            assert all(by_offset.get(r[0]) == r for r in recovered), (
                f"{victim.name} ({how}): recovery returned a record that was never written"
            )
            assert [r[0] for r in recovered] == sorted({r[0] for r in recovered})
            if not victim.name.endswith(".log"):
                # Indexes, snapshots and checkpoints never cost a record.
                assert recovered == written, f"{victim.name} ({how}) lost records"
            end = log.log_end_offset
            assert end == (recovered[-1][0] + 1 if recovered else log.log_start_offset)
            # The recovered log takes appends at its end and reads them back.
            appended = log.append_as_leader(batch(2, NOW + 100), 5)
            assert appended.first_offset == end
            assert read_everything(log)[-2:] == [
                (end, b"k", b"v" * 50, NOW + 100),
                (end + 1, b"k", b"v" * 50, NOW + 101),
            ]
        finally:
            log.close()
