"""The channels a service keeps to the replication controller follow a renewal of its
internal TLS files (``ControllerClient`` and the heartbeat thread's blocking channel,
both kept in :mod:`odradek.rpc.channel`).

A real ``grpc.aio`` Controller server with mutual TLS (dynamic server credentials, as
``RpcServer`` has) answers with the serial of the certificate each call came with.
The whole cluster CA is then rotated — the server's and the client's CA, certificate
and key files are replaced by ones of a new CA — so the old client certificate is
refused by new handshakes. Calls and heartbeats must arrive with the new certificate:
a channel kept from before would keep presenting the old one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509

from odradek import internal_tls
from odradek.controller_client import ControllerClient, Membership
from odradek.internal_tls import CA, CERT, KEY, InternalTls, issue_member
from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc

INTERVAL_S = 0.2


def serial_of(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


def caller_serial(context: grpc.aio.ServicerContext) -> int:
    return serial_of(context.auth_context()["x509_pem_cert"][0])


class RecordingController(controller_pb2_grpc.ControllerServicer):
    """Answers GetMetadata with the caller's certificate serial (as the cluster id);
    registers anyone and records the serial of every heartbeat."""

    def __init__(self) -> None:
        self.heartbeats: list[int] = []
        self.lock = threading.Lock()

    async def GetMetadata(
        self, request: controller_pb2.GetMetadataRequest, context: grpc.aio.ServicerContext
    ) -> common_pb2.ClusterMetadata:
        return common_pb2.ClusterMetadata(cluster_id=str(caller_serial(context)))

    async def RegisterNode(
        self, request: controller_pb2.RegisterNodeRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.RegisterNodeResponse:
        return controller_pb2.RegisterNodeResponse(incarnation=1, heartbeat_interval_ms=50)

    async def Heartbeat(
        self, request: controller_pb2.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> controller_pb2.HeartbeatResponse:
        with self.lock:
            self.heartbeats.append(caller_serial(context))
        return controller_pb2.HeartbeatResponse()


def live_files(directory: Path, name: str, source: Path, kind: str, node_id: int) -> InternalTls:
    """A member's internal TLS settings at paths of its own (so a rotation can overwrite
    them), watched every :data:`INTERVAL_S`."""
    cert = issue_member(source, kind, node_id)
    live = directory / name
    live.mkdir(parents=True)
    shutil.copy(source / "ca.crt", live / "ca.crt")
    shutil.copy(cert.cert, live / "member.crt")
    shutil.copy(cert.key, live / "member.key")
    settings = {CA: str(live / "ca.crt"), CERT: str(live / "member.crt")}
    settings[KEY] = str(live / "member.key")
    tls = InternalTls.from_settings(settings.get)
    assert tls is not None
    return dataclasses.replace(tls, check_interval_s=INTERVAL_S)


def rotate(tls: InternalTls, new_ca: Path, kind: str, node_id: int) -> int:
    """Replace a member's CA, certificate and key files by ones of ``new_ca``; the new
    certificate's serial."""
    cert = issue_member(new_ca, kind, node_id)
    shutil.copy(new_ca / "ca.crt", tls.files[0])
    shutil.copy(cert.cert, tls.files[1])
    shutil.copy(cert.key, tls.files[2])
    return serial_of(cert.cert.read_bytes())


@dataclasses.dataclass
class Rotation:
    server: InternalTls
    client: InternalTls
    servicer: RecordingController
    address: str
    new_ca: Path

    def rotate_all(self) -> int:
        """A hard CA rotation on both sides; the serial of the client's new certificate."""
        rotate(self.server, self.new_ca, "controller", 0)
        return rotate(self.client, self.new_ca, "gateway", 0)

    async def old_certificate_refused(self) -> None:
        """A new connection with the client's original certificate no longer gets in."""
        old = self.client
        channel = grpc.aio.secure_channel(
            self.address,
            grpc.ssl_channel_credentials((self.new_ca / "ca.crt").read_bytes(), old.key, old.cert),
            options=old.channel_options(),
        )
        try:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await controller_pb2_grpc.ControllerStub(channel).GetMetadata(
                    controller_pb2.GetMetadataRequest(), timeout=5
                )
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            await channel.close(None)


@pytest.fixture
async def rotation(tmp_path: Path) -> AsyncIterator[Rotation]:
    old_ca, new_ca = tmp_path / "old-ca", tmp_path / "new-ca"
    server_tls = live_files(tmp_path, "controller", old_ca, "controller", 0)
    client_tls = live_files(tmp_path, "gateway", old_ca, "gateway", 0)
    servicer = RecordingController()
    server = grpc.aio.server()
    controller_pb2_grpc.add_ControllerServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", server_tls.server_credentials())
    await server.start()
    internal_tls.configure(client_tls)  # the process's identity, as a service has
    try:
        yield Rotation(server_tls, client_tls, servicer, f"127.0.0.1:{port}", new_ca)
    finally:
        internal_tls.configure(None)
        await server.stop(0)


async def test_controller_client_presents_the_renewed_certificate(rotation: Rotation) -> None:
    client = ControllerClient(rotation.address)
    try:
        first = await client.get_metadata(timeout=10)
        assert int(first.cluster_id) == serial_of(rotation.client.cert)
        renewed = rotation.rotate_all()
        await asyncio.sleep(INTERVAL_S + 0.1)
        await rotation.old_certificate_refused()
        answer = await client.get_metadata(timeout=10)
        assert int(answer.cluster_id) == renewed
    finally:
        await client.close()


async def test_heartbeats_present_the_renewed_certificate(rotation: Rotation) -> None:
    client = ControllerClient(rotation.address)
    membership = Membership(client, common_pb2.Node(node_id=0, kind=common_pb2.GATEWAY))
    servicer = rotation.servicer
    loop = asyncio.get_running_loop()

    async def heartbeat_with(serial: int) -> None:
        deadline = loop.time() + 10
        while True:
            with servicer.lock:
                if serial in servicer.heartbeats:
                    return
                seen = set(servicer.heartbeats)
            assert loop.time() < deadline, f"heartbeats came with {seen}, not {serial}"
            await asyncio.sleep(0.05)

    try:
        await membership.register()
        membership.start()
        await heartbeat_with(serial_of(rotation.client.cert))
        renewed = rotation.rotate_all()
        await asyncio.sleep(INTERVAL_S + 0.1)
        await rotation.old_certificate_refused()
        await heartbeat_with(renewed)
    finally:
        await membership.stop()
        await client.close()
