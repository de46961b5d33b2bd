"""`odradek up --security sasl_ssl` with three storage nodes on one host and replication
factor 3 (issue 15, docs/security.md "the data link on one host"): followers replicate
over their leader's Unix data link socket, which a process of the cluster's uid may
open anyway, instead of over gRPC with mutual TLS (7 more CPU-s per GB on the three
nodes together). Each storage node's ``odradek_data_link_connections_total`` says which
transport its replica fetchers opened. Over TCP the data link still serves gateways
only: a replica fetch there is refused even with a gateway's certificate."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import urllib.request
import uuid
from collections.abc import Callable

import grpc
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from odradek.config import parse_properties
from odradek.datalink.frame import ERROR, encode, meta_bytes, parse
from odradek.internal_tls import issue_member
from odradek.rpc.v1 import controller_pb2, controller_pb2_grpc, storage_pb2
from odradek.tools.launcher import Cluster

FIRST_STORAGE_ID = 100


@pytest.fixture(scope="module")
def replicated(module_cluster_factory: Callable[..., Cluster]) -> Cluster:
    return module_cluster_factory(
        security="sasl_ssl", console=False, storage_nodes=3, replication_factor=3
    )


def _conf(cluster: Cluster) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        **parse_properties((cluster.data_dir / "librdkafka.conf").read_text()),
    }


def _connections(cluster: Cluster, service: str) -> dict[str, float]:
    port = cluster.service(service).ports["metrics"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("odradek_data_link_connections_total{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('transport="')[1].split('"')[0]] = float(value)
    return out


def test_followers_replicate_over_the_unix_socket(replicated: Cluster) -> None:
    conf = _conf(replicated)
    topic = f"repl-{uuid.uuid4().hex[:8]}"
    producer = Producer({**conf, "acks": "all"})
    for i in range(100):
        producer.produce(topic, f"v{i}".encode() * 50)
    assert producer.flush(60) == 0
    meta = AdminClient(conf).list_topics(topic, timeout=10).topics[topic].partitions[0]
    assert len(meta.replicas) == 3 and len(meta.isrs) == 3, meta
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() * 50 for i in range(100))
    for follower in (r for r in meta.replicas if r != meta.leader):
        counts = _connections(replicated, f"storage-{follower}")
        assert counts.get("unix", 0) >= 1 and counts.get("tcp", 0) == 0, (follower, counts)
    for node in range(FIRST_STORAGE_ID, FIRST_STORAGE_ID + 3):
        text = replicated.service(f"storage-{node}").log_file.read_text(errors="replace")
        assert "followers fetch over gRPC" not in text and "refused" not in text


def test_tcp_data_link_refuses_a_replica_fetch(replicated: Cluster) -> None:
    """What TLS guards between hosts stays guarded: over TCP a replica fetch is refused
    even from a gateway's certificate (followers there fetch over gRPC)."""
    certs = replicated.data_dir / "certs"
    issue_member(certs, "gateway", 7)
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.load_cert_chain(certs / "gateway-7.crt", certs / "gateway-7.key")
    creds = grpc.ssl_channel_credentials(
        (certs / "ca.crt").read_bytes(),
        (certs / "admin-0.key").read_bytes(),
        (certs / "admin-0.crt").read_bytes(),
    )
    with grpc.secure_channel(
        replicated.grpc_address("controller"),
        creds,
        options=[("grpc.ssl_target_name_override", "odradek.internal")],
    ) as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)
        nodes = stub.GetMetadata(controller_pb2.GetMetadataRequest(), timeout=5).nodes
    port = next(n.data_port for n in nodes if n.node_id == FIRST_STORAGE_ID)
    assert port
    request = storage_pb2.FetchRequest(replica_id=FIRST_STORAGE_ID + 1, max_wait_ms=0)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="odradek.internal") as tls:
            tls.sendall(b"".join(encode(1, 2, request.SerializeToString())))
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = tls.recv(65536)
                assert chunk, "the data link closed instead of answering"
                data += chunk
    frame = parse(data[4:])
    assert frame.kind == ERROR
    assert b"followers fetch over gRPC" in bytes(meta_bytes(frame))
