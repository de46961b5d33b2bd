"""Error cases as real clients meet them, with the wire answer behind each.

* unknown topic with auto-creation off (a cluster started with
  ``--set auto.create.topics.enable=false``, and a client asking not to create)
  -> UNKNOWN_TOPIC_OR_PARTITION, and no topic appears;
* invalid partition -> UNKNOWN_TOPIC_OR_PARTITION from Produce, Fetch, ListOffsets;
* MESSAGE_TOO_LARGE exactly above max.message.bytes (default 1048588, which bounds
  the whole batch: a lone record with a null key and no headers has 72 bytes of
  framing, so its value may have 1048516 bytes and not one more), and above a
  topic's own override.
Offset out of range with auto.offset.reset=none is in test_compat_offsets.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from compat_admin import LIBRDKAFKA_NAMES, ConfluentAdmin
from compat_clients import (
    Client,
    ConfluentClient,
    JavaClient,
    KafkajsClient,
    KcatClient,
    create_topic,
)
from compat_model import DEFAULT_MAX_MESSAGE_BYTES, ClientError, Rec
from compat_up import UpCluster, start_up, stop_up
from confluent_kafka import TopicPartition
from helpers.waiting import wait_until
from helpers.wire import WireClient, fetch_request

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from odradek.records import BatchBuilder

UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
LONE_RECORD_FRAMING = 72  # 61-byte batch header + 11 bytes of record framing
LARGEST_VALUE = DEFAULT_MAX_MESSAGE_BYTES - LONE_RECORD_FRAMING


@pytest.fixture(scope="module")
def no_auto_create(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(
        tmp_path_factory.mktemp("noauto") / "data",
        ["--no-groups", "--set", "auto.create.topics.enable=false"],
    )
    yield cluster
    stop_up(cluster)


def _metadata(bootstrap: str, topic: str, allow_auto_create: bool) -> tuple[int, int]:
    """(topic error code, partition count) from a Metadata v12 request naming ``topic``."""
    with WireClient(bootstrap) as wire:
        resp = wire.request(
            3,
            12,
            MetadataRequest(
                topics=[
                    MetadataRequest.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=topic)
                ],
                allow_auto_topic_creation=allow_auto_create,
                include_topic_authorized_operations=False,
            ),
        )
    (t,) = resp.topics
    return int(t.error_code), len(t.partitions)


# -- unknown topics -----------------------------------------------------------------------
def test_metadata_does_not_create_when_auto_create_is_off(no_auto_create: UpCluster) -> None:
    topic = f"absent-{uuid.uuid4().hex[:8]}"
    assert _metadata(no_auto_create.bootstrap, topic, True) == (UNKNOWN, 0)
    assert topic not in ConfluentAdmin(no_auto_create.bootstrap).topics()


def test_metadata_respects_the_clients_allow_auto_create(bootstrap: str) -> None:
    """auto.create.topics.enable is on here: the client's flag decides (Metadata v4+)."""
    topic = f"maybe-{uuid.uuid4().hex[:8]}"
    assert _metadata(bootstrap, topic, False) == (UNKNOWN, 0)
    assert topic not in ConfluentAdmin(bootstrap).topics()
    code, partitions = _metadata(bootstrap, topic, True)
    assert code in (0, ErrorCode.LEADER_NOT_AVAILABLE) and partitions in (0, 1)
    wait_until(
        lambda: _metadata(bootstrap, topic, False) == (0, 1),
        "the auto-created topic to appear with 1 partition",
    )


PRODUCE_UNKNOWN = {
    "confluent": {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"},
    "kafka-python": {"KafkaTimeoutError"},  # blocks on metadata that never shows it
    "aiokafka": {"KafkaTimeoutError", "UnknownTopicOrPartitionError"},
    "java": {"TimeoutException", "UnknownTopicOrPartitionException"},
    "kafkajs": {"UNKNOWN_TOPIC_OR_PARTITION"},
}
FAST_FAIL = {
    # librdkafka holds messages for a topic it cannot see yet for
    # topic.metadata.propagation.max.ms before failing them as unknown
    "confluent": {"message.timeout.ms": 20000, "topic.metadata.propagation.max.ms": 1000},
    "kafka-python": {"max_block_ms": 3000},
    "aiokafka": {"request_timeout_ms": 3000},
    "java": {"max.block.ms": 3000},
    "kafkajs": {"retries": 1},
}


@pytest.mark.parametrize("name", list(PRODUCE_UNKNOWN))
def test_produce_to_unknown_topic_fails(
    name: str, no_auto_create: UpCluster, make_client: Callable[[str, str], Client]
) -> None:
    client = make_client(name, no_auto_create.bootstrap)
    topic = f"absent-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ClientError) as err:
        client.produce(topic, [Rec(b"k", b"v")], config=FAST_FAIL[name])
    assert err.value.code in PRODUCE_UNKNOWN[name], str(err.value)
    assert topic not in ConfluentAdmin(no_auto_create.bootstrap).topics()


def test_kcat_produce_to_unknown_topic_fails(
    no_auto_create: UpCluster, make_client: Callable[[str, str], Client]
) -> None:
    kcat = make_client("kcat", no_auto_create.bootstrap)
    assert isinstance(kcat, KcatClient)
    with pytest.raises(ClientError) as err:
        kcat.run(
            [
                "-P",
                "-t",
                "absent-kcat",
                "-X",
                "message.timeout.ms=20000",
                "-X",
                "topic.metadata.propagation.max.ms=1000",
            ],
            stdin=b"v\n",
        )
    assert "unknown topic" in err.value.message.lower(), err.value.message


def test_java_consumer_with_allow_auto_create_false(bootstrap: str, java: JavaClient) -> None:
    """The Java consumer's allow.auto.create.topics=false must not create the topic,
    even though the cluster would auto-create for a client that asks."""
    topic = f"nocreate-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ClientError):
        java.run(
            "consume",
            {
                "topic": topic,
                "count": 1,
                "timeout.ms": 2000,
                "consumer.allow.auto.create.topics": "false",
                "consumer.default.api.timeout.ms": 3000,
            },
        )
    assert topic not in ConfluentAdmin(bootstrap).topics()


# -- invalid partitions ---------------------------------------------------------------------
def test_wire_answers_unknown_partition(bootstrap: str, unique_topic: str) -> None:
    create_topic(bootstrap, unique_topic, 1)
    batch = BatchBuilder()
    batch.append(int(time.time() * 1000), b"k", b"v")
    data = ProduceRequest.TopicProduceData
    lo_topic = ListOffsetsRequest.ListOffsetsTopic
    with WireClient(bootstrap) as wire:
        produce = wire.request(
            0,
            9,
            ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    data(
                        name=unique_topic,
                        partition_data=[data.PartitionProduceData(index=7, records=batch.build())],
                    )
                ],
            ),
        )
        (p,) = produce.responses[0].partition_responses
        assert (p.index, p.error_code) == (7, UNKNOWN)
        fetch = wire.request(1, 12, fetch_request(unique_topic, 7, max_wait_ms=100, min_bytes=1))
        (fp,) = fetch.responses[0].partitions
        assert (fp.partition_index, fp.error_code) == (7, UNKNOWN)
        assert (fp.high_watermark, fp.log_start_offset) == (-1, -1), "docs/compatibility.md C9"
        offsets = wire.request(
            2,
            7,
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    lo_topic(
                        name=unique_topic,
                        partitions=[
                            lo_topic.ListOffsetsPartition(
                                partition_index=7, current_leader_epoch=-1, timestamp=-1
                            )
                        ],
                    )
                ],
            ),
        )
        (lp,) = offsets.topics[0].partitions
        assert (lp.partition_index, lp.error_code) == (7, UNKNOWN)


PRODUCE_BAD_PARTITION = {
    "confluent": {"_UNKNOWN_PARTITION"},
    "kafka-python": {"ValueError"},  # "Unrecognized partition"
    "aiokafka": {"AssertionError", "ValueError"},
    "java": {"TimeoutException"},  # "Partition 5 ... is not present in metadata"
    "kafkajs": {"NO_ACK"},  # kafkajs drops it silently (see KafkajsClient.produce)
}


@pytest.mark.parametrize("name", list(PRODUCE_BAD_PARTITION))
def test_produce_to_invalid_partition_fails(
    name: str, clients: Callable[[str], Client], unique_topic: str, bootstrap: str
) -> None:
    create_topic(bootstrap, unique_topic, 2)
    client = clients(name)
    with pytest.raises(ClientError) as err:
        client.produce(unique_topic, [Rec(b"k", b"v")], partition=5, config=FAST_FAIL[name])
    assert err.value.code in PRODUCE_BAD_PARTITION[name], str(err.value)
    # and nothing landed anywhere
    assert clients("confluent").consume(unique_topic, [0, 1], 1, timeout=1) == []


# -- MESSAGE_TOO_LARGE ------------------------------------------------------------------------
TOO_LARGE = {
    "confluent": {"MSG_SIZE_TOO_LARGE"},
    "kafka-python": {"MessageSizeTooLargeError"},
    "aiokafka": {"MessageSizeTooLargeError"},
    "java": {"RecordTooLargeException"},
    "kafkajs": {"MESSAGE_TOO_LARGE"},
}


@pytest.mark.parametrize("name", list(TOO_LARGE))
def test_message_too_large_at_the_exact_default_limit(
    name: str, clients: Callable[[str], Client], unique_topic: str, bootstrap: str
) -> None:
    create_topic(bootstrap, unique_topic, 1)
    client = clients(name)
    fits = Rec(None, os.urandom(LARGEST_VALUE))
    (acked,) = client.produce(unique_topic, [fits], partition=0, idempotent=False)
    assert acked.offset in (0, -1)
    with pytest.raises(ClientError) as err:
        client.produce(
            unique_topic, [Rec(None, os.urandom(LARGEST_VALUE + 1))], partition=0, idempotent=False
        )
    assert err.value.code in TOO_LARGE[name], str(err.value)
    consumer = ConfluentClient(bootstrap).consumer()
    try:
        marks = consumer.get_watermark_offsets(TopicPartition(unique_topic, 0), timeout=10)
    finally:
        consumer.close()
    assert marks == (0, 1), "only the fitting record is stored"
    (got,) = clients("confluent").consume(unique_topic, [0], 1)
    assert got.value == fits.value


def test_topic_max_message_bytes_override(
    clients: Callable[[str], Client], unique_topic: str, bootstrap: str, kafkajs: KafkajsClient
) -> None:
    create_topic(bootstrap, unique_topic, 1, {"max.message.bytes": "2000"})
    for name in ("confluent", "java"):
        with pytest.raises(ClientError) as err:
            clients(name).produce(unique_topic, [Rec(b"k", b"x" * 2500)], partition=0)
        code = LIBRDKAFKA_NAMES.get(err.value.code, err.value.code)
        assert code in ("MESSAGE_TOO_LARGE", "RecordTooLargeException"), str(err.value)
    with pytest.raises(ClientError) as err:
        kafkajs.produce(unique_topic, [Rec(b"k", b"x" * 2500)], partition=0)
    assert err.value.code == "MESSAGE_TOO_LARGE"
    clients("confluent").produce(unique_topic, [Rec(b"k", b"x" * 1500)], partition=0)
