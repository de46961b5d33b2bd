"""v2 batch builders for the benchmarks: kafka-python's producer encoder, independent
of ``odradek.records``, so the bytes measured are a client's bytes."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder


def plain_builder(batch_size: int) -> DefaultRecordBatchBuilder:
    """An empty uncompressed, non-idempotent batch builder taking up to ``batch_size``."""
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=batch_size,
    )
