"""Creating ``__consumer_offsets`` the way Kafka does: internal, compacted, with
``offsets.topic.num.partitions`` partitions and ``offsets.topic.replication.factor``
replicas (capped by the storage nodes alive, as ``odradek up`` may start fewer than
three), ``segment.bytes`` = ``offsets.topic.segment.bytes``."""

from __future__ import annotations

import asyncio
import logging

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.controller_client import ControllerClient
from odradek.group_shard import OFFSETS_TOPIC
from odradek.metadata_cache import MetadataCache
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import common_pb2, controller_pb2

log = logging.getLogger(__name__)


def _setting(metadata: MetadataCache, own: dict[str, str], name: str) -> int:
    raw = own.get(name) or metadata.current.raw.cluster_configs.get(name) or ""
    try:
        return int(raw) if raw else BROKER_CONFIGS.int(name)
    except ValueError:
        return BROKER_CONFIGS.int(name)


async def ensure_offsets_topic(
    controller: ControllerClient,
    metadata: MetadataCache,
    own_settings: dict[str, str],
    timeout_s: float,
) -> bool:
    """True once the topic exists and every partition has a leader; False on timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s

    def ready(snapshot: object) -> bool:
        topic = metadata.current.topics.get(OFFSETS_TOPIC)
        return topic is not None and all(p.leader >= 0 for p in topic.partitions)

    while loop.time() < deadline:
        if OFFSETS_TOPIC in metadata.current.topics:
            return await metadata.wait_for(ready, max(0.0, deadline - loop.time()))
        storage = metadata.current.nodes_of(common_pb2.STORAGE)
        if not storage:
            await metadata.wait_for(
                lambda s: bool(s.nodes_of(common_pb2.STORAGE)) or OFFSETS_TOPIC in s.topics,
                min(1.0, max(0.0, deadline - loop.time())),
            )
            continue
        partitions = _setting(metadata, own_settings, "offsets.topic.num.partitions")
        rf = _setting(metadata, own_settings, "offsets.topic.replication.factor")
        segment = _setting(metadata, own_settings, "offsets.topic.segment.bytes")
        rf = max(1, min(rf, len(storage)))
        try:
            response = await controller.call(
                lambda s: s.CreateTopics,
                controller_pb2.CreateTopicsRequest(
                    internal=True,
                    topics=[
                        controller_pb2.CreatableTopic(
                            name=OFFSETS_TOPIC,
                            num_partitions=partitions,
                            replication_factor=rf,
                            configs={"cleanup.policy": "compact", "segment.bytes": str(segment)},
                        )
                    ],
                ),
                timeout=max(1.0, deadline - loop.time()),
            )
        except Exception as exc:
            log.info("creating %s failed, retrying: %s", OFFSETS_TOPIC, exc)
            await asyncio.sleep(0.2)
            continue
        result = response.results[0] if response.results else None
        if result is not None and result.error_code not in (
            ErrorCode.NONE,
            ErrorCode.TOPIC_ALREADY_EXISTS,
        ):
            log.warning(
                "creating %s: error %d %s", OFFSETS_TOPIC, result.error_code, result.error_message
            )
            await asyncio.sleep(0.5)
            continue
        log.info("%s created: %d partitions, replication factor %d", OFFSETS_TOPIC, partitions, rf)
        await metadata.wait_for(
            lambda s: OFFSETS_TOPIC in s.topics, max(0.0, deadline - loop.time())
        )
    return ready(None)
