"""Requests no real client lets a test make, over :class:`helpers.wire.WireClient`:
the very same produce request twice, or a request with exact fields."""

from __future__ import annotations

from helpers.wire import WireClient

from odradek.protocol.messages import InitProducerIdRequest, ProduceRequest

PRODUCE = 0
INIT_PRODUCER_ID = 22


def init_producer_id(wire: WireClient) -> tuple[int, int]:
    """An idempotent (non-transactional) producer id and epoch."""
    resp = wire.request(
        INIT_PRODUCER_ID,
        4,
        InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
    )
    assert resp.error_code == 0, f"InitProducerId error {resp.error_code}"
    return int(resp.producer_id), int(resp.producer_epoch)


def produce(
    wire: WireClient, topic: str, partition: int, batch: bytes, acks: int = -1, version: int = 9
) -> tuple[int, int]:
    """(error_code, base_offset) of one batch produced to one partition."""
    data = ProduceRequest.TopicProduceData
    resp = wire.request(
        PRODUCE,
        version,
        ProduceRequest(
            transactional_id=None,
            acks=acks,
            timeout_ms=30000,
            topic_data=[
                data(
                    name=topic,
                    partition_data=[data.PartitionProduceData(index=partition, records=batch)],
                )
            ],
        ),
    )
    (part,) = resp.responses[0].partition_responses
    return int(part.error_code), int(part.base_offset)
