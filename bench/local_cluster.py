"""A throwaway local cluster for a benchmark run: started as ``odradek up`` starts one,
on ephemeral ports, in a temporary data directory removed afterwards."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from odradek.tools.launcher import Cluster, ClusterOptions


@contextmanager
def temporary_cluster(prefix: str, **options: Any) -> Iterator[Cluster]:
    """A started cluster (``options`` are :class:`ClusterOptions` fields), stopped on exit."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        cluster = Cluster(ClusterOptions(data_dir=Path(tmp), port=0, **options))
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()
