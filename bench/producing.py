"""Feeding a confluent-kafka producer as fast as it takes records."""

from __future__ import annotations

from confluent_kafka import Producer

ANY_PARTITION = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses


def produce_waiting(
    producer: Producer, topic: str, value: bytes, partition: int = ANY_PARTITION
) -> None:
    """``producer.produce``; while its queue is full, serve delivery reports and retry."""
    while True:
        try:
            producer.produce(topic, value=value, partition=partition)
            return
        except BufferError:
            producer.poll(0.01)
