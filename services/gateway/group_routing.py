"""Where the gateway sends group requests, shared by the group API modules.

- Membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), DescribeGroups,
  DeleteGroups, OffsetCommit and OffsetDelete go to the coordinator owning the group's
  shard (``abs(java hash(group id)) % offsets.topic.num.partitions``; owners from
  ``ClusterMetadata.coordinator_shards``). Commits pass through the coordinator
  because only it can check member ids and generations; it then has the offset store
  write them.
- OffsetFetch goes straight to the offset store owning the shard: reads are served
  from its cache, and need no group state.

Every group has one coordinator *broker*, as in Kafka: the storage node leading the
group's ``__consumer_offsets`` partition, advertised at a gateway's broker port for it
(:mod:`odradek.gateway.brokers`). FindCoordinator answers it, and ListGroups on that
broker's port lists the group (admin clients ask every broker and merge). Any gateway
still forwards any group's requests whatever port they arrive on, so a client holding
an old answer keeps working. A coordinator service that cannot be reached becomes
NOT_COORDINATOR, so clients look the coordinator up again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.coordinator_routing import CoordinatorRouting
from odradek.group_shard import OFFSETS_TOPIC, coordinator_of, shard_of
from odradek.offset_store_client import OffsetStoreClient
from odradek.protocol.errors import ErrorCode
from odradek.rpc.channel import NodeChannels
from odradek.rpc.v1 import common_pb2, coordinator_pb2_grpc

log = logging.getLogger(__name__)

Stub = coordinator_pb2_grpc.GroupCoordinatorStub
T = TypeVar("T")

# Long-polls (JoinGroup/SyncGroup) wait this much beyond what the coordinator itself
# bounds them by, so the coordinator's answer always arrives first.
LONG_POLL_MARGIN_S = 10.0
# SyncGroup does not carry a rebalance timeout; the coordinator bounds it by the
# group's (pending-sync expiry). This is only a backstop.
SYNC_BACKSTOP_S = 1800.0


class GroupRouter(CoordinatorRouting):
    """One per gateway (``Gateway.groups``): channels to the coordinators and offset stores."""

    internal_topic = OFFSETS_TOPIC

    def _init_channels(self) -> None:
        self.offsets = OffsetStoreClient(self.metadata)
        # Re-opened when a coordinator moves or the internal TLS certificate is renewed.
        self._channels = NodeChannels(coordinator_pb2_grpc.GroupCoordinatorStub)

    def shard(self, group_id: str) -> int:
        return shard_of(self.raw, group_id)

    def coordinator_node(self, group_id: str) -> common_pb2.Node | None:
        owner, _ = coordinator_of(self.raw, self.shard(group_id))
        node = self.metadata.current.nodes.get(owner) if owner >= 0 else None
        if node is None or node.state != common_pb2.ONLINE or node.grpc_port <= 0:
            return None
        return node

    def coordinator_stub(self, group_id: str) -> coordinator_pb2_grpc.GroupCoordinatorStub | None:
        node = self.coordinator_node(group_id)
        if node is None:
            return None
        return self._stub(node)

    def _stub(self, node: common_pb2.Node) -> coordinator_pb2_grpc.GroupCoordinatorStub:
        return self._channels.stub(node.node_id, f"{node.host}:{node.grpc_port}")

    def all_coordinators(self) -> list[coordinator_pb2_grpc.GroupCoordinatorStub]:
        nodes = self.metadata.current.nodes_of(common_pb2.COORDINATOR)
        return [self._stub(n) for n in nodes if n.grpc_port > 0]

    def available(self, group_id: str) -> bool:
        """Whether FindCoordinator may name a coordinator for the group now."""
        return (
            self.coordinator_broker(group_id) is not None
            and self.coordinator_node(group_id) is not None
            and self.offsets.stub(self.shard(group_id)) is not None
        )

    def group_timeout_s(self) -> float:
        return self.timeout_s

    async def call(
        self,
        group_id: str,
        method: Callable[[Stub], Callable[..., Awaitable[T]]],
        request: object,
    ) -> T | int:
        """``method(stub)(request)`` on the group's coordinator (not a long poll); a Kafka
        error code when there is none or the call fails (clients find it again)."""
        stub = self.coordinator_stub(group_id)
        if stub is None:
            return ErrorCode.NOT_COORDINATOR
        try:
            return await method(stub)(request, timeout=self.group_timeout_s())
        except grpc.aio.AioRpcError as exc:
            return rpc_error(exc)

    async def close(self) -> None:
        await self._channels.close()
        await self.offsets.close()


def rpc_error(exc: grpc.aio.AioRpcError, *, long_poll: bool = False) -> int:
    """A failed call to a coordinator, as the Kafka error a client retries on."""
    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and long_poll:
        return ErrorCode.REBALANCE_IN_PROGRESS
    log.debug("coordinator call failed: %s", exc.code())
    return ErrorCode.NOT_COORDINATOR


def client_host(ctx: ConnectionContext) -> str:
    """Kafka's ``/address`` form of the client's host, as DescribeGroups shows it."""
    peer = ctx.peer
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]") if host else ""
