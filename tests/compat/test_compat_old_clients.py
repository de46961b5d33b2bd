"""Old clients and old formats.

* kcat as Debian ships it (librdkafka 2.0.2) cannot skip unknown tagged fields in an
  ApiVersions v3 response ("Read underflow", docs/compatibility.md C22): it must get through.
* kafka-python pinned to api_version (0, 10) speaks Produce v2 / Fetch v3 with magic 1
  message sets; (0, 9) and (0, 8, 2) use magic 0. What they produce is stored as v2
  batches (codec kept) and reads back in modern clients (up-conversion: magic 0 has no
  timestamp, so -1); what modern clients produce reads back in them (down-conversion:
  headers dropped, zstd refused with UNSUPPORTED_COMPRESSION_TYPE).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest
from compat_clients import Client, ConfluentClient, JavaClient, KafkaPythonClient, KcatClient
from compat_model import (
    ClientError,
    Features,
    Rec,
    assert_consecutive,
    assert_same_records,
    standard_records,
    stored_batches,
)
from compat_up import UpCluster

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
OLD = [
    ((0, 10), "none"),
    ((0, 10), "gzip"),
    ((0, 10), "snappy"),
    ((0, 10), "lz4"),
    ((0, 9), "none"),
    ((0, 9), "gzip"),
    ((0, 9), "snappy"),
    ((0, 8, 2), "none"),
    ((0, 8, 2), "gzip"),
]


def test_debian_kcat_is_the_old_librdkafka_and_gets_through(
    clients: Callable[[str], Client],
) -> None:
    kcat = clients("kcat")
    assert isinstance(kcat, KcatClient)
    version = subprocess.run(
        [kcat.binary, "-V"], capture_output=True, timeout=10, check=True, env=kcat.env
    ).stdout.decode()
    if "librdkafka 2.0." not in version:
        pytest.skip(f"not Debian's kcat/librdkafka 2.0.x: {version.strip()}")
    proc = subprocess.run(
        [kcat.binary, "-b", kcat.bootstrap, "-L", "-d", "protocol"],
        capture_output=True,
        timeout=30,
        env=kcat.env,
        check=False,
    )
    log = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, log[-2000:]
    assert "underflow" not in log.lower(), "librdkafka 2.0.2 failed to parse a response"
    assert "Received ApiVersionResponse (v3" in log, "expected the flexible ApiVersions v3"
    assert "broker 100 at" in proc.stdout.decode()  # the storage node, at a broker port


def _old_name(api_version: tuple[int, ...]) -> str:
    return ".".join(map(str, api_version))


@pytest.mark.parametrize(("api_version", "codec"), OLD, ids=[f"{_old_name(v)}-{c}" for v, c in OLD])
def test_old_producer_read_by_modern_clients(
    api_version: tuple[int, ...],
    codec: str,
    bootstrap: str,
    unique_topic: str,
    up: UpCluster,
    confluent: ConfluentClient,
    java: JavaClient,
) -> None:
    old = KafkaPythonClient(bootstrap, api_version)
    records = standard_records(old.features, 30)
    acked = old.produce(unique_topic, records, partition=0, compression=codec)
    assert_consecutive(acked, 0, f"{old.name} acks")
    batches = stored_batches(up.partition_dir(unique_topic, 0))
    assert {b.magic for b in batches} == {2}, "old message sets are stored as v2 batches"
    assert {b.codec for b in batches} == {CODEC_IDS[codec]}, "with the producer's codec"
    for reader in (confluent, java, old):
        got = reader.consume(unique_topic, [0], len(records))
        what = f"{old.name} ({codec}) read by {reader.name}"
        assert_same_records(got, records, what)
        assert_consecutive(got, 0, what)
        if api_version < (0, 10) and reader is not old:
            assert {r.timestamp for r in got} == {-1}, f"{what}: magic 0 carries no timestamp"
        if api_version >= (0, 10):
            assert all(r.timestamp and r.timestamp > 0 for r in got), what


MODERN_TO_OLD = [((0, 10), c) for c in ("none", "gzip", "snappy", "lz4")] + [
    ((0, 9), c)
    for c in ("none", "gzip", "snappy")  # magic 0 has no lz4
]


@pytest.mark.parametrize(
    ("api_version", "codec"),
    MODERN_TO_OLD,
    ids=[f"{_old_name(v)}-{c}" for v, c in MODERN_TO_OLD],
)
def test_modern_producer_read_by_old_client(
    api_version: tuple[int, ...],
    codec: str,
    bootstrap: str,
    unique_topic: str,
    java: JavaClient,
) -> None:
    old = KafkaPythonClient(bootstrap, api_version)
    records = standard_records(Features(), 30)  # with headers: down-conversion drops them
    java.produce(unique_topic, records, partition=0, compression=codec)
    got = old.consume(unique_topic, [0], len(records))
    stripped = [Rec(r.key, r.value) for r in records]
    assert_same_records(got, stripped, f"java ({codec}) read by {old.name}")
    assert_consecutive(got, 0, old.name)


def test_zstd_is_refused_to_old_fetchers(
    bootstrap: str, unique_topic: str, confluent: ConfluentClient
) -> None:
    """zstd cannot be down-converted: Fetch below v10 gets UNSUPPORTED_COMPRESSION_TYPE."""
    confluent.produce(unique_topic, [Rec(b"k", b"v" * 100)], partition=0, compression="zstd")
    old = KafkaPythonClient(bootstrap, (0, 10))
    with pytest.raises(ClientError) as err:
        got = old.consume(unique_topic, [0], 1, timeout=10)
        pytest.fail(f"read {got} from a zstd batch through Fetch v3")
    assert err.value.code == "UnsupportedCompressionTypeError", str(err.value)
