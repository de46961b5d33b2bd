"""Security benchmark: what SASL_SSL costs against PLAINTEXT, and authentications/s.

Two local clusters run side by side in this run (``odradek up`` as a library: plain
and ``--security sasl_ssl``), measured alternately the same way with librdkafka
(confluent-kafka), best of ``--rounds``:

1. produce MB/s: ``--records`` records of ``--size`` bytes, acks=all, one partition;
2. consume MB/s: the same records read back from the beginning by a group-less
   consumer;
3. (SASL_SSL only) authentications/s: sequential new connections, each a TLS
   handshake plus a complete SaslHandshake + SaslAuthenticate exchange, for
   SCRAM-SHA-512 and for PLAIN (PLAIN runs PBKDF2 on the gateway for every login).

Reported as MB/s and as the SASL_SSL / PLAINTEXT ratio (issue 15's goal: >= 0.7).

    python -m bench security [--records=100000] [--size=1000] [--logins=200] [--rounds=2]
"""

from __future__ import annotations

import argparse
import base64
import socket
import ssl
import struct
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.producing import produce_waiting
from odradek.config import parse_properties
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version
from odradek.sasl.scram import ScramMechanism, client_proof, salted_password
from odradek.tools.launcher import Cluster, ClusterOptions


def _create(conf: dict[str, Any]) -> str:
    topic = f"bench-sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
            return topic
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _produce_mb_s(conf: dict[str, Any], topic: str, records: int, size: int) -> float:
    producer = Producer(
        {
            **conf,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )
    value = b"x" * size
    start = time.perf_counter()
    for _ in range(records):
        produce_waiting(producer, topic, value, 0)
    if producer.flush(120):
        raise RuntimeError("produce did not finish")
    return records * size / (time.perf_counter() - start) / 1e6


def _consume_mb_s(conf: dict[str, Any], topic: str, records: int, size: int) -> float:
    consumer = Consumer(
        {**conf, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return got * size / elapsed / 1e6


def _exact(sock: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _frame(sock: ssl.SSLSocket, api_key: int, version: int, message: Any, cid: int) -> Any:
    sock.sendall(encode_request(api_key, version, cid, "bench", message))
    head = _exact(sock, 4)
    (size,) = struct.unpack(">i", head)
    data = _exact(sock, size)
    _, offset = parse_response_header(data, response_header_version(api_key, version))
    return decode_response(api_key, version, data[offset:])


def _login(address: tuple[str, int], ca: Path, mechanism: str, password: str) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(address, timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=address[0]) as sock:
            hs = _frame(sock, 17, 1, SaslHandshakeRequest(mechanism=mechanism), 1)
            assert hs.error_code == 0, hs
            if mechanism == "PLAIN":
                r = _frame(
                    sock,
                    36,
                    2,
                    SaslAuthenticateRequest(auth_bytes=f"\0admin\0{password}".encode()),
                    2,
                )
                assert r.error_code == 0, r
                return
            mech = ScramMechanism.SCRAM_SHA_512
            bare = f"n=admin,r={uuid.uuid4().hex}"
            r = _frame(sock, 36, 2, SaslAuthenticateRequest(auth_bytes=b"n,," + bare.encode()), 2)
            first = bytes(r.auth_bytes).decode()
            attrs = dict(p.split("=", 1) for p in first.split(","))
            salted = salted_password(mech, password, base64.b64decode(attrs["s"]), int(attrs["i"]))
            without = f"c=biws,r={attrs['r']}"
            proof = client_proof(mech, salted, f"{bare},{first},{without}".encode())
            final = f"{without},p={base64.b64encode(proof).decode()}".encode()
            r = _frame(sock, 36, 2, SaslAuthenticateRequest(auth_bytes=final), 3)
            assert r.error_code == 0, r


def _logins_per_s(cluster: Cluster, mechanism: str, count: int, password: str) -> float:
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    ca = cluster.data_dir / "certs" / "ca.crt"
    start = time.perf_counter()
    for _ in range(count):
        _login((host, int(port)), ca, mechanism, password)
    return count / (time.perf_counter() - start)


def _start(security: str, root: Path) -> tuple[Cluster, dict[str, Any]]:
    cluster = Cluster(
        ClusterOptions(data_dir=root / security, port=0, console=False, security=security)
    )
    cluster.start()
    conf: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers}
    if security != "plaintext":
        conf.update(parse_properties((cluster.data_dir / "librdkafka.conf").read_text()))
    return cluster, conf


def _throughput(conf: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    topic = _create(conf)
    return {
        "produce": _produce_mb_s(conf, topic, args.records, args.size),
        "consume": _consume_mb_s(conf, topic, args.records, args.size),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench security")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--logins", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    # Both clusters run side by side and are measured alternately, best of --rounds,
    # so neither gets a quieter machine than the other.
    plain: dict[str, float] = {}
    secure: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        clusters = [_start("plaintext", Path(tmp)), _start("sasl_ssl", Path(tmp))]
        try:
            for _ in range(args.rounds):
                for (_cluster, conf), best in zip(clusters, (plain, secure), strict=True):
                    for k, v in _throughput(conf, args).items():
                        best[k] = max(best.get(k, 0.0), v)
            cluster, conf = clusters[1]
            for mechanism in ("SCRAM-SHA-512", "PLAIN"):
                secure[mechanism] = _logins_per_s(
                    cluster, mechanism, args.logins, conf["sasl.password"]
                )
        finally:
            for cluster, _conf in clusters:
                cluster.stop()
    print(f"records: {args.records} x {args.size} B, acks=all, one partition")
    for what in ("produce", "consume"):
        ratio = secure[what] / plain[what] if plain[what] else 0.0
        print(
            f"{what:<8} PLAINTEXT {plain[what]:7.1f} MB/s   SASL_SSL {secure[what]:7.1f} MB/s"
            f"   ratio {ratio:.2f}"
        )
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        print(f"authentications/s ({mechanism}, TLS + SASL, sequential): {secure[mechanism]:.0f}")
