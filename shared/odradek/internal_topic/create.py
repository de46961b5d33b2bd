"""Creating an internal topic the way Kafka does (``AutoTopicCreationManager``,
``GroupCoordinator.groupMetadataTopicConfigs``, ``TransactionStateManager.
transactionTopicConfigs``): internal, compacted, its partition count and replication
factor from the owning service's settings (the replication factor capped by the storage
nodes alive, as ``odradek up`` may start fewer than three; ``min.insync.replicas`` capped
by the replication factor likewise).

``__consumer_offsets``: ``offsets.topic.num.partitions``, ``offsets.topic.replication.
factor``, ``segment.bytes`` = ``offsets.topic.segment.bytes``.
``__transaction_state``: ``transaction.state.log.num.partitions``, ``.replication.factor``,
``min.insync.replicas`` = ``transaction.state.log.min.isr``, ``segment.bytes`` =
``transaction.state.log.segment.bytes``, ``unclean.leader.election.enable=false``,
``compression.type=uncompressed``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.controller_client import ControllerClient
from odradek.metadata_cache import MetadataCache, Snapshot
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import common_pb2, controller_pb2

log = logging.getLogger(__name__)

STORAGE_WAIT_S = 10.0


@dataclass(frozen=True)
class InternalTopic:
    """What to create once enough is known: ``configs(replication_factor)`` gives the
    topic configs (some depend on the replication factor actually used)."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: Callable[[int], dict[str, str]] = field(default=lambda rf: {})


def _enough_storage(name: str, wanted: int, snapshot: Snapshot) -> bool:
    return len(snapshot.nodes_of(common_pb2.STORAGE)) >= wanted or name in snapshot.topics


def broker_setting(metadata: MetadataCache, own: Mapping[str, str], name: str) -> int:
    """A broker config as a service reads it: its own setting, else the controller's
    cluster-wide value, else Kafka's default."""
    raw = own.get(name) or metadata.current.raw.cluster_configs.get(name) or ""
    try:
        return int(raw) if raw else BROKER_CONFIGS.int(name)
    except ValueError:
        return BROKER_CONFIGS.int(name)


def offsets_topic(metadata: MetadataCache, own: Mapping[str, str]) -> InternalTopic:
    segment = broker_setting(metadata, own, "offsets.topic.segment.bytes")
    return InternalTopic(
        "__consumer_offsets",
        broker_setting(metadata, own, "offsets.topic.num.partitions"),
        broker_setting(metadata, own, "offsets.topic.replication.factor"),
        lambda rf: {"cleanup.policy": "compact", "segment.bytes": str(segment)},
    )


def transaction_state_topic(metadata: MetadataCache, own: Mapping[str, str]) -> InternalTopic:
    segment = broker_setting(metadata, own, "transaction.state.log.segment.bytes")
    min_isr = broker_setting(metadata, own, "transaction.state.log.min.isr")
    return InternalTopic(
        "__transaction_state",
        broker_setting(metadata, own, "transaction.state.log.num.partitions"),
        broker_setting(metadata, own, "transaction.state.log.replication.factor"),
        lambda rf: {
            "cleanup.policy": "compact",
            "segment.bytes": str(segment),
            "min.insync.replicas": str(max(1, min(min_isr, rf))),
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
        },
    )


async def ensure_internal_topic(
    controller: ControllerClient,
    metadata: MetadataCache,
    describe: Callable[[], InternalTopic],
    timeout_s: float,
) -> bool:
    """True once the topic exists and every partition has a leader; False on timeout.
    ``describe()`` is asked again on every attempt (settings may arrive late). Fewer
    storage nodes than the replication factor: wait up to ``STORAGE_WAIT_S`` for more,
    then create with as many replicas as there are nodes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    # Storage nodes of a starting cluster register one by one: give them a moment
    # before settling for a smaller replication factor.
    patience = loop.time() + min(STORAGE_WAIT_S, timeout_s / 2)
    name = describe().name

    def ready(snapshot: object) -> bool:
        topic = metadata.current.topics.get(name)
        return topic is not None and all(p.leader >= 0 for p in topic.partitions)

    while loop.time() < deadline:
        if name in metadata.current.topics:
            return await metadata.wait_for(ready, max(0.0, deadline - loop.time()))
        storage = metadata.current.nodes_of(common_pb2.STORAGE)
        if not storage:
            await metadata.wait_for(
                lambda s: bool(s.nodes_of(common_pb2.STORAGE)) or name in s.topics,
                min(1.0, max(0.0, deadline - loop.time())),
            )
            continue
        spec = describe()
        if len(storage) < spec.replication_factor and loop.time() < patience:
            await metadata.wait_for(
                functools.partial(_enough_storage, name, spec.replication_factor),
                max(0.0, patience - loop.time()),
            )
            continue
        rf = max(1, min(spec.replication_factor, len(storage)))
        try:
            response = await controller.call(
                lambda s: s.CreateTopics,
                controller_pb2.CreateTopicsRequest(
                    internal=True,
                    topics=[
                        controller_pb2.CreatableTopic(
                            name=name,
                            num_partitions=spec.num_partitions,
                            replication_factor=rf,
                            configs=spec.configs(rf),
                        )
                    ],
                ),
                timeout=max(1.0, deadline - loop.time()),
            )
        except Exception as exc:
            log.info("creating %s failed, retrying: %s", name, exc)
            await asyncio.sleep(0.2)
            continue
        result = response.results[0] if response.results else None
        if result is not None and result.error_code not in (
            ErrorCode.NONE,
            ErrorCode.TOPIC_ALREADY_EXISTS,
        ):
            log.warning("creating %s: error %d %s", name, result.error_code, result.error_message)
            await asyncio.sleep(0.5)
            continue
        log.info("%s created: %d partitions, replication factor %d", name, spec.num_partitions, rf)
        await metadata.wait_for(lambda s: name in s.topics, max(0.0, deadline - loop.time()))
    return ready(None)
