"""``odradek console``: run the web console in the foreground against a cluster.

    odradek console [--bootstrap-server HOST:PORT] [--data-dir ./data] [--port 8080]
                    [--host 127.0.0.1] [--set name=value ...]

Without ``--bootstrap-server`` it reads ``<data-dir>/cluster.json`` (written by
``odradek up``) for the gateways and controllers, so the Overview shows service
health too; with it, any Kafka-compatible cluster works (Kafka data only). A cluster
started with ``--security sasl_ssl`` is reached over SASL_SSL (users log in) and the
UI is served over HTTPS with ``DATA/certs/console.pem``, as ``odradek up`` does. The
console runs as ``python -m odradek.console``, the same process ``odradek up`` starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from odradek.tools.common import add_settings_argument


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "console",
        help="serve the web console (topics, messages, consumer groups, cluster health)",
        description="Serve the web console in the foreground.",
    )
    p.add_argument("--bootstrap-server", default=None, help="HOST:PORT of the gateway(s)")
    p.add_argument("--data-dir", default=Path("./data"), type=Path, help="an `odradek up` data dir")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to serve on (default 8080)")
    add_settings_argument(
        p, "a console setting, e.g. security.protocol or request.timeout.ms (repeatable)"
    )
    p.set_defaults(func=run)


def command(args: argparse.Namespace) -> list[str]:
    settings = [f"console.listener={args.host}:{args.port}"]
    if args.bootstrap_server:
        settings.append(f"bootstrap.servers={args.bootstrap_server}")
    else:
        try:
            doc = json.loads((Path(args.data_dir) / "cluster.json").read_text())
        except (OSError, ValueError):
            doc = {}
        if doc.get("controller_address"):
            settings.append(f"controller.address={doc['controller_address']}")
        if doc.get("bootstrap_servers"):
            settings.append(f"bootstrap.servers={doc['bootstrap_servers']}")
        if not doc:
            settings.append("bootstrap.servers=127.0.0.1:9092")
        security = doc.get("security") or {}
        if str(security.get("security_protocol", "")).startswith("SASL"):
            settings.append(f"security.protocol={security['security_protocol']}")
            settings.append(f"ssl.truststore.location={security.get('ca_file', '')}")
            pem = Path(args.data_dir).resolve() / "certs" / "console.pem"
            if pem.exists():
                settings.append(f"console.ssl.keystore.location={pem}")
    settings += list(args.settings)
    cmd = [sys.executable, "-m", "odradek.console"]
    for item in settings:
        cmd += ["--set", item]
    return cmd


def run(args: argparse.Namespace) -> int:
    cmd = command(args)
    print(
        f"odradek console: serving on http://{args.host}:{args.port}/", file=sys.stderr, flush=True
    )
    os.execv(cmd[0], cmd)
    return 0  # pragma: no cover - execv does not return
