"""Random operation sequences against a plain-list model of the partition.

Appends, reads, rolls, truncations, DeleteRecords + retention, clean reopens and crashes
with a torn/garbage tail: after every step the log must hold exactly the model's records.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_testkit import NOW, batch, decode_all, read_everything, small_config

from odradek.log.log import PartitionLog

CFG = small_config(segment_bytes=900, index_interval_bytes=150, segment_index_bytes=160)

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6), st.integers(0, 3)),
        st.tuples(st.just("read"), st.integers(0, 10_000), st.integers(1, 600)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
        st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
        st.tuples(st.just("delete_records"), st.integers(0, 10_000), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
        st.tuples(st.just("crash"), st.integers(0, 2), st.integers(1, 300)),
        st.tuples(st.just("time"), st.integers(0, 10_000), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


class Model:
    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, int]] = []  # offset, value, timestamp
        self.batches: list[tuple[int, int]] = []  # base, last
        self.start = 0
        self.end = 0


def _check(log: PartitionLog, model: Model) -> None:
    assert (log.log_start_offset, log.log_end_offset) == (model.start, model.end)
    got = [(o, v, t) for o, _k, v, t in read_everything(log)]
    assert got == [r for r in model.records if r[0] >= model.start]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_log_matches_model(operations: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        log = PartitionLog.open(d, "t", 0, CFG)
        model = Model()
        clock = 0
        try:
            for op, a, b in operations:
                if op == "append":
                    clock += 1
                    values = [f"{model.end + i}-{b}".encode() * (1 + b) for i in range(a)]
                    r = log.append_as_leader(
                        batch(a, NOW + clock * 10, values=values, ts_step=1), b
                    )
                    assert r.first_offset == model.end
                    for i, v in enumerate(values):
                        model.records.append((model.end + i, v, NOW + clock * 10 + i))
                    model.batches.append((model.end, model.end + a - 1))
                    model.end += a
                    log.high_watermark = log.log_end_offset
                elif op == "read" and model.end > model.start:
                    offset = model.start + a % (model.end - model.start)
                    rr = log.read(offset, b)
                    recs = decode_all(rr.records)
                    base = next(bb for bb, last in model.batches if bb <= offset <= last)
                    assert recs[0][0] == base  # the batch holding the offset, whole
                    want = [r for r in model.records if r[0] >= base][: len(recs)]
                    assert [(o, v, t) for o, _k, v, t in recs] == want
                elif op == "roll":
                    log.roll()
                elif op == "truncate" and model.end > model.start:
                    target = model.start + a % (model.end - model.start)
                    log.truncate_to(target)
                    base = next(bb for bb, last in model.batches if bb <= target <= last)
                    model.end = base
                    model.records = [r for r in model.records if r[0] < base]
                    model.batches = [x for x in model.batches if x[1] < base]
                    model.start = min(model.start, model.end)
                elif op == "delete_records" and model.end > model.start:
                    target = model.start + a % (model.end - model.start + 1)
                    assert log.delete_records_before(target) == target
                    model.start = target
                    log.delete_old_segments(NOW)
                elif op == "reopen":
                    log.close()
                    log = PartitionLog.open(d, "t", 0, CFG, log_start_offset=model.start)
                    log.high_watermark = log.log_end_offset
                elif op == "crash":
                    log.close_handles()
                    last = max(p for p in d.iterdir() if p.name.endswith(".log"))
                    with open(last, "ab") as f:
                        if a == 0:
                            f.write(os.urandom(b))
                        elif a == 1:
                            f.write(bytes(b))
                    log = PartitionLog.open(d, "t", 0, CFG, log_start_offset=model.start)
                    log.high_watermark = log.log_end_offset
                elif op == "time" and model.records:
                    ts = NOW + a % (clock * 10 + 20)
                    first_at: tuple[int, int] | None = next(
                        ((o, t) for o, _v, t in model.records if t >= ts and o >= model.start), None
                    )
                    got = log.offset_for_timestamp(ts)
                    assert (got[:2] if got else None) == first_at
                _check(log, model)
        finally:
            log.close()
