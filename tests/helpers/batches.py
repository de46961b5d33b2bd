"""Record batches as a real producer builds them, for tests that feed logs and nodes.

Built with kafka-python's ``DefaultRecordBatchBuilder``, an encoder independent of
``odradek.records``, so a test that appends these checks our decoder against someone
else's bytes. Offsets are relative (0..n-1): the leader assigns the real ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafka.record.default_records import DefaultRecordBatchBuilder

# (timestamp ms, key, value) of one record.
RecordSpec = tuple[int, bytes | None, bytes | None]


def batch_builder(
    codec: int = 0,
    *,
    transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> DefaultRecordBatchBuilder:
    """An empty v2 batch builder with room for any test's records (no size cut-off)."""
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )


def producer_batch(
    records: Iterable[RecordSpec],
    *,
    codec: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    """One v2 batch holding ``records`` (no headers), as a producer sends it."""
    builder = batch_builder(
        codec=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for i, (timestamp, key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return bytearray(builder.build())
