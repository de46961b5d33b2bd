"""Mutual TLS between services (issue 15, docs/security.md "Between services").

One cluster started as ``odradek up --internal-tls`` does: every service has its own
certificate under ``DATA/certs``. A Kafka client still works end to end (the gateway,
storage node, coordinators and offset store talk over mutual TLS, the data link
included); a plaintext gRPC client, a certificate from another CA, and member
certificates asking for what their kind or id may not (RegisterNode as another node,
a follower Fetch as another replica, a gateway registering as a storage node) are
refused with UNAVAILABLE / PERMISSION_DENIED and logged.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Consumer, Producer

from odradek.internal_tls import issue_member
from odradek.rpc.v1 import (
    common_pb2,
    controller_pb2,
    controller_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
)
from odradek.tools.launcher import Cluster

STORAGE_ID = 100


@pytest.fixture(scope="module")
def mtls_cluster(module_cluster_factory: Callable[..., Cluster]) -> Cluster:
    # The data link over TCP with mutual TLS, as between hosts; on one host it takes the
    # Unix socket (test_data_link_unix_secure.py).
    return module_cluster_factory(
        internal_tls=True, console=False, settings={"data.socket.path": ""}
    )


def _channel(address: str, certs: Path, name: str, ca: Path | None = None) -> grpc.Channel:
    creds = grpc.ssl_channel_credentials(
        (ca or certs / "ca.crt").read_bytes(),
        (certs / f"{name}.key").read_bytes(),
        (certs / f"{name}.crt").read_bytes(),
    )
    return grpc.secure_channel(
        address, creds, options=[("grpc.ssl_target_name_override", "odradek.internal")]
    )


@pytest.fixture
def as_member(
    mtls_cluster: Cluster,
) -> Iterator[Callable[[str, str, int | None], grpc.Channel]]:
    """A channel to a service presenting a cluster-CA certificate of ``kind``/``id``
    (``id`` None: kind-wide, ``odradek://<kind>/*``)."""
    certs = mtls_cluster.data_dir / "certs"
    opened: list[grpc.Channel] = []

    def make(address: str, kind: str, node_id: int | None) -> grpc.Channel:
        issue_member(certs, kind, node_id)
        ch = _channel(address, certs, kind if node_id is None else f"{kind}-{node_id}")
        opened.append(ch)
        return ch

    yield make
    for ch in opened:
        ch.close()


def _denied(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def _logged(cluster: Cluster, service: str, text: str) -> bool:
    deadline = time.monotonic() + 5
    log = cluster.service(service).log_file
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False


def test_kafka_round_trip_over_internal_mtls(mtls_cluster: Cluster) -> None:
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": mtls_cluster.bootstrap_servers, "acks": "all"})
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": mtls_cluster.bootstrap_servers,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)  # offsets: gateway -> coordinator -> offset store
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))
    for name in ("controller", f"storage-{STORAGE_ID}", "gateway-0"):
        assert "refused" not in mtls_cluster.service(name).log_file.read_text(errors="replace")


@pytest.mark.parametrize("service", ["controller", f"storage-{STORAGE_ID}"])
def test_plaintext_grpc_client_is_refused(mtls_cluster: Cluster, service: str) -> None:
    with grpc.insecure_channel(mtls_cluster.grpc_address(service)) as ch:
        err = _denied(
            lambda: (
                controller_pb2_grpc.ControllerStub(ch).GetMetadata(
                    controller_pb2.GetMetadataRequest(), timeout=5
                )
                if service == "controller"
                else storage_pb2_grpc.StorageStub(ch).DescribePartitions(
                    storage_pb2.DescribePartitionsRequest(), timeout=5
                )
            )
        )
    assert err.code() == grpc.StatusCode.UNAVAILABLE  # no TLS handshake, no call


def test_certificate_from_another_ca_is_refused(mtls_cluster: Cluster, tmp_path: Path) -> None:
    other = tmp_path / "other-ca"
    issue_member(other, "storage", STORAGE_ID)  # the right name, the wrong CA
    # Trusting the cluster's CA (the server is genuine), presenting the other CA's cert.
    ch = _channel(
        mtls_cluster.grpc_address("controller"),
        other,
        f"storage-{STORAGE_ID}",
        ca=mtls_cluster.data_dir / "certs" / "ca.crt",
    )
    with ch:
        err = _denied(
            lambda: controller_pb2_grpc.ControllerStub(ch).RegisterNode(
                controller_pb2.RegisterNodeRequest(
                    node=common_pb2.Node(node_id=STORAGE_ID, kind=common_pb2.STORAGE)
                ),
                timeout=5,
            )
        )
    assert err.code() == grpc.StatusCode.UNAVAILABLE


def test_storage_certificate_cannot_register_as_another_node(
    mtls_cluster: Cluster, as_member: Callable[[str, str, int | None], grpc.Channel]
) -> None:
    stub = controller_pb2_grpc.ControllerStub(
        as_member(mtls_cluster.grpc_address("controller"), "storage", STORAGE_ID + 1)
    )
    err = _denied(
        lambda: stub.RegisterNode(
            controller_pb2.RegisterNodeRequest(
                node=common_pb2.Node(node_id=STORAGE_ID, kind=common_pb2.STORAGE, host="x")
            ),
            timeout=5,
        )
    )
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    err = _denied(
        lambda: stub.Heartbeat(controller_pb2.HeartbeatRequest(node_id=STORAGE_ID), timeout=5)
    )
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    # Admin calls are the gateways' (and tools'), not a storage node's.
    err = _denied(
        lambda: stub.DeleteTopics(controller_pb2.DeleteTopicsRequest(names=["x"]), timeout=5)
    )
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    # The metadata is every member's to read, and storage-100 is still registered.
    metadata = stub.GetMetadata(controller_pb2.GetMetadataRequest(), timeout=5)
    assert any(n.node_id == STORAGE_ID and n.state == common_pb2.ONLINE for n in metadata.nodes)
    assert _logged(
        mtls_cluster, "controller", f"odradek://storage/{STORAGE_ID + 1}: node_id {STORAGE_ID}"
    )


def test_gateway_certificate_cannot_register_nodes(
    mtls_cluster: Cluster, as_member: Callable[[str, str, int | None], grpc.Channel]
) -> None:
    stub = controller_pb2_grpc.ControllerStub(
        as_member(mtls_cluster.grpc_address("controller"), "gateway", 7)
    )
    for node in (
        common_pb2.Node(node_id=STORAGE_ID, kind=common_pb2.STORAGE),
        common_pb2.Node(node_id=7, kind=common_pb2.STORAGE),  # its own id, not its kind
    ):
        err = _denied(
            lambda node=node: stub.RegisterNode(
                controller_pb2.RegisterNodeRequest(node=node), timeout=5
            )
        )
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    err = _denied(
        lambda: stub.AlterPartition(
            controller_pb2.AlterPartitionRequest(node_id=7, topic="t"), timeout=5
        )
    )
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    # A kind-wide gateway certificate (Kubernetes Deployments) speaks for gateways only:
    # no heartbeat or shutdown for the storage node, which the controller knows.
    every_gateway = controller_pb2_grpc.ControllerStub(
        as_member(mtls_cluster.grpc_address("controller"), "gateway", None)
    )
    for call in (every_gateway.Heartbeat, every_gateway.ShutdownNode):
        request = (
            controller_pb2.HeartbeatRequest(node_id=STORAGE_ID)
            if call is every_gateway.Heartbeat
            else controller_pb2.ShutdownNodeRequest(node_id=STORAGE_ID)
        )
        err = _denied(lambda call=call, request=request: call(request, timeout=5))
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    err = _denied(
        lambda: every_gateway.RegisterNode(
            controller_pb2.RegisterNodeRequest(
                node=common_pb2.Node(node_id=STORAGE_ID, kind=common_pb2.STORAGE)
            ),
            timeout=5,
        )
    )
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED


def test_storage_certificate_cannot_fetch_as_another_follower(
    mtls_cluster: Cluster, as_member: Callable[[str, str, int | None], grpc.Channel]
) -> None:
    address = mtls_cluster.grpc_address(f"storage-{STORAGE_ID}")
    request = storage_pb2.FetchRequest(replica_id=STORAGE_ID, max_wait_ms=0, max_bytes=1024)
    impostor = storage_pb2_grpc.StorageStub(as_member(address, "storage", STORAGE_ID + 1))
    err = _denied(lambda: impostor.Fetch(request, timeout=5))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    err = _denied(lambda: list(impostor.ReplicaFetch(iter([request]), timeout=5)))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    # A storage node is no client: no consumer fetch, no produce.
    err = _denied(
        lambda: impostor.Fetch(storage_pb2.FetchRequest(replica_id=-1, max_wait_ms=0), timeout=5)
    )
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    err = _denied(lambda: impostor.Produce(storage_pb2.ProduceRequest(), timeout=5))
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED
    assert _logged(mtls_cluster, f"storage-{STORAGE_ID}", "replica_id 100 is not the caller's")
    # The same request with the caller's own id is served (the check is by identity).
    own = storage_pb2_grpc.StorageStub(as_member(address, "storage", STORAGE_ID + 1))
    answer = own.Fetch(
        storage_pb2.FetchRequest(replica_id=STORAGE_ID + 1, max_wait_ms=0), timeout=5
    )
    assert isinstance(answer, storage_pb2.FetchResponse)


def test_data_link_refuses_non_gateways(
    mtls_cluster: Cluster, as_member: Callable[[str, str, int | None], grpc.Channel]
) -> None:
    """The storage node's data link (docs/data-link.md) speaks the same mutual TLS and
    serves gateways only: a plaintext connection and a storage certificate are cut."""
    import socket
    import ssl

    stub = controller_pb2_grpc.ControllerStub(
        as_member(mtls_cluster.grpc_address("controller"), "admin", 0)
    )
    nodes = stub.GetMetadata(controller_pb2.GetMetadataRequest(), timeout=5).nodes
    port = next(n.data_port for n in nodes if n.node_id == STORAGE_ID)
    assert port
    certs = mtls_cluster.data_dir / "certs"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        plain.sendall(b"\x00" * 64)
        assert plain.recv(64) == b""  # the TLS handshake failed: closed
    issue_member(certs, "storage", STORAGE_ID + 2)
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    ctx.load_cert_chain(
        certs / f"storage-{STORAGE_ID + 2}.crt", certs / f"storage-{STORAGE_ID + 2}.key"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="odradek.internal") as tls:
            tls.sendall(b"\x00" * 16)
            assert tls.recv(64) == b""
    assert _logged(mtls_cluster, f"storage-{STORAGE_ID}", "only gateways call the data link")
