"""A local single-member etcd (Debian's ``etcd-server``) for ``odradek up --etcd`` and tests.

Not part of any service: the controller only ever talks to an etcd it is given
(``metadata.store=etcd://host:port``). This starts one on loopback ports, in a data
directory of the caller's, waits until ``/health`` answers, and stops it by its pid.

``fast=True`` shortens etcd's raft heartbeat and election timeout so the smallest
lease etcd grants is one second instead of two (etcd's minimum lease TTL is 1.5 x the
election timeout, rounded up to whole seconds): tests use short leases.

``tls=EtcdServerTls(ca, cert, key)`` serves clients over TLS and requires a client
certificate signed by ``ca`` (etcd's ``--cert-file``, ``--key-file``,
``--trusted-ca-file``, ``--client-cert-auth``), and its peer port the same way
(``--peer-cert-file``, ``--peer-key-file``, ``--peer-trusted-ca-file``,
``--peer-client-cert-auth``): the certificate must then also be a client certificate
(extended key usage clientAuth), which members present to each other.

Started from the main thread, etcd gets SIGTERM when its starter dies, however it dies
(util-linux ``setpriv --pdeathsig``, which then execs etcd: the pid stays etcd's), as
the services do (:mod:`odradek.parent_watch`): an ``odradek up --etcd`` killed with
SIGKILL leaves no etcd holding its ports and data directory. The signal follows the
thread that started it, hence the main thread only.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from odradek.process import terminate

ETCD_BINARY = "etcd"


class EtcdUnavailable(RuntimeError):
    pass


def etcd_binary() -> str | None:
    """Path of the etcd server binary, or None when it is not installed."""
    return shutil.which(ETCD_BINARY) or (
        "/usr/bin/etcd" if os.access("/usr/bin/etcd", os.X_OK) else None
    )


def parent_death_prefix() -> list[str]:
    """The command prefix that makes etcd stop with its starter (empty where it cannot:
    no ``setpriv``, or not the main thread, whose exit would stop etcd too early)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class EtcdServerTls:
    """PEM files: the CA clients' certificates must come from, etcd's certificate and key."""

    ca: Path
    cert: Path
    key: Path


class EtcdServer:
    """One etcd process; ``start()`` blocks until it serves, ``stop()`` ends it."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        client_port: int = 0,
        peer_port: int = 0,
        name: str = "odradek-etcd",
        fast: bool = False,
        tls: EtcdServerTls | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.host = host
        self.client_port = client_port or _free_port(host)
        self.peer_port = peer_port or _free_port(host)
        self.name = name
        self.fast = fast
        self.tls = tls
        self.process: subprocess.Popen[bytes] | None = None
        self.log_file = data_dir / "etcd.log"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def url(self) -> str:
        """The ``metadata.store`` value that points a controller at this etcd."""
        return f"etcd://{self.endpoint}"

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else -1

    def command(self) -> list[str]:
        binary = etcd_binary()
        if binary is None:
            raise EtcdUnavailable("etcd is not installed (Debian package etcd-server)")
        scheme = "https" if self.tls else "http"
        client = f"{scheme}://{self.host}:{self.client_port}"
        peer = f"{scheme}://{self.host}:{self.peer_port}"
        cmd = [
            binary,
            "--name",
            self.name,
            "--data-dir",
            str(self.data_dir / "member-data"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"{self.name}={peer}",
            "--log-level",
            "warn",
            "--logger",
            "zap",
        ]
        if self.tls is not None:
            cmd += [
                "--cert-file",
                str(self.tls.cert),
                "--key-file",
                str(self.tls.key),
                "--trusted-ca-file",
                str(self.tls.ca),
                "--client-cert-auth",
                "--peer-cert-file",
                str(self.tls.cert),
                "--peer-key-file",
                str(self.tls.key),
                "--peer-trusted-ca-file",
                str(self.tls.ca),
                "--peer-client-cert-auth",
            ]
        if self.fast:
            cmd += ["--heartbeat-interval", "10", "--election-timeout", "100"]
        return cmd

    def start(self, timeout: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(
                parent_death_prefix() + self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.process.poll() is not None:
                raise EtcdUnavailable(
                    f"etcd exited with code {self.process.returncode}; see {self.log_file}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise EtcdUnavailable(f"etcd not healthy after {timeout:.0f}s; see {self.log_file}")
            time.sleep(0.05)

    def healthy(self) -> bool:
        context = None
        if self.tls is not None:
            context = ssl.create_default_context(cafile=str(self.tls.ca))
            # etcd's own certificate doubles as the client one (clientAuth usage).
            context.load_cert_chain(self.tls.cert, self.tls.key)
        try:
            url = f"{'https' if self.tls else 'http'}://{self.endpoint}/health"
            with urllib.request.urlopen(url, timeout=1.0, context=context) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def stop(self, grace: float = 10.0) -> None:
        if self.process is not None:
            terminate(self.process, grace)
