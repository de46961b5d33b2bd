"""``odradek up``: a whole cluster on this machine as separate processes, no Docker.

Starts the controller first (its address goes to everyone else), then storage
nodes, offset store, coordinators and gateways, each as ``python -m odradek.<svc>``
with its own data directory and log file under ``--data-dir``. Every service reports
its bound ports through a ready file; once all are up, ``<data-dir>/cluster.json``
lists each service's name, pid, ports and command line, so tests and operators can
find (and kill, and restart) any of them. Ctrl-C or SIGTERM stops everything in
reverse dependency order, each with a graceful SIGTERM first.

Node ids: gateways 0.., storage nodes 100.., coordinators 200.., offset stores
300.., controller 3000. Gateways are the brokers Kafka clients see.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GATEWAY_BASE_ID = 0
STORAGE_BASE_ID = 100
COORDINATOR_BASE_ID = 200
OFFSETS_BASE_ID = 300
CONTROLLER_ID = 3000

STOP_ORDER = ("gateway", "coordinator", "offsets", "storage", "controller")


@dataclass
class ServiceSpec:
    name: str
    module: str
    kind: str
    settings: dict[str, str]
    data_dir: Path

    def command(self, ready_file: Path) -> list[str]:
        cmd = [sys.executable, "-m", f"odradek.{self.module}", "--ready-file", str(ready_file)]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd


@dataclass
class RunningService:
    spec: ServiceSpec
    process: subprocess.Popen[bytes]
    ready_file: Path
    log_file: Path
    ports: dict[str, int] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "kind": self.spec.kind,
            "node_id": int(self.spec.settings.get("node.id", "-1")),
            "pid": self.process.pid,
            "ports": self.ports,
            "log": str(self.log_file),
            "command": self.spec.command(self.ready_file),
        }


class ClusterError(RuntimeError):
    pass


def start_process(spec: ServiceSpec, run_dir: Path, log_dir: Path) -> RunningService:
    ready = run_dir / f"{spec.name}.ready"
    ready.unlink(missing_ok=True)
    log_file = log_dir / f"{spec.name}.log"
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(
            spec.command(ready),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the launcher only; it stops children in order
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return RunningService(spec, proc, ready, log_file)


def wait_ready(services: list[RunningService], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(services)
    while waiting:
        for svc in list(waiting):
            if svc.ready_file.exists():
                try:
                    info = json.loads(svc.ready_file.read_text())
                except ValueError:
                    continue
                svc.ports = {k: int(v) for k, v in info.get("ports", {}).items()}
                waiting.remove(svc)
            elif svc.process.poll() is not None:
                tail = _tail(svc.log_file)
                raise ClusterError(
                    f"{svc.spec.name} exited with code {svc.process.returncode} while starting; "
                    f"last lines of {svc.log_file}:\n{tail}"
                )
        if waiting and time.monotonic() > deadline:
            names = ", ".join(s.spec.name for s in waiting)
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {names}")
        if waiting:
            time.sleep(0.05)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_process(svc: RunningService, grace: float) -> None:
    proc = svc.process
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass


@dataclass
class ClusterOptions:
    data_dir: Path
    storage_nodes: int = 1
    gateways: int = 1
    coordinators: int = 1
    offset_stores: int = 1
    port: int = 9092
    host: str = "127.0.0.1"
    replication_factor: int = 1
    metadata: str = ""  # "" = embedded file store; "etcd://host:port" for etcd
    settings: dict[str, str] = field(default_factory=dict)  # --set: passed to every service
    with_groups: bool = True
    start_timeout: float = 60.0


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now (the controller keeps one fixed address across restarts)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def plan(opts: ClusterOptions) -> list[ServiceSpec]:
    """Which processes to start, in start order, with their settings.

    The controller gets a fixed port so a restarted controller is found again at
    the address every other service was given; the rest use ephemeral ports and are
    found through the metadata (and cluster.json).
    """
    data = opts.data_dir.resolve()
    common = dict(opts.settings)
    metadata_store = opts.metadata or f"file://{data / 'controller'}"
    rf_offsets = max(1, min(3, opts.storage_nodes))
    controller = ServiceSpec(
        "controller",
        "controller",
        "controller",
        {
            "node.id": str(CONTROLLER_ID),
            "grpc.listener": f"{opts.host}:{free_port(opts.host)}",
            "metadata.store": metadata_store,
            "default.replication.factor": str(opts.replication_factor),
            "offsets.topic.replication.factor": str(rf_offsets),
            "min.insync.replicas": common.get("min.insync.replicas", "1"),
            **common,
        },
        data / "controller",
    )
    specs = [controller]
    for i in range(opts.storage_nodes):
        node_id = STORAGE_BASE_ID + i
        specs.append(
            ServiceSpec(
                f"storage-{node_id}",
                "storage",
                "storage",
                {
                    "node.id": str(node_id),
                    "grpc.listener": f"{opts.host}:0",
                    "log.dirs": str(data / f"storage-{node_id}"),
                    **common,
                },
                data / f"storage-{node_id}",
            )
        )
    if opts.with_groups:
        for i in range(opts.offset_stores):
            node_id = OFFSETS_BASE_ID + i
            specs.append(
                ServiceSpec(
                    f"offsets-{node_id}",
                    "offsets",
                    "offsets",
                    {"node.id": str(node_id), "grpc.listener": f"{opts.host}:0", **common},
                    data / f"offsets-{node_id}",
                )
            )
        for i in range(opts.coordinators):
            node_id = COORDINATOR_BASE_ID + i
            specs.append(
                ServiceSpec(
                    f"coordinator-{node_id}",
                    "coordinator",
                    "coordinator",
                    {"node.id": str(node_id), "grpc.listener": f"{opts.host}:0", **common},
                    data / f"coordinator-{node_id}",
                )
            )
    for i in range(opts.gateways):
        node_id = GATEWAY_BASE_ID + i
        port = opts.port + i if opts.port else 0
        specs.append(
            ServiceSpec(
                f"gateway-{node_id}",
                "gateway",
                "gateway",
                {
                    "node.id": str(node_id),
                    "listeners": f"PLAINTEXT://{opts.host}:{port}",
                    "grpc.listener": f"{opts.host}:0",
                    **common,
                },
                data / f"gateway-{node_id}",
            )
        )
    return specs


def available_modules() -> set[str]:
    import importlib.util

    return {
        name
        for name in ("controller", "storage", "gateway", "coordinator", "offsets")
        if importlib.util.find_spec(f"odradek.{name}.__main__") is not None
    }


class Cluster:
    """A running local cluster; ``start()`` blocks until every service is serving."""

    def __init__(self, opts: ClusterOptions) -> None:
        self.opts = opts
        self.data_dir = opts.data_dir.resolve()
        self.run_dir = self.data_dir / "run"
        self.log_dir = self.data_dir / "logs"
        self.services: list[RunningService] = []

    @property
    def cluster_file(self) -> Path:
        return self.data_dir / "cluster.json"

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        modules = available_modules()
        specs = [s for s in plan(self.opts) if s.module in modules]
        controller = specs[0]
        try:
            svc = start_process(controller, self.run_dir, self.log_dir)
            self.services.append(svc)
            wait_ready([svc], self.opts.start_timeout)
            address = f"{self.opts.host}:{svc.ports['grpc']}"
            rest = []
            for spec in specs[1:]:
                spec.settings["controller.address"] = address
                rest.append(start_process(spec, self.run_dir, self.log_dir))
            self.services.extend(rest)
            wait_ready(rest, self.opts.start_timeout)
        except BaseException:
            self.stop()
            raise
        self.write_cluster_file()

    def write_cluster_file(self) -> None:
        gateways = [s for s in self.services if s.spec.kind == "gateway"]
        doc = {
            "bootstrap_servers": ",".join(
                f"{self.opts.host}:{s.ports.get('kafka', 0)}" for s in gateways
            ),
            "data_dir": str(self.data_dir),
            "launcher_pid": os.getpid(),
            "services": [s.describe() for s in self.services],
        }
        tmp = self.cluster_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, self.cluster_file)

    @property
    def bootstrap_servers(self) -> str:
        gateways = [s for s in self.services if s.spec.kind == "gateway"]
        return ",".join(f"{self.opts.host}:{s.ports.get('kafka', 0)}" for s in gateways)

    def stop(self, grace: float = 10.0) -> None:
        for kind in STOP_ORDER:
            group = [s for s in self.services if s.spec.kind == kind]
            for svc in group:
                if svc.process.poll() is None:
                    try:
                        svc.process.send_signal(signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            for svc in group:
                stop_process(svc, grace)

    def dead(self) -> list[RunningService]:
        return [s for s in self.services if s.process.poll() is not None]

    def restart(self, name: str) -> RunningService:
        """Start a stopped (or killed) service again with its original command."""
        for i, svc in enumerate(self.services):
            if svc.spec.name == name:
                if svc.process.poll() is None:
                    raise ClusterError(f"{name} is still running (pid {svc.process.pid})")
                new = start_process(svc.spec, self.run_dir, self.log_dir)
                wait_ready([new], self.opts.start_timeout)
                self.services[i] = new
                self.write_cluster_file()
                return new
        raise ClusterError(f"no service named {name}")

    def service(self, name: str) -> RunningService:
        for svc in self.services:
            if svc.spec.name == name:
                return svc
        raise ClusterError(f"no service named {name}")
