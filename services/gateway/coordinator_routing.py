"""What group and transaction routing share: a key's coordinator *broker*.

A group id belongs to one ``__consumer_offsets`` partition and a transactional id to
one ``__transaction_state`` partition (the key's shard). As in Kafka, the broker
leading that partition is the key's coordinator: FindCoordinator names it, and
ListGroups/ListTransactions on that broker's port list the key (admin clients ask
every broker and merge). :mod:`odradek.gateway.group_routing` and
:mod:`odradek.gateway.txn_routing` add where the requests themselves go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from odradek.gateway.brokers import Broker, broker_of_partition
from odradek.metadata_cache import MetadataCache
from odradek.rpc.v1 import common_pb2


class CoordinatorRouting:
    """Key -> shard -> coordinator broker, over the gateway's metadata and brokers.

    ``timeout_s`` bounds a call to a coordinator service: the request timeout plus a
    margin, so the coordinator's own answer (e.g. REQUEST_TIMED_OUT) arrives first.
    """

    internal_topic: str  # the topic whose partitions are the shards

    def __init__(
        self,
        metadata: MetadataCache,
        brokers: Callable[[str | None], Mapping[int, Broker]],
        request_timeout_ms: int,
    ) -> None:
        self.metadata = metadata
        self._brokers = brokers
        self.timeout_s = request_timeout_ms / 1000.0 + 5.0
        self._init_channels()

    def _init_channels(self) -> None:
        """Set up the (lazily opened) channels to this kind of coordinator."""

    @property
    def raw(self) -> common_pb2.ClusterMetadata:
        return self.metadata.current.raw

    def shard(self, key: str) -> int:
        raise NotImplementedError

    def available(self, key: str) -> bool:
        """Whether FindCoordinator may name a coordinator for the key now."""
        raise NotImplementedError

    def coordinator_broker(self, key: str, listener: str | None = None) -> Broker | None:
        """The broker FindCoordinator names: the leader of the key's partition of the
        internal topic (at its endpoint on ``listener``), None while that has no leader."""
        return broker_of_partition(
            self.metadata.current, self._brokers(listener), self.internal_topic, self.shard(key)
        )

    def listed_on(self, key: str, broker_id: int | None) -> bool:
        """Whether a List request on ``broker_id``'s port lists the key (None, the
        bootstrap listener, answers for the whole cluster)."""
        if broker_id is None:
            return True
        broker = self.coordinator_broker(key)
        return broker is not None and broker.node_id == broker_id
