"""Client quotas on a real cluster with two gateways: AlterClientQuotas and
DescribeClientQuotas with Kafka's errors, producer_byte_rate and consumer_byte_rate
holding real confluent-kafka clients to about the configured rate (librdkafka sees the
throttle), KIP-55 precedence, request_percentage, KIP-219 muting, the per-entity
metrics and ``odradek quotas``."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from helpers.batches import producer_batch
from helpers.waiting import wait_until
from helpers.wire import WireClient
from prometheus_client.parser import text_string_to_metric_families

from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    DescribeClientQuotasRequest,
    MetadataRequest,
    ProduceRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version
from odradek.tools.launcher import Cluster

E = AlterClientQuotasRequest.EntryData
C = DescribeClientQuotasRequest.ComponentData
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
THROTTLING_QUOTA_EXCEEDED = 89
RATE = 200_000  # bytes/s for the rate tests
WINDOWS = 3  # quota.window.num


@pytest.fixture(scope="module")
def cluster(module_cluster_factory: Callable[..., Cluster]) -> Cluster:
    # Three one-second samples instead of Kafka's eleven: the same rules, shorter tests
    # (the first two seconds may go in a burst; rates converge within seconds).
    return module_cluster_factory(
        gateways=2, console=False, settings={"quota.window.num": str(WINDOWS)}
    )


def _gateways(cluster: Cluster) -> list[str]:
    return cluster.bootstrap_servers.split(",")


def _alter(
    bootstrap: str,
    entity: list[tuple[str, str | None]],
    ops: list[tuple[str, float | None]],
    validate_only: bool = False,
) -> Any:
    with WireClient(bootstrap) as w:
        return w.call(
            AlterClientQuotasRequest(
                entries=[
                    E(
                        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                        ops=[E.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops],
                    )
                ],
                validate_only=validate_only,
            ),
            1,
        )


def _set(bootstrap: str, entity: list[tuple[str, str | None]], **values: float | None) -> None:
    (entry,) = _alter(bootstrap, entity, list(values.items())).entries
    assert entry.error_code == 0, entry.error_message


def _describe(bootstrap: str, components: list[Any], strict: bool = False) -> Any:
    with WireClient(bootstrap) as w:
        return w.call(DescribeClientQuotasRequest(components=components, strict=strict), 1)


def _described(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert response.error_code == 0, response.error_message
    return {
        tuple(sorted((d.entity_type, d.entity_name) for d in e.entity)): {
            v.key: v.value for v in e.values
        }
        for e in response.entries
    }


def _topic(bootstrap: str) -> str:
    name = f"q-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    ready = Producer({"bootstrap.servers": bootstrap, "client.id": "topic-ready"})
    ready.produce(name, b"ready")
    assert ready.flush(30) == 0  # the leader serves it
    return name


def test_alter_and_describe_answer_kafkas_errors(cluster: Cluster) -> None:
    first, second = _gateways(cluster)
    bad = {
        ("bogus", "x", "producer_byte_rate", 1.0): "Unhandled client quota entity type: bogus",
        ("user", "u1", "foo", 1.0): "Invalid configuration key foo",
        (
            "user",
            "u1",
            "producer_byte_rate",
            -5.0,
        ): "Quota producer_byte_rate must be greater than 0",
        ("client-id", "c1", "consumer_byte_rate", 1.5): (
            "consumer_byte_rate cannot be a fractional value."
        ),
    }
    for (etype, name, key, value), message in bad.items():
        (entry,) = _alter(first, [(etype, name)], [(key, value)]).entries
        assert (entry.error_code, entry.error_message) == (INVALID_REQUEST, message)
    # validate_only: answered as a change would be, nothing stored.
    (entry,) = _alter(first, [("user", "vo")], [("producer_byte_rate", 100.0)], True).entries
    assert entry.error_code == 0
    assert _described(_describe(first, [C(entity_type="user", match_type=0, match="vo")])) == {}
    # Stored through the controller: every gateway describes it.
    _set(
        first, [("user", "u1"), ("client-id", None)], producer_byte_rate=1024, request_percentage=50
    )
    _set(first, [("user", None)], consumer_byte_rate=2048)
    wait_until(
        lambda: (
            _described(_describe(second, [C(entity_type="user", match_type=0, match="u1")]))
            == {
                (("client-id", None), ("user", "u1")): {
                    "producer_byte_rate": 1024.0,
                    "request_percentage": 50.0,
                }
            }
        ),
        "the other gateway describes the quota",
        timeout=10,
    )
    strict_default = _describe(second, [C(entity_type="user", match_type=1, match=None)], True)
    assert _described(strict_default) == {(("user", None),): {"consumer_byte_rate": 2048.0}}
    # A removed key goes; an entity with none left is gone.
    _set(first, [("user", "u1"), ("client-id", None)], producer_byte_rate=None)
    _set(first, [("user", "u1"), ("client-id", None)], request_percentage=None)
    _set(first, [("user", None)], consumer_byte_rate=None)
    assert _described(_describe(first, [C(entity_type="user", match_type=0, match="u1")])) == {}
    unknown = _describe(first, [C(entity_type="group", match_type=0, match="g")])
    assert (unknown.error_code, unknown.entries) == (UNSUPPORTED_VERSION, None)
    malformed = _describe(first, [C(entity_type="user", match_type=0, match=None)])
    assert malformed.error_code == INVALID_REQUEST


def _produce_raw(bootstrap: str, client_id: str, topic: str, size: int) -> tuple[int, float]:
    """(throttle_time_ms, seconds until an ApiVersions sent right after was answered):
    one Produce v9 of ``size`` value bytes with ``client_id`` on a new connection."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        batch = producer_batch([(int(time.time() * 1000), None, b"v" * size)])
        data = ProduceRequest.TopicProduceData
        request = ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=30000,
            topic_data=[
                data(
                    name=topic,
                    partition_data=[data.PartitionProduceData(index=0, records=batch)],
                )
            ],
        )
        s.sendall(encode_request(0, 9, 1, client_id, request))
        response = _receive(s, 0, 9)
        assert response.responses[0].partition_responses[0].error_code == 0
        start = time.monotonic()
        s.sendall(encode_request(3, 9, 2, client_id, MetadataRequest(topics=[])))
        _receive(s, 3, 9)
        return int(response.throttle_time_ms), time.monotonic() - start


def _receive(s: socket.socket, api_key: int, version: int) -> Any:
    head = b""
    while len(head) < 4:
        head += s.recv(4 - len(head))
    (size,) = struct.unpack(">i", head)
    frame = b""
    while len(frame) < size:
        frame += s.recv(size - len(frame))
    _, offset = parse_response_header(frame, response_header_version(api_key, version))
    return decode_response(api_key, version, memoryview(frame)[offset:])


def test_precedence_muting_and_metrics(cluster: Cluster) -> None:
    first, second = _gateways(cluster)
    topic = _topic(first)
    tag = uuid.uuid4().hex[:6]
    # 5000 bytes (and a little batch overhead) over the 2 s a rate counts at least:
    # 2500 B/s against 1000 B/s is a throttle of (2500 - 1000) / 1000 * 2 s.
    _set(first, [("client-id", None)], producer_byte_rate=1000)
    throttle, muted = _produce_raw(first, f"p1-{tag}", topic, 5000)
    assert 3000 <= throttle <= 3300
    # KIP-219: the connection is not read from until the throttle has passed (which
    # began when it was computed, a moment before the client had the response).
    assert muted >= throttle / 1000 - 0.5
    # The same quota holds on the other gateway (its own measurement).
    assert _produce_raw(second, f"p1-{tag}", topic, 5000)[0] > 0
    # users/<user> beats clients/<default> (a plaintext client is User:ANONYMOUS).
    _set(first, [("user", "ANONYMOUS")], producer_byte_rate=1e9)
    assert _produce_raw(first, f"p2-{tag}", topic, 5000)[0] == 0
    # users/<user>/clients/<client-id> beats users/<user>.
    _set(first, [("user", "ANONYMOUS"), ("client-id", f"p3-{tag}")], producer_byte_rate=2000)
    assert _produce_raw(first, f"p3-{tag}", topic, 5000)[0] > 0
    assert _produce_raw(first, f"p4-{tag}", topic, 5000)[0] == 0
    # Per-entity metrics on the gateway that throttled, labelled as Kafka tags them.
    port = cluster.service("gateway-0").ports["metrics"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples = {
        (s.name, s.labels["quota_type"], s.labels["user"], s.labels["client_id"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("odradek_gateway_client_quota_")
    }
    name = "odradek_gateway_client_quota_throttle_time_ms_total"
    assert samples[(name, "Produce", "", f"p1-{tag}")] >= 3000
    assert samples[(name, "Produce", "ANONYMOUS", f"p3-{tag}")] > 0
    assert samples[("odradek_gateway_client_quota_bound", "Produce", "", f"p1-{tag}")] == 1000
    _set(first, [("client-id", None)], producer_byte_rate=None)
    _set(first, [("user", "ANONYMOUS")], producer_byte_rate=None)
    _set(first, [("user", "ANONYMOUS"), ("client-id", f"p3-{tag}")], producer_byte_rate=None)


def test_request_percentage_throttles_any_api(cluster: Cluster) -> None:
    first, _ = _gateways(cluster)
    client = f"busy-{uuid.uuid4().hex[:6]}"
    _set(first, [("client-id", client)], request_percentage=0.01)
    host, port = first.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=30) as s:
            throttles = []
            for i in range(200):
                s.sendall(encode_request(3, 9, i, client, MetadataRequest(topics=None)))
                throttles.append(int(_receive(s, 3, 9).throttle_time_ms))
                if throttles[-1]:
                    break
        # Capped at one quota window (ClientRequestQuotaManager).
        assert 0 < throttles[-1] <= 1000
    finally:
        _set(first, [("client-id", client)], request_percentage=None)


def _create_topics(bootstrap: str, client_id: str, version: int, name: str, partitions: int) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )
    with socket.create_connection((host, int(port)), timeout=30) as s:
        request = CreateTopicsRequest(topics=[topic], timeout_ms=30000, validate_only=False)
        s.sendall(encode_request(19, version, 1, client_id, request))
        return _receive(s, 19, version)


def test_controller_mutation_rate(cluster: Cluster) -> None:
    """KIP-599: partitions created per second, a token bucket of 11 s' worth."""
    first, _ = _gateways(cluster)
    client = f"mutator-{uuid.uuid4().hex[:6]}"
    _set(first, [("client-id", client)], controller_mutation_rate=0.5)  # 5.5 in the bucket
    tag = uuid.uuid4().hex[:6]
    try:
        for name in ("a", "b"):  # 5.5 - 3 - 3: the second may still take the bucket below 0
            (created,) = _create_topics(first, client, 7, f"m{name}-{tag}", 3).topics
            assert created.error_code == 0, created.error_message
        refused = _create_topics(first, client, 7, f"mc-{tag}", 3)
        assert (refused.topics[0].error_code, refused.topics[0].error_message) == (
            THROTTLING_QUOTA_EXCEEDED,
            "The throttling quota has been exceeded.",
        )
        # The bucket is at -0.5 (less what refilled since): up to 0.5 / 0.5 per s.
        assert 0 < refused.throttle_time_ms <= 1000
        # v5 cannot say THROTTLING_QUOTA_EXCEEDED: created, and throttled after.
        time.sleep(refused.throttle_time_ms / 1000)
        permissive = _create_topics(first, client, 5, f"md-{tag}", 3)
        assert permissive.topics[0].error_code == 0
        assert permissive.throttle_time_ms > 0
    finally:
        _set(first, [("client-id", client)], controller_mutation_rate=None)


def _stats_throttle(stats: list[dict[str, Any]]) -> int:
    return max(
        (b.get("throttle", {}).get("max", 0) for s in stats for b in s.get("brokers", {}).values()),
        default=0,
    )


def test_producer_byte_rate_holds_a_confluent_producer(cluster: Cluster) -> None:

    first, _ = _gateways(cluster)
    topic = _topic(first)
    client = f"slow-producer-{uuid.uuid4().hex[:6]}"
    _set(first, [("client-id", client)], producer_byte_rate=RATE)
    throttled: list[float] = []
    stats: list[dict[str, Any]] = []
    producer = Producer(
        {
            "bootstrap.servers": first,
            "client.id": client,
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 256,
            "statistics.interval.ms": 1000,
            "throttle_cb": lambda event: throttled.append(event.throttle_time),
            "stats_cb": lambda text: stats.append(json.loads(text)),
        }
    )
    delivered = [0]

    def done(err: Any, msg: Any) -> None:
        if err is None:
            delivered[0] += len(msg.value())

    payload = b"x" * 1000
    start = time.monotonic()
    seconds = 14.0
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, payload, on_delivery=done)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    rate = delivered[0] / (time.monotonic() - start)
    producer.flush(120)
    # Kafka's rate counts at least WINDOWS - 1 windows, so the first 2 s may go in a
    # burst, and samples expire whole; over 14 s the average is the quota, give or take
    # that burst (unthrottled, this producer delivers several MB/s).
    print(f"producer_byte_rate {RATE} B/s: delivered {rate:.0f} B/s")
    assert 0.6 * RATE <= rate <= 1.6 * RATE, rate
    assert throttled and max(throttled) > 0
    assert _stats_throttle(stats) > 0  # librdkafka's per-broker throttle statistics
    _set(first, [("client-id", client)], producer_byte_rate=None)


def test_consumer_byte_rate_holds_a_confluent_consumer(cluster: Cluster) -> None:
    first, _ = _gateways(cluster)
    topic = _topic(first)
    # Batches well under what one quota window allows (a larger first batch could
    # never be fetched within the quota, on Kafka as here).
    filler = Producer({"bootstrap.servers": first, "linger.ms": 20, "batch.size": 16384})
    for _ in range(4000):
        filler.produce(topic, b"y" * 1000)
        filler.poll(0)
    assert filler.flush(60) == 0
    client = f"slow-consumer-{uuid.uuid4().hex[:6]}"
    _set(first, [("client-id", client)], consumer_byte_rate=RATE)
    throttled: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": first,
            "client.id": client,
            "group.id": client,
            "enable.auto.commit": False,
            "throttle_cb": lambda event: throttled.append(event.throttle_time),
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.monotonic()
    seconds = 12.0
    try:
        while time.monotonic() - start < seconds:
            for m in consumer.consume(500, timeout=0.2):
                if m.error() is None:
                    got += len(m.value())
        rate = got / (time.monotonic() - start)
    finally:
        consumer.close()
    # The first Fetch may take a whole window's worth (2 s of quota); after that the
    # throttled (empty) fetches hold the average at the quota.
    # A fetch as large as a whole window allows is throttled (and answered empty) until
    # the sample of the one before expires, so consumers get somewhat less than the quota
    # (as from Kafka with the same settings; measured ~0.64 of it).
    print(f"consumer_byte_rate {RATE} B/s: consumed {rate:.0f} B/s")
    assert 0.4 * RATE <= rate <= 1.4 * RATE, rate
    assert got < 4_000_000  # not everything: the quota, not the data, was the limit
    assert throttled and max(throttled) > 0
    _set(first, [("client-id", client)], consumer_byte_rate=None)


def _tool(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "quotas", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_odradek_quotas_tool(cluster: Cluster) -> None:
    first, second = _gateways(cluster)
    user = f"tool-{uuid.uuid4().hex[:6]}"
    entity = ["--entity-type", "users", "--entity-name", user, "--entity-type", "clients"]
    done = _tool(
        first,
        "--alter",
        "--add-config",
        "producer_byte_rate=1024,consumer_byte_rate=2048",
        *entity,
        "--entity-default",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"Completed updating config for user-principal '{user}', the default client-id."
    )
    described = _tool(second, "--describe", "--user", user, "--client-defaults")
    assert described.returncode == 0, described.stderr
    assert described.stdout.strip() == (
        f"Quota configs for user-principal '{user}', the default client-id are "
        "consumer_byte_rate=2048.0, producer_byte_rate=1024.0"
    )
    refused = _tool(first, "--alter", "--add-config", "nonsense=1", "--user", user)
    assert refused.returncode == 1
    assert "Invalid configuration key nonsense" in refused.stderr
    deleted = _tool(
        first,
        "--alter",
        "--delete-config",
        "producer_byte_rate,consumer_byte_rate",
        "--user",
        user,
        "--client-defaults",
    )
    assert deleted.returncode == 0, deleted.stderr
    assert _tool(first, "--describe", "--user", user, "--client-defaults").stdout == ""
