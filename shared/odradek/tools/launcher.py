"""``odradek up``: a whole cluster on this machine as separate processes, no Docker.

Starts etcd when asked (``--etcd``: a local one under the data dir), then the
controllers (one by default; several share an etcd metadata store and elect one
active, the others stand by; every other service gets all their addresses), then
storage nodes, offset store, coordinators, transaction coordinators, gateways and the
web console, each as ``python -m odradek.<svc>``
with its own data directory and log file under ``--data-dir``. Every service reports
its bound ports through a ready file; once all are up, ``<data-dir>/cluster.json``
lists each service's name, pid, ports and command line, so tests and operators can
find (and kill, and restart) any of them. Ctrl-C or SIGTERM stops everything in
reverse dependency order, each with a graceful SIGTERM first. A running cluster can
grow: :meth:`Cluster.add_storage_node` starts one more storage node (the next id),
which a reassignment or ``odradek cluster rebalance`` then fills.

Node ids: gateways 0.., storage nodes 100.., coordinators 200.., offset stores
300.., transaction coordinators 400.. (named ``transactions-400``, ...), controllers
3000.. (named ``controller``, ``controller-3001``, ...). The brokers Kafka clients see
are the storage nodes, each advertised at a broker port of a gateway
(docs/brokers.md): ephemeral ports by default, listed per gateway in ``cluster.json``
(``ports``: ``broker-<storage node id>``); with ``--set broker.port.start=N`` gateway
``i`` serves the fixed range ``N + i * broker.port.count`` onwards, since all gateways
share this host. ``with_groups=False`` (``--no-groups``) leaves out every coordinator
and the offset store: a bare produce/fetch cluster.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.config_catalog.gateway import GATEWAY_CONFIGS
from odradek.internal_tls import InternalTls
from odradek.parent_watch import launcher_env
from odradek.process import terminate
from odradek.tools import secure_cluster
from odradek.tools.etcd_server import EtcdServer
from odradek.tools.secure_cluster import SecuritySetup

GATEWAY_BASE_ID = 0
STORAGE_BASE_ID = 100
COORDINATOR_BASE_ID = 200
OFFSETS_BASE_ID = 300
TRANSACTIONS_BASE_ID = 400
CONTROLLER_ID = 3000

STOP_ORDER = (
    "console",
    "gateway",
    "transactions",
    "coordinator",
    "offsets",
    "storage",
    "controller",
)
CONSOLE_PORT = 8080
DEFAULT_KAFKA_PORT = 9092


def controller_name(index: int) -> str:
    return "controller" if index == 0 else f"controller-{CONTROLLER_ID + index}"


@dataclass(frozen=True)
class Placement:
    """Run a service inside a network namespace (made by the caller), bound to ``host``."""

    netns: str
    host: str


@dataclass
class ServiceSpec:
    name: str
    module: str
    kind: str
    settings: dict[str, str]
    data_dir: Path
    netns: str | None = None

    def command(self, ready_file: Path) -> list[str]:
        cmd = [sys.executable, "-m", f"odradek.{self.module}", "--ready-file", str(ready_file)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
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

    def read_ready_file(self) -> bool:
        """Take the ports from the service's ready file; False while there is none yet
        (or it is being replaced)."""
        try:
            info = json.loads(self.ready_file.read_text())
        except (OSError, ValueError):
            return False
        self.ports = {k: int(v) for k, v in info.get("ports", {}).items()}
        return True


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
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                # Services stop when the launcher dies, however it dies (SIGKILL included).
                **launcher_env(
                    os.getpid(),
                    from_main_thread=threading.current_thread() is threading.main_thread(),
                ),
            },
        )
    return RunningService(spec, proc, ready, log_file)


def wait_ready(services: list[RunningService], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(services)
    while waiting:
        for svc in list(waiting):
            if svc.read_ready_file():
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


def wait_broker_ports(services: list[RunningService], timeout: float) -> None:
    """Wait until every gateway lists a broker port for every storage node. Ephemeral
    broker ports open as storage nodes register, which may be after a gateway wrote its
    ready file; it writes the file again then (odradek.service.ReportsPorts). Fixed
    ports (``broker.port.start``) are all open before it is ready."""
    storage = [s.spec.settings["node.id"] for s in services if s.spec.kind == "storage"]
    gateways = [
        s
        for s in services
        if s.spec.kind == "gateway"
        and s.process.poll() is None
        and not int(s.spec.settings.get("broker.port.start") or 0)
    ]
    deadline = time.monotonic() + timeout
    while True:
        missing: dict[str, list[str]] = {}
        for svc in gateways:
            svc.read_ready_file()
            lacking = [n for n in storage if f"broker-{n}" not in svc.ports]
            if lacking:
                missing[svc.spec.name] = lacking
        if not missing:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"timed out after {timeout:.0f}s waiting for broker ports: {missing}"
            )
        time.sleep(0.05)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_process(svc: RunningService, grace: float) -> None:
    terminate(svc.process, grace)


@dataclass
class ClusterOptions:
    data_dir: Path
    storage_nodes: int = 1
    log_dirs: int = 1  # log directories per storage node (<data>/storage-<id>/d<i> when > 1)
    gateways: int = 1
    coordinators: int = 1
    offset_stores: int = 1
    transaction_coordinators: int = 1
    port: int = DEFAULT_KAFKA_PORT
    host: str = "127.0.0.1"
    replication_factor: int = 1
    metadata: str = ""  # "" = embedded file store; "etcd://host:port" for etcd
    controllers: int = 1  # more than one needs etcd (metadata="etcd://..." or etcd=True)
    etcd: bool = False  # start a local etcd under data_dir/etcd and use it
    # Service name -> network namespace and address (tests of network partitions).
    placement: dict[str, Placement] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)  # --set: passed to every service
    with_groups: bool = True
    # The web console (odradek.console). console_port None: 8080 next to the default Kafka
    # port 9092, else a free port (several clusters on one machine must not collide).
    console: bool = True
    console_port: int | None = None
    start_timeout: float = 60.0
    # "plaintext", "ssl" or "sasl_ssl": the gateways' listener (secure_cluster.py).
    security: str = "plaintext"
    # The gateways' ``listeners`` (Kafka's syntax, several at once); "" for one listener
    # of the --security protocol on --port. Gateway i adds i * (number of listeners) to
    # every non-zero port, since all gateways share this host.
    listeners: str = ""
    # Mutual TLS between services: a certificate per service under DATA/certs
    # (odradek.internal_tls). None: on with any security other than plaintext; False
    # keeps it off under --security too (the security bench splits the two costs).
    internal_tls: bool | None = None


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now (the controller keeps one fixed address across restarts)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_options(opts: ClusterOptions) -> None:
    if opts.controllers < 1:
        raise ClusterError("need at least one controller")
    if opts.security not in secure_cluster.SECURITY_MODES:
        raise ClusterError(
            f"--security: expected one of {', '.join(secure_cluster.SECURITY_MODES)}"
        )
    if opts.etcd and opts.metadata:
        raise ClusterError("--etcd starts a local etcd; it cannot be combined with --metadata")
    if opts.controllers > 1 and not (opts.etcd or opts.metadata.startswith("etcd://")):
        raise ClusterError(
            "several controllers need a shared metadata store: use --metadata etcd://HOST:PORT "
            "or --etcd (the embedded store belongs to one process)"
        )


def _host_port(opts: ClusterOptions, name: str) -> tuple[str, str | None, int]:
    """(host, netns, fixed port) for a service: a fresh namespace has every port free."""
    placed = opts.placement.get(name)
    if placed is None:
        return opts.host, None, free_port(opts.host)
    return placed.host, placed.netns, free_port(opts.host)


def plan(opts: ClusterOptions, metadata: str | None = None) -> list[ServiceSpec]:
    """Which processes to start, in start order, with their settings.

    Controllers get fixed ports so a restarted controller is found again at the
    address every other service was given; the rest use ephemeral ports and are
    found through the metadata (and cluster.json). ``metadata`` overrides
    ``opts.metadata`` (the URL of an etcd the launcher started).
    """
    data = opts.data_dir.resolve()
    common = dict(opts.settings)
    metadata_store = metadata or opts.metadata or f"file://{data / 'controller'}"
    rf_offsets = max(1, min(3, opts.storage_nodes))
    specs = []
    for i in range(max(1, opts.controllers)):
        name = controller_name(i)
        host, netns, port = _host_port(opts, name)
        specs.append(
            ServiceSpec(
                name,
                "controller",
                "controller",
                {
                    "node.id": str(CONTROLLER_ID + i),
                    "grpc.listener": f"{host}:{port}",
                    "metadata.store": metadata_store,
                    "default.replication.factor": str(opts.replication_factor),
                    "offsets.topic.replication.factor": str(rf_offsets),
                    "transaction.state.log.replication.factor": str(rf_offsets),
                    "min.insync.replicas": common.get(
                        "min.insync.replicas", BROKER_CONFIGS.text("min.insync.replicas")
                    ),
                    **common,
                },
                data / name,
                netns,
            )
        )
    for i in range(opts.storage_nodes):
        specs.append(storage_spec(opts, STORAGE_BASE_ID + i))
    if opts.with_groups:
        # The coordinator-like services: N of each kind, each with its gRPC port only.
        for kind, base_id, count in (
            ("offsets", OFFSETS_BASE_ID, opts.offset_stores),
            ("coordinator", COORDINATOR_BASE_ID, opts.coordinators),
            ("transactions", TRANSACTIONS_BASE_ID, opts.transaction_coordinators),
        ):
            for node_id in range(base_id, base_id + count):
                name = f"{kind}-{node_id}"
                specs.append(
                    ServiceSpec(
                        name,
                        kind,
                        kind,
                        {"node.id": str(node_id), "grpc.listener": f"{opts.host}:0", **common},
                        data / name,
                    )
                )
    broker_ports = int(common.get("broker.port.start") or 0)
    broker_port_count = int(
        common.get("broker.port.count") or GATEWAY_CONFIGS.text("broker.port.count")
    )
    listeners = _listener_entries(opts.listeners)
    for i in range(opts.gateways):
        node_id = GATEWAY_BASE_ID + i
        port = opts.port + i if opts.port else 0
        protocol = "PLAINTEXT" if opts.security == "plaintext" else opts.security.upper()
        value = f"{protocol}://{opts.host}:{port}"
        if listeners:
            value = ",".join(
                f"{name}://{host}:{p + i * len(listeners) if p else 0}"
                for name, host, p in listeners
            )
        settings = {
            "node.id": str(node_id),
            "listeners": value,
            "grpc.listener": f"{opts.host}:0",
            **common,
        }
        if broker_ports:
            # Every gateway listens for every storage node on every listener, on this one
            # host: listener j of gateway i from N + (i * listeners + j) * count.
            settings["broker.port.start"] = str(
                broker_ports + i * max(1, len(listeners)) * broker_port_count
            )
        specs.append(
            ServiceSpec(
                f"gateway-{node_id}", "gateway", "gateway", settings, data / f"gateway-{node_id}"
            )
        )
    if opts.console and opts.gateways and opts.security != "ssl":
        specs.append(console_spec(opts, data, common))
    return specs


def _listener_entries(value: str) -> list[tuple[str, str, int]]:
    """``--listeners NAME://host:port,...`` as (name, host, port)."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit():
            raise ClusterError(f"--listeners: expected NAME://host:port, got {item!r}")
        out.append((name.upper(), host, int(port)))
    return out


def console_spec(opts: ClusterOptions, data: Path, common: dict[str, str]) -> ServiceSpec:
    """The console finds the gateways in the controller's metadata (no bootstrap needed)."""
    port = opts.console_port
    if port is None:
        port = CONSOLE_PORT if opts.port == DEFAULT_KAFKA_PORT else 0
    return ServiceSpec(
        "console",
        "console",
        "console",
        {"console.listener": f"{opts.host}:{port}", "grpc.listener": f"{opts.host}:0", **common},
        data / "console",
    )


def storage_spec(opts: ClusterOptions, node_id: int) -> ServiceSpec:
    """Storage node ``node_id``: data under ``<data>/storage-<id>``, one directory per log dir."""
    data = opts.data_dir.resolve()
    name = f"storage-{node_id}"
    placed = opts.placement.get(name)
    dirs = (
        [data / name]
        if opts.log_dirs <= 1
        else [data / name / f"d{i}" for i in range(opts.log_dirs)]
    )
    return ServiceSpec(
        name,
        "storage",
        "storage",
        {
            "node.id": str(node_id),
            "grpc.listener": f"{placed.host if placed else opts.host}:0",
            "log.dirs": ",".join(str(d) for d in dirs),
            # Gateways on this host reach the node over a Unix socket instead of TCP
            # (and TLS): docs/data-link.md, "Same host". Not with network namespaces,
            # which a filesystem socket would cross.
            **(
                {}
                if opts.placement
                else {"data.socket.path": str(data / name / "link" / "data.sock")}
            ),
            **opts.settings,
        },
        data / name,
        placed.netns if placed else None,
    )


class Cluster:
    """A running local cluster; ``start()`` blocks until every service is serving."""

    def __init__(self, opts: ClusterOptions) -> None:
        self.opts = opts
        self.data_dir = opts.data_dir.resolve()
        self.run_dir = self.data_dir / "run"
        self.log_dir = self.data_dir / "logs"
        self.services: list[RunningService] = []
        self.etcd: EtcdServer | None = None
        self.security: SecuritySetup | None = None
        self.admin_tls: InternalTls | None = None  # the launcher's own, as odradek://admin/0

    @property
    def internal_tls_on(self) -> bool:
        if self.opts.internal_tls is not None:
            return self.opts.internal_tls
        return self.opts.security != "plaintext"

    @property
    def cluster_file(self) -> Path:
        return self.data_dir / "cluster.json"

    def start(self) -> None:
        check_options(self.opts)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            metadata = None
            if self.opts.etcd:
                etcd_tls = (
                    secure_cluster.etcd_certificates(self.data_dir, self.opts.host)
                    if self.internal_tls_on
                    else None
                )
                self.etcd = EtcdServer(self.data_dir / "etcd", host=self.opts.host, tls=etcd_tls)
                self.etcd.start(self.opts.start_timeout)
                metadata = self.etcd.url
            specs = plan(self.opts, metadata)
            if self.internal_tls_on:
                self.admin_tls = secure_cluster.member_certificates(
                    self.data_dir, specs, etcd=self.etcd is not None
                )
            if self.opts.security != "plaintext":
                self.security = secure_cluster.prepare(
                    self.data_dir, self.opts.security, (self.opts.host,)
                )
                for spec in specs:
                    if spec.kind == "gateway":
                        spec.settings.update(self.security.gateway_settings())
                    elif spec.kind == "console":
                        spec.settings.update(self.security.console_settings())
            controllers = [s for s in specs if s.kind == "controller"]
            started = [start_process(c, self.run_dir, self.log_dir) for c in controllers]
            self.services.extend(started)
            wait_ready(started, self.opts.start_timeout)
            address = ",".join(f"{self._host_of(svc)}:{svc.ports['grpc']}" for svc in started)
            if self.security is not None:
                if self.security.mode == "sasl_ssl":
                    secure_cluster.add_super_user(self.security, address, self.admin_tls)
                secure_cluster.write_client_files(self.security, self.data_dir)
            rest = []
            for spec in specs[len(controllers) :]:
                spec.settings["controller.address"] = address
                if spec.kind == "console":
                    spec.settings["controller.metrics.address"] = ",".join(
                        f"{self._host_of(svc)}:{svc.ports.get('metrics', 0)}" for svc in started
                    )
                rest.append(start_process(spec, self.run_dir, self.log_dir))
            self.services.extend(rest)
            wait_ready(rest, self.opts.start_timeout)
            wait_broker_ports(self.services, self.opts.start_timeout)
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
            "controller_address": self.controller_address,
            "services": [s.describe() for s in self.services],
        }
        if self.console_url:
            doc["console_url"] = self.console_url
        listeners = self.listener_bootstrap_servers()
        if self.opts.listeners:
            doc["listeners"] = listeners
        if self.security is not None:
            name = self.security.protocol if self.security.protocol in listeners else None
            servers = listeners[name] if name else self.bootstrap_servers
            doc["security"] = {
                "listener": f"{self.security.protocol}://{servers}",
                "security_protocol": self.security.protocol,
                "ca_file": str(self.security.ca_file),
                "super_user": secure_cluster.SUPER_USER,
                "client_properties": str(self.data_dir / "client.properties"),
                "librdkafka_conf": str(self.data_dir / "librdkafka.conf"),
            }
        if self.admin_tls is not None:
            certs = self.data_dir / "certs"
            doc["internal_tls"] = {
                "ca_file": str(certs / "ca.crt"),
                "admin_cert": str(certs / "admin-0.crt"),
                "admin_key": str(certs / "admin-0.key"),
                "server_name": self.admin_tls.server_name,
            }
        if self.etcd is not None:
            doc["etcd"] = {
                "pid": self.etcd.pid,
                "endpoint": self.etcd.endpoint,
                "log": str(self.etcd.log_file),
            }
        tmp = self.cluster_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, self.cluster_file)

    def listener_bootstrap_servers(self) -> dict[str, str]:
        """Each listener's bootstrap servers (every gateway's port for it), by name."""
        gateways = [s for s in self.services if s.spec.kind == "gateway"]
        names = [name for name, _h, _p in _listener_entries(self.opts.listeners)]
        return {
            name: ",".join(
                f"{self.opts.host}:{s.ports.get(f'kafka-{name.lower()}', 0)}" for s in gateways
            )
            for name in names
        }

    @property
    def bootstrap_servers(self) -> str:
        gateways = [s for s in self.services if s.spec.kind == "gateway"]
        return ",".join(f"{self.opts.host}:{s.ports.get('kafka', 0)}" for s in gateways)

    @property
    def console_url(self) -> str:
        """The web console's address ("" when not started)."""
        for s in self.services:
            if s.spec.kind == "console" and s.ports.get("http"):
                scheme = "https" if s.spec.settings.get("console.ssl.keystore.location") else "http"
                return f"{scheme}://{self.opts.host}:{s.ports['http']}/"
        return ""

    def _host_of(self, svc: RunningService) -> str:
        placed = self.opts.placement.get(svc.spec.name)
        return placed.host if placed else self.opts.host

    def grpc_address(self, name: str) -> str:
        svc = self.service(name)
        return f"{self._host_of(svc)}:{svc.ports.get('grpc', 0)}"

    @property
    def controller_address(self) -> str:
        """Every controller's address, comma separated (what services get)."""
        return ",".join(
            f"{self._host_of(s)}:{s.ports.get('grpc', 0)}"
            for s in self.services
            if s.spec.kind == "controller"
        )

    def controllers(self) -> list[RunningService]:
        return [s for s in self.services if s.spec.kind == "controller"]

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
        if self.etcd is not None:
            self.etcd.stop()

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

    def add_storage_node(self) -> RunningService:
        """Start one more storage node with the next free id; returns once it serves."""
        ids = [int(s.spec.settings["node.id"]) for s in self.services if s.spec.kind == "storage"]
        spec = storage_spec(self.opts, max(ids, default=STORAGE_BASE_ID - 1) + 1)
        spec.settings["controller.address"] = self.controller_address
        if self.admin_tls is not None:
            secure_cluster.member_certificates(self.data_dir, [spec])
        svc = start_process(spec, self.run_dir, self.log_dir)
        self.services.append(svc)
        wait_ready([svc], self.opts.start_timeout)
        wait_broker_ports(self.services, self.opts.start_timeout)
        self.write_cluster_file()
        return svc

    def service(self, name: str) -> RunningService:
        for svc in self.services:
            if svc.spec.name == name:
                return svc
        raise ClusterError(f"no service named {name}")
