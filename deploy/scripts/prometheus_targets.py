#!/usr/bin/env python3
"""Writes a Prometheus config that scrapes every service of an ``odradek up`` cluster.

``odradek up`` binds each service's ``/metrics`` to an ephemeral port and lists the
ports in ``<data-dir>/cluster.json``; this turns that file into static scrape targets,
one job per service kind (``controller``, ``storage``, ``gateway``, ``coordinator``,
``offsets``), each target labelled with its service name and node id::

    python deploy/scripts/prometheus_targets.py --data-dir ./data --out prometheus.yml
    prometheus --config.file=prometheus.yml --web.listen-address=127.0.0.1:9090

Containers and Kubernetes use deploy/prometheus/prometheus.yml and the chart's
ServiceMonitor instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def scrape_config(
    cluster: Mapping[str, Any],
    *,
    host: str = "127.0.0.1",
    scrape_interval: str = "15s",
    scrape_timeout: str | None = None,
) -> dict[str, Any]:
    """The Prometheus config (as a mapping) for a parsed cluster.json."""
    jobs: dict[str, list[dict[str, Any]]] = {}
    for svc in cluster.get("services", []):
        port = int(svc.get("ports", {}).get("metrics", 0))
        if port <= 0:
            continue
        labels = {"service": str(svc["name"]), "node_id": str(svc.get("node_id", -1))}
        jobs.setdefault(str(svc["kind"]), []).append(
            {"targets": [f"{host}:{port}"], "labels": labels}
        )
    global_cfg: dict[str, str] = {
        "scrape_interval": scrape_interval,
        "evaluation_interval": scrape_interval,
    }
    if scrape_timeout:
        global_cfg["scrape_timeout"] = scrape_timeout
    return {
        "global": global_cfg,
        "scrape_configs": [
            {"job_name": kind, "static_configs": targets} for kind, targets in sorted(jobs.items())
        ],
    }


def write_config(
    data_dir: Path,
    out: Path,
    *,
    host: str = "127.0.0.1",
    scrape_interval: str = "15s",
    scrape_timeout: str | None = None,
) -> dict[str, Any]:
    cluster = json.loads((data_dir / "cluster.json").read_text())
    config = scrape_config(
        cluster, host=host, scrape_interval=scrape_interval, scrape_timeout=scrape_timeout
    )
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.replace(out)  # Prometheus may be reading it (SIGHUP reload): never a torn file
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    parser.add_argument("--out", type=Path, default=Path("prometheus.yml"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--scrape-interval", default="15s")
    parser.add_argument("--scrape-timeout")
    args = parser.parse_args(argv)
    try:
        config = write_config(
            args.data_dir,
            args.out,
            host=args.host,
            scrape_interval=args.scrape_interval,
            scrape_timeout=args.scrape_timeout,
        )
    except (OSError, ValueError) as exc:
        print(f"prometheus_targets: {exc}", file=sys.stderr)
        return 1
    count = sum(len(job["static_configs"]) for job in config["scrape_configs"])
    print(f"wrote {args.out}: {count} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
