"""Shared fixtures: real clusters started the way ``odradek up`` starts them.

``cluster`` is one session-wide cluster (one storage node, group services when they
exist); tests that share it use their own topic names (``unique_topic``).
``cluster_factory`` starts dedicated clusters with other shapes and stops them at
the end of the test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.tools.etcd_server import EtcdServer, etcd_binary
from odradek.tools.launcher import Cluster, ClusterOptions

# Fast failure detection in tests; production defaults stay Kafka's.
TEST_SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.check.interval.ms": "1000",
}


def _start(tmp: Path, **kwargs: object) -> Cluster:
    settings = {**TEST_SETTINGS, **dict(kwargs.pop("settings", {}) or {})}  # type: ignore[call-overload]
    opts = ClusterOptions(data_dir=tmp, port=0, settings=settings, **kwargs)  # type: ignore[arg-type]
    cluster = Cluster(opts)
    cluster.start()
    return cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = _start(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    started: list[Cluster] = []

    def make(**kwargs: object) -> Cluster:
        c = _start(tmp_path / f"c{len(started)}", **kwargs)
        started.append(c)
        return c

    yield make
    for c in started:
        c.stop()


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """One real etcd (Debian's etcd-server) on free loopback ports for the whole run;
    tests that share it wipe the keys they use. Skips when etcd is not installed."""
    if etcd_binary() is None:
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    server = EtcdServer(tmp_path_factory.mktemp("etcd"), fast=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def unique_topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def bootstrap(cluster: Cluster) -> str:
    return cluster.bootstrap_servers


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("ODRADEK_LOG_LEVEL", "INFO")
