"""How every service talks to the replication controller.

``controller.quorum.bootstrap.servers``-like list of addresses (our name:
``controller.address``, comma separated): calls go to the one that answers as the
active controller; ``NOT_CONTROLLER`` (41) or an unreachable address rotates to the
next. :class:`Membership` registers this node and heartbeats; :meth:`watch` keeps the
metadata stream open across controller restarts and failovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from odradek.metadata_cache import MetadataCache
from odradek.rpc.channel import open_channel
from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc

log = logging.getLogger(__name__)

NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77
_RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
}

T = TypeVar("T")


class ControllerUnavailable(RuntimeError):
    kafka_error = "REQUEST_TIMED_OUT"


class ControllerClient:
    def __init__(self, addresses: list[str] | str) -> None:
        if isinstance(addresses, str):
            addresses = [a.strip() for a in addresses.split(",") if a.strip()]
        if not addresses:
            raise ValueError("no controller address configured")
        self.addresses = addresses
        self._index = 0
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self) -> controller_pb2_grpc.ControllerStub:
        address = self.addresses[self._index % len(self.addresses)]
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = open_channel(address)
        return controller_pb2_grpc.ControllerStub(channel)

    def _rotate(self) -> None:
        self._index += 1

    async def close(self) -> None:
        for channel in self._channels.values():
            with contextlib.suppress(Exception):
                await channel.close(None)
        self._channels.clear()

    async def call(
        self,
        method: Callable[[controller_pb2_grpc.ControllerStub], Callable[..., Awaitable[T]]],
        request: Any,
        *,
        timeout: float = 30.0,
        attempt_timeout: float = 10.0,
    ) -> T:
        """Call the active controller, rotating and retrying until ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        backoff = 0.05
        last: BaseException | None = None
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ControllerUnavailable(f"no active controller at {self.addresses}: {last}")
            try:
                response = await method(self._stub())(
                    request, timeout=min(attempt_timeout, remaining)
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in _RETRYABLE:
                    raise
                last = exc
            else:
                if getattr(response, "error_code", 0) != NOT_CONTROLLER:
                    return response
                last = RuntimeError("NOT_CONTROLLER")
            self._rotate()
            await asyncio.sleep(min(backoff, max(0.0, deadline - loop.time())))
            backoff = min(backoff * 2, 1.0)

    async def get_metadata(self, timeout: float = 30.0) -> common_pb2.ClusterMetadata:
        return await self.call(
            lambda s: s.GetMetadata, controller_pb2.GetMetadataRequest(), timeout=timeout
        )

    async def watch(
        self,
        on_metadata: Callable[[common_pb2.ClusterMetadata], Awaitable[None] | None],
        stop: asyncio.Event | None = None,
    ) -> None:
        """Follow WatchMetadata forever (until ``stop``), reconnecting with backoff."""
        known = 0
        backoff = 0.05
        while stop is None or not stop.is_set():
            try:
                stream = self._stub().WatchMetadata(
                    controller_pb2.WatchMetadataRequest(known_version=known)
                )
                async for snapshot in stream:
                    backoff = 0.05
                    if snapshot.version < known and snapshot.controller_epoch == 0:
                        continue
                    known = snapshot.version
                    result = on_metadata(snapshot)
                    if asyncio.iscoroutine(result):
                        await result
                # The stream ended: the controller stepped down or restarted.
            except grpc.aio.AioRpcError as exc:
                log.debug("metadata watch interrupted: %s", exc.code())
            self._rotate()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)


class Membership:
    """Register this node with the controller and heartbeat until stopped.

    Re-registers after the controller answers STALE_BROKER_EPOCH (it restarted and
    lost the session, or this node was declared offline).
    """

    def __init__(self, client: ControllerClient, node: common_pb2.Node) -> None:
        self.client = client
        self.node = node
        self.incarnation = 0
        self.heartbeat_interval = 1.0
        self.registered = asyncio.Event()
        self.cluster_id = ""
        self._task: asyncio.Task[None] | None = None
        self.on_heartbeat: Callable[[controller_pb2.HeartbeatResponse], None] | None = None

    async def register(self) -> None:
        response = await self.client.call(
            lambda s: s.RegisterNode,
            controller_pb2.RegisterNodeRequest(node=self.node),
            timeout=3600.0,
        )
        if response.error_code:
            raise RuntimeError(
                f"registration refused: {response.error_code} {response.error_message}"
            )
        self.incarnation = response.incarnation
        self.cluster_id = response.cluster_id
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval = response.heartbeat_interval_ms / 1000.0
        self.registered.set()

    async def announce(self, node: common_pb2.Node, *, timeout: float = 30.0) -> None:
        """Publish new endpoints of this node (a gateway's broker ports) for the live
        session: same incarnation, nothing fenced. Before the first registration, or if
        the session is gone, this registers afresh with them."""
        self.node = node
        response = await self.client.call(
            lambda s: s.RegisterNode,
            controller_pb2.RegisterNodeRequest(node=node, incarnation=self.incarnation),
            timeout=timeout,
        )
        if response.error_code:
            raise RuntimeError(
                f"registration refused: {response.error_code} {response.error_message}"
            )
        self.incarnation = response.incarnation
        self.registered.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="membership")

    async def _run(self) -> None:
        while True:
            try:
                if not self.registered.is_set():
                    await self.register()
                await asyncio.sleep(self.heartbeat_interval)
                response = await self.client.call(
                    lambda s: s.Heartbeat,
                    controller_pb2.HeartbeatRequest(
                        node_id=self.node.node_id, incarnation=self.incarnation
                    ),
                    timeout=max(2.0, self.heartbeat_interval * 3),
                    attempt_timeout=max(1.0, self.heartbeat_interval * 2),
                )
                if response.error_code == STALE_BROKER_EPOCH:
                    log.warning("controller says our registration is stale; registering again")
                    self.registered.clear()
                elif self.on_heartbeat is not None:
                    self.on_heartbeat(response)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep heartbeating through controller outages
                log.debug("heartbeat failed: %s", exc)
                await asyncio.sleep(min(self.heartbeat_interval, 1.0))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # Bounded: on 3.11 a cancellation racing a finishing gRPC call can be lost.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._task), 5.0)


async def join_cluster(
    client: ControllerClient,
    metadata: MetadataCache,
    node: common_pb2.Node,
    stop: asyncio.Event,
    *,
    timeout: float = 30.0,
) -> tuple[Membership, asyncio.Task[None]]:
    """Follow the metadata stream into ``metadata``, register ``node`` and heartbeat,
    then wait (bounded) until the metadata lists this node: from then on the service
    can serve. Returns the membership (stop it on shutdown) and the watch task."""
    watch = asyncio.get_running_loop().create_task(
        client.watch(metadata.update, stop), name="metadata-watch"
    )
    membership = Membership(client, node)
    await membership.register()
    membership.start()
    await metadata.wait_for(lambda s: node.node_id in s.nodes, timeout)
    return membership, watch
