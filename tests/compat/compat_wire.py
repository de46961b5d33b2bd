"""A minimal blocking Kafka wire client for what no real client lets a test do:
send the very same produce request twice, or a request with exact fields.

Frames are built and read with Odradek's own codec (odradek.protocol.messages),
which the unit tests hold to Kafka's schemas byte for byte.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    InitProducerIdRequest,
    ProduceRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version

PRODUCE = 0
INIT_PRODUCER_ID = 22


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, message: Any) -> Any:
        """Send one request and decode its response."""
        self.correlation_id += 1
        self.sock.sendall(
            encode_request(api_key, version, self.correlation_id, "odradek-compat", message)
        )
        (size,) = struct.unpack(">i", self._recv_exact(4))
        frame = self._recv_exact(size)
        cid, offset = parse_response_header(frame, response_header_version(api_key, version))
        assert cid == self.correlation_id, f"correlation id {cid} != {self.correlation_id}"
        return decode_response(api_key, version, memoryview(frame)[offset:])


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
