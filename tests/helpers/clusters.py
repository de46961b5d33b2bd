"""Real clusters for tests, started the way ``odradek up`` starts them.

Every test that needs a running cluster gets it from the launcher's :class:`Cluster`
(controller, storage nodes, offset store, coordinator and gateway as subprocesses on
127.0.0.1, ephemeral ports), through the fixtures in ``tests/conftest.py``:
``cluster`` (one per session), ``cluster_factory`` (per test) and
``module_cluster_factory`` (per module). This module holds what those fixtures share.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from odradek.tools.launcher import Cluster, ClusterOptions

# Fast failure detection and group start-up in tests; production defaults stay Kafka's.
TEST_SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "log.retention.check.interval.ms": "1000",
}


class ClusterPool:
    """Starts clusters under one directory and stops every one of them at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[Cluster] = []

    def start(
        self,
        *,
        settings: Mapping[str, str] | None = None,
        data_dir: Path | None = None,
        **options: object,
    ) -> Cluster:
        """A started cluster: ``options`` are :class:`ClusterOptions` fields (``port``
        defaults to 0, ephemeral; a fixed one survives a gateway restart), ``settings``
        (``--set``) go on top of :data:`TEST_SETTINGS`. Pass the ``data_dir`` of a
        stopped cluster to start it again on its data."""
        opts = ClusterOptions(
            data_dir=data_dir or self.root / f"c{len(self.started)}",
            port=int(options.pop("port", 0)),  # type: ignore[call-overload]
            settings={**TEST_SETTINGS, **(settings or {})},
            **options,  # type: ignore[arg-type]
        )
        cluster = Cluster(opts)
        self.started.append(cluster)
        cluster.start()  # stops what it started when it fails
        return cluster

    def stop_all(self) -> None:
        for cluster in reversed(self.started):
            cluster.stop()
        self.started.clear()
