"""Shared fixtures: real clusters started the way ``odradek up`` starts them.

``cluster`` is one session-wide cluster (one storage node, offset store, coordinator
and gateway); tests that share it use their own topic and group names
(``unique_topic``). ``cluster_factory`` starts dedicated clusters with other shapes
and stops them at the end of the test; ``module_cluster_factory`` does the same for
a module's tests. All three start the launcher's ``Cluster`` through
``helpers.clusters.ClusterPool``, with the suite's fast failure-detection settings.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.clusters import ClusterPool

from odradek.tools.etcd_server import EtcdServer, etcd_binary
from odradek.tools.launcher import Cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    pool = ClusterPool(tmp_path_factory.mktemp("cluster"))
    yield pool.start()
    pool.stop_all()


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``cluster_factory(**ClusterOptions fields, settings={...})``: a started cluster."""
    pool = ClusterPool(tmp_path)
    yield pool.start
    pool.stop_all()


@pytest.fixture(scope="module")
def module_cluster_factory(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Cluster]]:
    """``cluster_factory`` for module-scoped fixtures: clusters a module's tests share."""
    pool = ClusterPool(tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2]))
    yield pool.start
    pool.stop_all()


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
