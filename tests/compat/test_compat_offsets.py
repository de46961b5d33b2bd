"""ListOffsets (by time, earliest, latest, max timestamp) and DeleteRecords through
each client's own API (docs/compatibility.md C14), and what consumers see afterwards.

The timestamps are chosen so every answer is distinguishable: the record with the
largest timestamp sits in the middle of the log (so -3 is not "latest - 1"), and the
first records are single-record batches while the rest share one batch (lookups by
time must look inside a batch, not only at batch boundaries).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable

import confluent_kafka
import kafka
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTP
from compat_clients import (
    Client,
    ClientError,
    ConfluentClient,
    JavaClient,
    KafkajsClient,
    KcatClient,
    create_topic,
)
from compat_model import Rec
from confluent_kafka.admin import AdminClient, OffsetSpec

BASE = int(time.time() * 1000) - 3_600_000  # an hour ago: CreateTime, not "now"
TIMESTAMPS = [BASE + 1000 * i for i in range(10)]
TIMESTAMPS[6] = BASE + 90_000  # the max timestamp, mid-log
MAX_OFFSET = 6
# target timestamp -> the first offset whose timestamp is >= it (-1: none)
LOOKUPS = {
    BASE - 5000: 0,
    BASE: 0,
    BASE + 2500: 3,
    BASE + 3000: 3,
    BASE + 6500: 6,
    BASE + 7000: 6,  # offset 7 has exactly this, but offset 6 (90s) comes first
    BASE + 50_000: 6,
    BASE + 90_001: -1,
}


@pytest.fixture(scope="module")
def timed_topic(bootstrap: str) -> str:
    topic = f"timed-{int(time.time() * 1000) % 10**8}"
    create_topic(bootstrap, topic)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}
    )
    for i, ts in enumerate(TIMESTAMPS):
        producer.produce(topic, value=b"%d" % i, partition=0, timestamp=ts)
        if i < 5:
            producer.flush(10)  # one batch each
    assert producer.flush(10) == 0
    return topic


def test_confluent_offsets_for_times_and_list_offsets(timed_topic: str, bootstrap: str) -> None:
    consumer = ConfluentClient(bootstrap).consumer()
    try:
        for target, want in LOOKUPS.items():
            (tp,) = consumer.offsets_for_times(
                [confluent_kafka.TopicPartition(timed_topic, 0, target)], timeout=10
            )
            assert tp.error is None
            assert tp.offset == want, f"offsets_for_times({target - BASE:+}) = {tp.offset}"
        assert consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(timed_topic, 0), timeout=10
        ) == (0, 10)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = confluent_kafka.TopicPartition(timed_topic, 0)
    specs = {
        "earliest": (OffsetSpec.earliest(), 0),
        "latest": (OffsetSpec.latest(), 10),
        "max": (OffsetSpec.max_timestamp(), MAX_OFFSET),
        "by time": (OffsetSpec.for_timestamp(BASE + 2500), 3),
    }
    for what, (spec, want) in specs.items():
        info = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=20)
        assert info.offset == want, f"list_offsets {what}: {info.offset}"
        if what == "max":
            assert info.timestamp == TIMESTAMPS[MAX_OFFSET]
        if what == "by time":
            assert info.timestamp == TIMESTAMPS[3], "v1+ answers the found record's timestamp"


def test_java_offsets_for_times_and_admin_list_offsets(timed_topic: str, java: JavaClient) -> None:
    for target in (BASE + 2500, BASE + 50_000, BASE + 90_001):
        rows = java.run("offsets-for-times", {"topic": timed_topic, "timestamp": target})
        answer = {r[0]: r[1:] for r in rows}
        want = LOOKUPS[target]
        if want < 0:
            assert "NONE" in answer, rows
        else:
            assert int(answer["OFFSET"][0]) == want
            assert int(answer["OFFSET"][1]) == TIMESTAMPS[want]
        assert answer["RANGE"] == ["0", "10"]
    for spec, want_offset, want_ts in (
        ("earliest", 0, -1),
        ("latest", 10, -1),
        ("max-timestamp", MAX_OFFSET, TIMESTAMPS[MAX_OFFSET]),
        (str(BASE + 6500), 6, TIMESTAMPS[6]),
    ):
        (row,) = java.run("list-offsets", {"topic": timed_topic, "spec": spec})
        assert row[0] == "OFFSET"
        assert (int(row[1]), int(row[2])) == (want_offset, want_ts), f"{spec}: {row}"
        assert int(row[3]) >= 0, (
            f"{spec}: leader epoch {row[3]} (docs/compatibility.md C13: 0, not none)"
        )


def test_kafka_python_offsets_for_times(timed_topic: str, bootstrap: str) -> None:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tp = kafka.TopicPartition(timed_topic, 0)
        for target, want in LOOKUPS.items():
            found = consumer.offsets_for_times({tp: target})[tp]
            if want < 0:
                assert found is None
            else:
                assert found is not None and (found.offset, found.timestamp) == (
                    want,
                    TIMESTAMPS[want],
                ), f"{target - BASE:+}: {found}"
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == 10
    finally:
        consumer.close()


def test_aiokafka_offsets_for_times(timed_topic: str, bootstrap: str) -> None:
    async def lookups() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await consumer.start()
        try:
            tp = AioTP(timed_topic, 0)
            out = {}
            for target in LOOKUPS:
                found = (await consumer.offsets_for_times({tp: target}))[tp]
                out[target] = -1 if found is None else found.offset
            out[-2] = (await consumer.beginning_offsets([tp]))[tp]
            out[-1] = (await consumer.end_offsets([tp]))[tp]
            return out
        finally:
            await consumer.stop()

    got = asyncio.run(lookups())
    assert {t: got[t] for t in LOOKUPS} == LOOKUPS
    assert (got[-2], got[-1]) == (0, 10)


def test_kafkajs_offsets_by_timestamp(timed_topic: str, kafkajs: KafkajsClient) -> None:
    for target in (BASE + 2500, BASE + 7000):
        answer = kafkajs.run("offsets-by-timestamp", {"topic": timed_topic, "timestamp": target})
        assert answer["offsets"] == [{"partition": 0, "offset": str(LOOKUPS[target])}]
    answer = kafkajs.run("topic-offsets", {"topic": timed_topic})
    (p,) = answer["offsets"]
    assert (p["low"], p["high"], p["offset"]) == ("0", "10", "10")


def test_kcat_query_mode(timed_topic: str, clients: Callable[[str], Client]) -> None:
    kcat = clients("kcat")
    assert isinstance(kcat, KcatClient)
    out = kcat.run(["-Q", "-t", f"{timed_topic}:0:{BASE + 2500}"])
    assert f"{timed_topic} [0] offset 3" in out, out


# -- DeleteRecords ---------------------------------------------------------------------
def _log_start(bootstrap: str, topic: str) -> int:
    consumer = ConfluentClient(bootstrap).consumer()
    try:
        low, _ = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=10
        )
        return int(low)
    finally:
        consumer.close()


def test_delete_records_through_every_admin_api(
    bootstrap: str,
    unique_topic: str,
    java: JavaClient,
    kafkajs: KafkajsClient,
    confluent: ConfluentClient,
    clients: Callable[[str], Client],
) -> None:
    """Each admin API moves the log start further; every consumer then starts there."""
    create_topic(bootstrap, unique_topic)
    confluent.produce(unique_topic, _recs(20), partition=0)

    (row,) = java.run("delete-records", {"topic": unique_topic, "before": 3})
    assert row == ["LOW", "3"]
    assert _log_start(bootstrap, unique_topic) == 3

    kp_admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp = kafka.TopicPartition(unique_topic, 0)
        result = kp_admin.delete_records({tp: 6})
        assert result[tp]["low_watermark"] == 6, result
    finally:
        kp_admin.close()
    assert _log_start(bootstrap, unique_topic) == 6

    admin = AdminClient({"bootstrap.servers": bootstrap})
    ctp = confluent_kafka.TopicPartition(unique_topic, 0, 9)
    deleted = admin.delete_records([ctp], request_timeout=10)[ctp].result(timeout=20)
    assert deleted.low_watermark == 9

    kafkajs.run("delete-records", {"topic": unique_topic, "partition": 0, "offset": 11})
    assert _log_start(bootstrap, unique_topic) == 11

    (row,) = java.run("list-offsets", {"topic": unique_topic, "spec": "earliest"})
    assert row[1] == "11"
    for name in ("confluent", "kafka-python", "aiokafka", "java", "kcat"):
        got = clients(name).consume(unique_topic, [0], 9)
        assert [r.offset for r in got] == list(range(11, 20)), f"{name} after DeleteRecords"
        assert [r.value for r in got] == [b"v%d" % i for i in range(11, 20)], name


def _recs(n: int) -> list[Rec]:
    return [Rec(b"k%d" % i, b"v%d" % i) for i in range(n)]


# -- out of range with auto.offset.reset=none --------------------------------------------
RESET_NONE = {
    "confluent": ({"auto.offset.reset": "error"}, {"_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"}),
    "kafka-python": ({"auto_offset_reset": "none"}, {"OffsetOutOfRangeError"}),
    "aiokafka": ({"auto_offset_reset": "none"}, {"OffsetOutOfRangeError"}),
    "java": ({"auto.offset.reset": "none"}, {"OffsetOutOfRangeException"}),
}


@pytest.fixture(scope="module")
def trimmed_topic(bootstrap: str) -> str:
    """Offsets 0-4 deleted, 5-9 present."""
    topic = f"trimmed-{int(time.time() * 1000) % 10**8}"
    create_topic(bootstrap, topic)
    ConfluentClient(bootstrap).produce(topic, _recs(10), partition=0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ctp = confluent_kafka.TopicPartition(topic, 0, 5)
    admin.delete_records([ctp], request_timeout=10)[ctp].result(timeout=20)
    return topic


@pytest.mark.parametrize("name", list(RESET_NONE))
@pytest.mark.parametrize("offset", [2, 50], ids=["below-log-start", "above-high-watermark"])
def test_offset_out_of_range_with_reset_none(
    name: str, offset: int, trimmed_topic: str, clients: Callable[[str], Client]
) -> None:
    config, codes = RESET_NONE[name]
    client = clients(name)
    with pytest.raises(ClientError) as err:
        got = client.consume(trimmed_topic, [0], 1, start=offset, timeout=15, config=config)
        pytest.fail(f"{name} read {got} from offset {offset} instead of failing")
    assert err.value.code in codes, f"{name}: {err.value}"
    # ...and the reset policies do what they say.
    earliest = client.consume(trimmed_topic, [0], 1, start=offset, config=_reset(name, "earliest"))
    if offset < 5:
        assert [r.offset for r in earliest] == [5], f"{name} reset to earliest"


def _reset(name: str, policy: str) -> dict[str, str]:
    key = "auto_offset_reset" if name in ("kafka-python", "aiokafka") else "auto.offset.reset"
    return {key: policy}


def test_kcat_reports_out_of_range(trimmed_topic: str, clients: Callable[[str], Client]) -> None:
    kcat = clients("kcat")
    assert isinstance(kcat, KcatClient)
    args = ["-C", "-t", trimmed_topic, "-p", "0", "-o", "2", "-e", "-X", "auto.offset.reset=error"]
    proc = subprocess.run(
        [kcat.binary, "-b", kcat.bootstrap, *args],
        capture_output=True,
        timeout=30,
        env=kcat.env,
        check=False,
    )
    err = proc.stderr.decode(errors="replace")
    assert "out of range" in err.lower() or "offset_out_of_range" in err.lower(), err
