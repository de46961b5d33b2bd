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
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import grpc

from odradek import internal_tls
from odradek.metadata_cache import MetadataCache
from odradek.rpc.channel import Channels, SyncChannels
from odradek.rpc.v1 import common_pb2, controller_pb2, controller_pb2_grpc

log = logging.getLogger(__name__)

NOT_CONTROLLER = 41
STALE_BROKER_EPOCH = 77
HEARTBEAT_RETRY_S = 0.5  # after an unanswered heartbeat (Membership)
_RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
}

T = TypeVar("T")


class ControllerUnavailable(RuntimeError):
    kafka_error = "REQUEST_TIMED_OUT"


class ControllerClient:
    def __init__(
        self, addresses: list[str] | str, tls: internal_tls.InternalTls | None = None
    ) -> None:
        if isinstance(addresses, str):
            addresses = [a.strip() for a in addresses.split(",") if a.strip()]
        if not addresses:
            raise ValueError("no controller address configured")
        self.addresses = addresses
        self._index = 0
        self.tls = tls  # None: the process's own (odradek.internal_tls.active())
        # Per address, re-opened when the internal TLS certificate is renewed.
        self._channels: Channels[str, controller_pb2_grpc.ControllerStub] = Channels(
            controller_pb2_grpc.ControllerStub, tls
        )

    def _stub(self) -> controller_pb2_grpc.ControllerStub:
        address = self.addresses[self._index % len(self.addresses)]
        return self._channels.stub(address, address)

    def _rotate(self) -> None:
        self._index += 1

    async def close(self) -> None:
        await self._channels.close()

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

    Heartbeats go out from a thread of their own (Kafka's ``BrokerLifecycleManager``
    heartbeats from its own event-queue thread, not from the request handlers), so a
    node whose event loop is busy for a while (applying metadata that creates a hundred
    partitions, each with fsynced checkpoints, on a loaded disk) is not fenced as dead
    after ``broker.session.timeout.ms``. The first registration is the caller's, on the
    event loop; when the controller answers STALE_BROKER_EPOCH (it restarted and lost
    the session, or this node was declared offline) the thread registers again itself
    and heartbeats the new session at once. Were that left to the loop, the loop would
    first apply the metadata the new registration brings (leaderships moving back:
    seconds for hundreds of partitions on a loaded machine), the new session would
    expire unheartbeated, and the node would flap offline and online for as long as
    that lasts (seen in the chaos campaign, tests/integration/test_chaos_campaign.py).
    """

    def __init__(self, client: ControllerClient, node: common_pb2.Node) -> None:
        self.client = client
        self.node = node
        self.incarnation = 0
        self.heartbeat_interval = 2.0  # broker.heartbeat.interval.ms until registered
        self.registered = asyncio.Event()
        self.cluster_id = ""
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._beats: threading.Thread | None = None
        self._halt = threading.Event()
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
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="membership")
        self._halt.clear()
        self._beats = threading.Thread(
            target=self._heartbeat_thread, name=f"heartbeat-{self.node.node_id}", daemon=True
        )
        self._beats.start()

    async def _run(self) -> None:
        """Register until it succeeds, when started before the first registration."""
        while not self.registered.is_set():
            try:
                await self.register()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep trying through controller outages
                log.debug("registration failed: %s", exc)
                await asyncio.sleep(min(self.heartbeat_interval, 1.0))

    def _session_stale(self, incarnation: int) -> None:
        """On the loop: the controller no longer knows ``incarnation``; the heartbeat
        thread is registering again."""
        if incarnation == self.incarnation and self.registered.is_set():
            log.warning("controller says our registration is stale; registering again")
            self.registered.clear()

    def _registered_again(self, response: controller_pb2.RegisterNodeResponse) -> None:
        """On the loop: the heartbeat thread's registration succeeded."""
        if response.incarnation == self.incarnation:
            self.cluster_id = response.cluster_id or self.cluster_id
            self.registered.set()

    def _register_from_thread(self, beats: _HeartbeatSender) -> None:
        """Register again from the heartbeat thread, retrying until it succeeds or the
        membership stops (Kafka's BrokerLifecycleManager also registers and heartbeats
        from one thread of its own)."""
        while not self._halt.is_set():
            response = beats.register(
                controller_pb2.RegisterNodeRequest(node=self.node),
                timeout=max(1.0, self.heartbeat_interval * 2),
            )
            if response is not None and not response.error_code:
                self.incarnation = response.incarnation
                if response.heartbeat_interval_ms > 0:
                    self.heartbeat_interval = response.heartbeat_interval_ms / 1000.0
                loop = self._loop
                if loop is not None:
                    with contextlib.suppress(RuntimeError):  # the loop closed
                        loop.call_soon_threadsafe(self._registered_again, response)
                return
            if response is not None:
                log.warning(
                    "registration refused: %d %s", response.error_code, response.error_message
                )
            self._halt.wait(min(self.heartbeat_interval, 1.0))

    def _deliver(self, response: controller_pb2.HeartbeatResponse) -> None:
        if self.on_heartbeat is not None:
            self.on_heartbeat(response)

    def _heartbeat_thread(self) -> None:
        beats = _HeartbeatSender(self.client)
        wait = self.heartbeat_interval
        try:
            while not self._halt.wait(wait):
                wait = self.heartbeat_interval
                incarnation = self.incarnation
                if not incarnation:
                    continue
                response = beats.send(
                    controller_pb2.HeartbeatRequest(
                        node_id=self.node.node_id, incarnation=incarnation
                    ),
                    timeout=max(1.0, self.heartbeat_interval),
                )
                if response is None:
                    # Unanswered (timed out, or not the active controller): try again
                    # soon rather than a whole interval later, so one lost beat never
                    # costs the session (Kafka's BrokerLifecycleManager also resends
                    # after a failure with a short backoff).
                    wait = min(self.heartbeat_interval, HEARTBEAT_RETRY_S)
                loop = self._loop
                if response is None or loop is None or self._halt.is_set():
                    continue
                try:
                    if response.error_code == STALE_BROKER_EPOCH:
                        loop.call_soon_threadsafe(self._session_stale, incarnation)
                        if incarnation == self.incarnation:  # not renewed meanwhile
                            self._register_from_thread(beats)
                    elif response.error_code == 0:
                        loop.call_soon_threadsafe(self._deliver, response)
                except RuntimeError:  # the loop closed: the service is gone
                    return
        finally:
            beats.close()

    async def stop(self) -> None:
        self._halt.set()
        if self._task is not None:
            self._task.cancel()
            # Bounded: on 3.11 a cancellation racing a finishing gRPC call can be lost.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(self._task), 5.0)
        beats, self._beats = self._beats, None
        if beats is not None:
            await asyncio.to_thread(beats.join, 5.0)


class _ControllerAnswer(Protocol):
    error_code: int


_Answer = TypeVar("_Answer", bound=_ControllerAnswer)


class _HeartbeatSender:
    """Blocking Heartbeat calls for :class:`Membership`'s thread: its own synchronous
    channel (``grpc.aio`` channels belong to the event loop), to the controller that
    answers as active, rotating through ``client.addresses`` like
    :meth:`ControllerClient.call`."""

    def __init__(self, client: ControllerClient) -> None:
        self.client = client
        self._index = 0
        self._channels: SyncChannels[str, controller_pb2_grpc.ControllerStub] = SyncChannels(
            controller_pb2_grpc.ControllerStub, client.tls
        )

    def _current(self) -> controller_pb2_grpc.ControllerStub:
        addresses = self.client.addresses
        address = addresses[self._index % len(addresses)]
        return self._channels.stub(address, address)

    def send(
        self, request: controller_pb2.HeartbeatRequest, timeout: float
    ) -> controller_pb2.HeartbeatResponse | None:
        """The active controller's answer, or None (no answer this time)."""
        return self._ask(lambda stub: stub.Heartbeat, request, timeout)

    def register(
        self, request: controller_pb2.RegisterNodeRequest, timeout: float
    ) -> controller_pb2.RegisterNodeResponse | None:
        """The active controller's answer to a registration, or None (no answer)."""
        return self._ask(lambda stub: stub.RegisterNode, request, timeout)

    def _ask(
        self,
        method: Callable[[controller_pb2_grpc.ControllerStub], Callable[..., _Answer]],
        request: object,
        timeout: float,
    ) -> _Answer | None:
        """One call to the controller thought active; None, and the next address next
        time, when it does not answer or is not the active one."""
        try:
            response = method(self._current())(request, timeout=timeout)
        except grpc.RpcError as exc:
            log.debug("controller call failed: %s", exc)
            self._index += 1
            return None
        if response.error_code == NOT_CONTROLLER:
            self._index += 1
            return None
        return response

    def close(self) -> None:
        self._channels.close()


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
