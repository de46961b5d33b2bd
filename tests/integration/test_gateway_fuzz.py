"""A bounded slice of the frame fuzzer (``make fuzz`` runs the long one) against a real
gateway, with a real client producing and consuming throughout; plus the bound on
Prometheus series a client can create.

Asserts: no service dies, no connection hangs (every burst is answered or closed),
the gateway's RSS stays bounded, the real client never fails.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.wire import address, closed, connect

from odradek.tools.fuzz_frames import fuzz
from odradek.tools.launcher import Cluster

SLICE_FRAMES = 1500


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class _RealClient(threading.Thread):
    """Produces (acks=all) and reads back every 200 ms until stopped; counts failures."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.delivered = 0
        self.errors: list[str] = []

    def run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})

        def done(err: object, _msg: object) -> None:
            if err is None:
                self.delivered += 1
            else:
                self.errors.append(str(err))

        while not self.stop.is_set():
            producer.produce(self.topic, b"during-fuzz", on_delivery=done)
            producer.flush(30)
            self.stop.wait(0.2)
        producer.flush(30)


def _consume_all(bootstrap: str, topic: str, expected: int) -> int:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fuzz-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < expected and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is not None and msg.error() is None:
            got += 1
    c.close()
    return got


@pytest.mark.timeout(240)
def test_fuzzed_frames_never_crash_hang_or_starve_a_real_client(
    cluster: Cluster, unique_topic: str
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(unique_topic, 1, 1)])[unique_topic].result(90)
    gateway = next(s for s in cluster.services if s.spec.kind == "gateway")
    rss_before = _rss_kib(gateway.process.pid)
    client = _RealClient(cluster.bootstrap_servers, unique_topic)
    client.start()
    host, port = address(cluster)
    start = time.monotonic()
    report = asyncio.run(fuzz(host, port, SLICE_FRAMES, seed=14, probe_timeout=30))
    client.stop.set()
    client.join(60)
    print(report.summary())
    assert time.monotonic() - start < 120
    assert report.hung == 0, report.hung_examples
    assert report.frames + report.skipped == SLICE_FRAMES
    assert report.probes_answered > 0 and report.closed_by_server > 0
    assert len(report.per_api) >= 30  # every served API key gets frames
    assert not cluster.dead(), [s.spec.name for s in cluster.dead()]
    assert client.errors == [] and client.delivered > 0
    assert _consume_all(cluster.bootstrap_servers, unique_topic, client.delivered) == (
        client.delivered
    )
    assert _rss_kib(gateway.process.pid) - rss_before < 200 * 1024


def _series(cluster: Cluster) -> list[str]:
    gateway = next(s for s in cluster.services if s.spec.kind == "gateway")
    url = f"http://127.0.0.1:{gateway.ports['metrics']}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return [ln for ln in text.splitlines() if ln.startswith("odradek_gateway_requests_total{")]


def test_made_up_api_keys_and_versions_mint_no_series(cluster: Cluster) -> None:
    before = len(_series(cluster))
    for key, version in [(k, v) for k in range(1000, 1040) for v in (0, 7)] + [
        (3, v) for v in range(100, 140)
    ]:
        with connect(cluster) as s:
            body = struct.pack(">hhih", key, version, 1, 1) + b"x"
            s.sendall(struct.pack(">i", len(body)) + body)
            assert closed(s)
    after = _series(cluster)
    # At most one "Unknown" series and one "unsupported" series for Metadata.
    assert len(after) - before <= 2, after
