"""Every compression codec, produced by one client and consumed by every other.

Per codec there is one topic with a partition per producing client. Each producer
writes its records (with that codec) to its own partition; then every consumer reads
the whole topic and must get each producer's records back exactly. The stored
batches prove the bytes stayed compressed end to end with the producer's codec, and
snappy shows both framings: the Java client writes xerial-framed streams, librdkafka
raw blocks (docs/compatibility.md C21).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from compat_clients import CLIENT_NAMES, Client, ClientError, create_topic
from compat_model import (
    Features,
    Rec,
    assert_consecutive,
    assert_same_records,
    standard_records,
    stored_batches,
)
from compat_up import UpCluster

CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
RECORDS_PER_PRODUCER = 40


@dataclass
class CodecRun:
    topic: str
    expected: dict[str, list[Rec]] = field(default_factory=dict)  # producer -> records
    failures: dict[str, Exception] = field(default_factory=dict)


def _records(producer: Client, codec: str) -> list[Rec]:
    """Text-safe records (kcat reads them too), compressible, tagged by producer."""
    f = producer.features
    features = Features(
        binary=False,
        per_record_headers=f.per_record_headers,
        null_header_values=False,
        empty_values=f.empty_values,
        headers=f.headers,
    )
    return standard_records(features, RECORDS_PER_PRODUCER, f"{codec}-{producer.name}-")


@pytest.fixture(scope="module")
def codec_runs(clients: Callable[[str], Client], bootstrap: str) -> dict[str, CodecRun]:
    runs: dict[str, CodecRun] = {}
    for codec in CODEC_IDS:
        run = CodecRun(f"codec-{codec}-{uuid.uuid4().hex[:6]}")
        create_topic(bootstrap, run.topic, len(CLIENT_NAMES))
        for partition, name in enumerate(CLIENT_NAMES):
            producer = clients(name)
            records = _records(producer, codec)
            try:
                producer.produce(run.topic, records, partition=partition, compression=codec)
            except (ClientError, OSError) as exc:
                run.failures[name] = exc
                continue
            run.expected[name] = records
        runs[codec] = run
    return runs


@pytest.mark.parametrize("producer", CLIENT_NAMES)
@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_produce_compressed(
    codec: str,
    producer: str,
    codec_runs: dict[str, CodecRun],
    up: UpCluster,
) -> None:
    run = codec_runs[codec]
    assert producer not in run.failures, (
        f"{producer} could not produce {codec}: {run.failures[producer]}"
    )
    batches = stored_batches(up.partition_dir(run.topic, CLIENT_NAMES.index(producer)))
    assert batches, f"nothing stored for {producer}"
    assert {b.magic for b in batches} == {2}
    codecs = {b.codec for b in batches}
    assert codecs == {CODEC_IDS[codec]}, (
        f"{producer} asked for {codec} ({CODEC_IDS[codec]}) but the stored batches use {codecs}"
    )
    if codec == "snappy":
        framing = {b.records.startswith(XERIAL_MAGIC) for b in batches}
        if producer == "java":
            assert framing == {True}, "the Java client writes xerial-framed snappy"
        if producer in ("confluent", "kcat"):
            assert framing == {False}, "librdkafka writes raw snappy blocks"


@pytest.mark.parametrize("consumer", CLIENT_NAMES)
@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_consume_compressed(
    codec: str,
    consumer: str,
    codec_runs: dict[str, CodecRun],
    clients: Callable[[str], Client],
) -> None:
    run = codec_runs[codec]
    reader = clients(consumer)
    total = sum(len(v) for v in run.expected.values())
    got = reader.consume(run.topic, range(len(CLIENT_NAMES)), total, timeout=45)
    for partition, producer in enumerate(CLIENT_NAMES):
        if producer not in run.expected:
            continue  # reported by test_produce_compressed
        mine = [r for r in got if r.partition == partition]
        what = f"{codec} from {producer}, read by {consumer}"
        assert_same_records(mine, run.expected[producer], what)
        assert_consecutive(mine, 0, what)
