"""``odradek up``: start a local cluster in the foreground; Ctrl-C stops it."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from odradek.tools.common import add_settings_argument
from odradek.tools.launcher import Cluster, ClusterError, ClusterOptions


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "up",
        help="start a local cluster (controller, storage nodes, group and transaction "
        "services, gateway)",
        description="Start every Odradek service on 127.0.0.1 as separate processes. "
        "Kafka clients connect to the gateway (default 127.0.0.1:9092).",
    )
    p.add_argument(
        "--data-dir", default="./data", type=Path, help="where every service keeps its data"
    )
    p.add_argument("--storage-nodes", type=int, default=1, metavar="N")
    p.add_argument(
        "--log-dirs",
        type=int,
        default=1,
        metavar="N",
        help="log directories per storage node (log.dirs), default 1",
    )
    p.add_argument("--gateways", type=int, default=1, metavar="N")
    p.add_argument("--coordinators", type=int, default=1, metavar="N")
    p.add_argument(
        "--transaction-coordinators",
        type=int,
        default=1,
        metavar="N",
        help="transaction coordinator processes (shards of __transaction_state spread over them)",
    )
    p.add_argument("--port", type=int, default=9092, help="Kafka port of the first gateway")
    p.add_argument("--replication-factor", type=int, default=1, help="default.replication.factor")
    p.add_argument(
        "--metadata", default="", help="metadata store: etcd://HOST:PORT (default: embedded)"
    )
    p.add_argument(
        "--etcd",
        action="store_true",
        help="also start a local etcd (data under --data-dir/etcd) and keep metadata in it",
    )
    p.add_argument(
        "--controllers",
        type=int,
        default=1,
        metavar="N",
        help="controller processes: one active, the rest standbys (N > 1 needs etcd)",
    )
    add_settings_argument(p, "a Kafka-named setting passed to every service (repeatable)")
    p.add_argument(
        "--no-groups",
        action="store_true",
        help="skip the group and transaction coordinators and the offset store",
    )
    p.add_argument(
        "--console-port",
        type=int,
        default=None,
        metavar="PORT",
        help="port of the web console (default 8080 with the default --port 9092, else a free "
        "port; 0: a free port)",
    )
    p.add_argument("--no-console", action="store_true", help="do not start the web console")
    p.add_argument(
        "--listeners",
        default="",
        metavar="NAME://HOST:PORT,...",
        help="the gateways' listeners, several at once (Kafka's listeners syntax, e.g. "
        "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093; port 0: ephemeral; gateway i "
        "adds i * the number of listeners to each port); replaces --port. Custom names need "
        "--set listener.security.protocol.map=... (docs/security.md)",
    )
    p.add_argument(
        "--security",
        choices=("plaintext", "ssl", "sasl_ssl"),
        default="plaintext",
        help="the Kafka listener: plaintext (default, local development), ssl (TLS with "
        "client certificates) or sasl_ssl (TLS + SCRAM/PLAIN, super user admin); ssl and "
        "sasl_ssl also enable the ACL authorizer and write DATA/client.properties and "
        "DATA/librdkafka.conf",
    )
    p.add_argument(
        "--internal-tls",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="mutual TLS between services: a CA and a certificate per service under "
        "DATA/certs (default: on with --security ssl and sasl_ssl, else off; "
        "--no-internal-tls keeps the services' links plaintext under --security)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = {}
    for item in args.settings:
        if "=" not in item:
            print(f"odradek up: --set expects NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        k, v = item.split("=", 1)
        settings[k.strip()] = v.strip()
    if args.storage_nodes < 1 or args.gateways < 1:
        print("odradek up: need at least one storage node and one gateway", file=sys.stderr)
        return 2
    if args.replication_factor > args.storage_nodes:
        print(
            f"odradek up: --replication-factor {args.replication_factor} is larger than "
            f"--storage-nodes {args.storage_nodes}",
            file=sys.stderr,
        )
        return 2
    opts = ClusterOptions(
        data_dir=args.data_dir,
        storage_nodes=args.storage_nodes,
        log_dirs=max(1, args.log_dirs),
        gateways=args.gateways,
        coordinators=args.coordinators,
        transaction_coordinators=args.transaction_coordinators,
        port=args.port,
        replication_factor=args.replication_factor,
        metadata=args.metadata,
        controllers=args.controllers,
        etcd=args.etcd,
        settings=settings,
        with_groups=not args.no_groups,
        console=not args.no_console,
        console_port=args.console_port,
        security=args.security,
        listeners=args.listeners,
        internal_tls=args.internal_tls,
    )
    cluster = Cluster(opts)
    stopping = False

    def _stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    print(f"starting Odradek in {cluster.data_dir} ...", flush=True)
    try:
        cluster.start()
    except ClusterError as exc:
        print(f"odradek up: {exc}", file=sys.stderr)
        return 1
    for svc in cluster.services:
        ports = " ".join(f"{k}={v}" for k, v in sorted(svc.ports.items()))
        print(f"  {svc.spec.name:<18} pid {svc.process.pid:<8} {ports}", flush=True)
    if cluster.etcd is not None:
        print(f"  {'etcd':<18} pid {cluster.etcd.pid:<8} client={cluster.etcd.endpoint}")
    print(f"cluster file: {cluster.cluster_file}")
    print(f"Kafka bootstrap servers: {cluster.bootstrap_servers}")
    for name, servers in cluster.listener_bootstrap_servers().items():
        print(f"  listener {name}: {servers}")
    if cluster.security is not None:
        print(f"security: {cluster.security.protocol}, CA {cluster.security.ca_file}")
        print(f"super user client settings: {cluster.data_dir / 'client.properties'} (Java), ")
        print(f"  {cluster.data_dir / 'librdkafka.conf'} (librdkafka, kcat -F)")
    if cluster.admin_tls is not None:
        print(f"internal mutual TLS: certificates under {cluster.data_dir / 'certs'}")
    if cluster.console_url:
        print(f"web console: {cluster.console_url}")
    print("press Ctrl-C to stop", flush=True)
    reported: set[int] = set()
    while not stopping:
        time.sleep(0.2)
        for svc in cluster.dead():
            if svc.process.pid not in reported:
                reported.add(svc.process.pid)
                print(
                    f"  {svc.spec.name} (pid {svc.process.pid}) exited with code "
                    f"{svc.process.returncode}; see {svc.log_file}",
                    flush=True,
                )
    print("stopping ...", flush=True)
    cluster.stop()
    print("stopped", flush=True)
    return 0
