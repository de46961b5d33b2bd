"""What an API module may use of the gateway: the contract between gateway.py and apis/.

Every module under ``odradek.gateway.apis`` defines::

    async def handle(
        gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: XRequest
    ) -> XResponse

with ``XRequest``/``XResponse`` the kafka-python message classes of its API, as
:mod:`odradek.protocol.messages` re-exports them (Produce answers ``None`` for
acks=0). :class:`~odradek.gateway.gateway.Gateway` is the one implementation; a
test may pass anything with these members.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from odradek.controller_client import ControllerClient
from odradek.datalink.frame import Buffer, Frame
from odradek.gateway.authentication import Credentials
from odradek.gateway.authorizer import Authorizer
from odradek.gateway.brokers import Broker
from odradek.gateway.client_quotas import ClientQuotas
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.group_routing import GroupRouter
from odradek.gateway.listener_certificates import ListenerCertificates
from odradek.gateway.txn_routing import TxnRouter
from odradek.metadata_cache import MetadataCache
from odradek.producer_id_blocks import ProducerIdBlocks
from odradek.protocol.api_keys import ApiKey
from odradek.rpc.v1 import storage_pb2, storage_pb2_grpc


class StorageStubs(Protocol):
    """gRPC stubs to storage nodes by node id (StorageUnavailable for an unknown node),
    and Produce/Fetch with the records beside the protobuf (odradek.storage_client)."""

    def stub(self, node_id: int) -> storage_pb2_grpc.StorageStub: ...

    async def produce(
        self,
        node_id: int,
        request: bytes,  # a serialized ProduceRequest (odradek.storage_client)
        records: Sequence[Buffer],
        timeout: float,
        on_sent: Callable[[], None] | None = None,
    ) -> storage_pb2.ProduceResponse: ...

    async def fetch(
        self, node_id: int, request: storage_pb2.FetchRequest, timeout: float
    ) -> tuple[storage_pb2.FetchResponse, list[Buffer]]: ...

    def produce_started(
        self, node_id: int, request: bytes, records: Sequence[Buffer], timeout: float
    ) -> asyncio.Future[Frame] | None: ...

    def fetch_started(
        self, node_id: int, request: storage_pb2.FetchRequest, timeout: float
    ) -> asyncio.Future[Frame] | None: ...


class GatewayApi(Protocol):
    """The gateway as its API modules see it."""

    @property
    def node_id(self) -> int:
        """This gateway's node id (its registration; clients never see it: the brokers
        they see are storage nodes, :meth:`brokers`)."""
        ...

    @property
    def metadata(self) -> MetadataCache:
        """The cluster as the controller's metadata stream last showed it."""
        ...

    @property
    def storage(self) -> StorageStubs: ...

    @property
    def controller(self) -> ControllerClient: ...

    @property
    def groups(self) -> GroupRouter:
        """Where group requests go (coordinators, offset stores)."""
        ...

    @property
    def transactions(self) -> TxnRouter:
        """Where transaction requests go (transaction coordinators)."""
        ...

    @property
    def producer_ids(self) -> ProducerIdBlocks:
        """Producer ids for InitProducerId, from controller-issued blocks."""
        ...

    @property
    def request_timeout_ms(self) -> int:
        """``request.timeout.ms``: the upper bound on a forwarded admin call."""
        ...

    @property
    def metadata_wait_s(self) -> float:
        """``metadata.wait.ms``: how long a change may take to show in ``metadata``."""
        ...

    @property
    def advertised_versions(self) -> Mapping[ApiKey, tuple[int, int]]:
        """The supported versions of the APIs served here (on some listener)."""
        ...

    @property
    def authorizer(self) -> Authorizer:
        """ACL checks (a no-op without ``authorizer.class.name``)."""
        ...

    @property
    def quotas(self) -> ClientQuotas:
        """Client quotas (producer_byte_rate, consumer_byte_rate, request_percentage)."""
        ...

    @property
    def certificates(self) -> ListenerCertificates:
        """The TLS listeners' certificates, reloaded on AlterConfigs and file changes."""
        ...

    @property
    def credentials(self) -> Credentials:
        """SCRAM credentials from the metadata (SASL authentication)."""
        ...

    def cluster_config(self, name: str) -> str:
        """A cluster-wide broker config (``cluster_configs`` of the metadata), else Kafka's default."""
        ...

    def versions_for(self, ctx: ConnectionContext) -> Mapping[ApiKey, tuple[int, int]]:
        """What ApiVersions lists on the client's listener (the SASL APIs on SASL
        listeners only)."""
        ...

    def brokers(self, listener: str | None = None) -> Mapping[int, Broker]:
        """The brokers clients of ``listener`` see: live storage nodes at their advertised
        endpoints on that listener (None: the first), by id (:mod:`odradek.gateway.brokers`)."""
        ...
