"""The process shell every service shares: arguments, uvloop, signals, ready file.

``python -m odradek.<name> [--config FILE] [--set name=value ...] [--ready-file F]``
builds the service, starts it, writes a JSON line describing its ports to the ready
file (``odradek up`` waits for it), and on SIGTERM/SIGINT drains: the service's
``stop()`` stops accepting, finishes in-flight work and leaves the cluster cleanly.
A service started by a launcher also drains when the launcher dies
(:mod:`odradek.parent_watch`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from odradek import internal_tls
from odradek.config import Config, ConfigError, parse_overrides
from odradek.gc_tuning import tune_after_start
from odradek.log.errors import LogDirLockedError
from odradek.malloc_tuning import tune_malloc
from odradek.parent_watch import watch_parent

log = logging.getLogger(__name__)


class Service(Protocol):
    name: str

    async def start(self) -> dict[str, int]:
        """Start serving; return the bound ports by role (``kafka``, ``grpc``, ``metrics``)."""
        ...

    async def stop(self) -> None:
        """Drain and stop; must be safe to call once after ``start``."""
        ...


@runtime_checkable
class ReportsPorts(Protocol):
    """A service whose ports grow after start (a gateway's broker port for a storage node
    that joins later): the shell sets ``report_ports`` to rewrite the ready file, which
    ``odradek up`` reads again for cluster.json."""

    report_ports: Callable[[dict[str, int]], None] | None


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s [%(name)s] %(message)s",
        stream=sys.stderr,
    )


def parse_args(prog: str, argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--config", help="properties or YAML file with Kafka-named settings")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one setting (repeatable)",
    )
    parser.add_argument(
        "--ready-file", help="write a JSON line with pid and ports here once serving"
    )
    parser.add_argument("--log-level", default=os.environ.get("ODRADEK_LOG_LEVEL", "INFO"))
    return parser.parse_args(argv)


def run(
    prog: str,
    build: Callable[[Config], Service],
    defaults: Mapping[str, str],
    argv: Sequence[str] | None = None,
) -> None:
    """Entry point body for ``python -m odradek.<service>``."""
    args = parse_args(prog, argv)
    setup_logging(args.log_level)
    tune_malloc()  # large buffers reuse heap pages (odradek.malloc_tuning)
    watch_parent()  # stop when the launcher dies, however it dies
    try:
        config = Config(defaults, file=args.config, overrides=parse_overrides(args.overrides))
        # One identity per process: every gRPC server and channel built from here on.
        internal_tls.configure_from(config.get)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a hard dependency, but keep going
        pass
    try:
        # Built inside the running loop: grpc.aio servers and channels bind to it.
        asyncio.run(_serve(lambda: build(config), args.ready_file))
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except LogDirLockedError as exc:  # another process owns a log directory (Kafka's .lock)
        print(f"{prog}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


async def _serve(build: Callable[[], Service], ready_file: str | None) -> None:
    service = build()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ports = await service.start()
    tune_after_start()  # start-up state is never walked by the cyclic collector again
    log.info("%s serving: %s", service.name, json.dumps(ports))
    if ready_file:
        path = ready_file

        def report(ports: dict[str, int]) -> None:
            tmp = Path(path + ".tmp")
            info = {"name": service.name, "pid": os.getpid(), "ports": ports}
            tmp.write_text(json.dumps(info) + "\n")
            os.replace(tmp, path)

        report(ports)
        if isinstance(service, ReportsPorts):
            # No await since start() returned: nothing it reports is lost in between.
            service.report_ports = report
    await stop.wait()
    log.info("%s draining", service.name)
    with contextlib.suppress(asyncio.CancelledError):
        await service.stop()
    log.info("%s stopped", service.name)
