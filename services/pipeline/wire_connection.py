"""One blocking Kafka connection for the executors' direct paths (``partition_fetcher``,
``arrow_producer``): requests framed and decoded with Odradek's codec
(``odradek.protocol``), plaintext only, and the leader lookup they share.

Leaders come from a librdkafka metadata client (one per settings, per Python worker),
so bootstrap handling and advertised listeners behave as for every other client.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer

from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.versions import response_header_version

CLIENT_ID = "odradek-spark"

_META: dict[tuple[tuple[str, str], ...], Consumer] = {}


def metadata_client(conf: Mapping[str, Any]) -> Consumer:
    """A pooled consumer-type client for Metadata (never creates topics)."""
    key = tuple(sorted((k, str(v)) for k, v in conf.items() if not callable(v)))
    client = _META.get(key)
    if client is None:
        plain = {k: v for k, v in conf.items() if not callable(v)}
        client = Consumer(
            {
                **plain,
                "group.id": str(conf.get("group.id", "odradek-metadata")),
                "enable.auto.commit": False,
                "allow.auto.create.topics": False,
            }
        )
        _META[key] = client
    return client


def close_metadata_clients() -> None:
    """Close the pooled metadata clients (a process that outlives its cluster, such as
    the benchmark, would otherwise hear librdkafka retry the gone brokers)."""
    while _META:
        _, client = _META.popitem()
        client.close()


def partition_leaders(
    conf: Mapping[str, Any], topic: str
) -> tuple[dict[int, tuple[str, int]], int] | None:
    """``({partition: (host, port) of its leader}, partition count)``; ``None`` when the
    topic does not exist."""
    md = metadata_client(conf).list_topics(topic=topic, timeout=30)
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None:
        return None
    leaders: dict[int, tuple[str, int]] = {}
    for p, pmd in tmd.partitions.items():
        broker = md.brokers.get(pmd.leader)
        if broker is not None:
            leaders[p] = (broker.host, int(broker.port))
    return leaders, len(tmd.partitions)


def any_broker(conf: Mapping[str, Any]) -> tuple[str, int]:
    md = metadata_client(conf).list_topics(timeout=30)
    broker = next(iter(md.brokers.values()), None)
    if broker is None:
        raise ConnectionError("no broker in the cluster metadata")
    return broker.host, int(broker.port)


class WireConnection:
    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def send(self, api_key: int, version: int, request: Any) -> int:
        self.cid += 1
        self.sock.sendall(encode_request(api_key, version, self.cid, CLIENT_ID, request))
        return self.cid

    def receive(self, api_key: int, version: int, cid: int) -> Any:
        (size,) = struct.unpack(">i", self._exact(4))
        frame = self._exact(size)
        got, at = parse_response_header(frame, response_header_version(api_key, version))
        if got != cid:
            raise ConnectionError(f"correlation id {got}, expected {cid}")
        return decode_response(api_key, version, memoryview(frame)[at:])

    def request(self, api_key: int, version: int, request: Any) -> Any:
        return self.receive(api_key, version, self.send(api_key, version, request))

    def _exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("connection closed by the broker")
            got += k
        return buf

    def close(self) -> None:
        self.sock.close()
