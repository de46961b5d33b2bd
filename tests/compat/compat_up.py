"""Clusters started the way a user starts one: ``python -m odradek up`` in a subprocess.

It is found through the ``cluster.json`` it writes and stopped with Ctrl-C (SIGINT),
after which it must exit 0.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

UP_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class UpCluster:
    """A cluster started by ``odradek up`` in a subprocess."""

    bootstrap: str
    data_dir: Path
    process: subprocess.Popen[bytes]
    output: Path

    @property
    def admin_password(self) -> str:
        """The super user's generated password (``odradek up --security``)."""
        return (self.data_dir / "certs" / "admin.password").read_text().strip()

    @property
    def ca_file(self) -> Path:
        """The local CA that signed the listener's certificate (``--security``)."""
        return self.data_dir / "certs" / "ca.crt"

    def info(self) -> dict[str, object]:
        doc: dict[str, object] = json.loads((self.data_dir / "cluster.json").read_text())
        return doc

    def partition_dir(self, topic: str, partition: int) -> Path:
        """Where the storage node keeps ``topic``-``partition`` (one storage node)."""
        (found,) = self.data_dir.glob(f"storage-*/{topic}-{partition}")
        return found

    def log_tail(self, service: str = "gateway-0", lines: int = 40) -> str:
        """The end of one service's log, for bug reports in assertion messages."""
        path = self.data_dir / "logs" / f"{service}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return f"(no log at {path})"


def start_up(data_dir: Path, extra: Sequence[str] = ()) -> UpCluster:
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    output = data_dir.parent / f"{data_dir.name}-up.out"
    cmd = [sys.executable, "-m", "odradek", "up", "--data-dir", str(data_dir), "--port", str(port)]
    with open(output, "wb") as out:
        proc = subprocess.Popen(
            [*cmd, *extra], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    cluster_file = data_dir / "cluster.json"
    deadline = time.monotonic() + UP_TIMEOUT
    while not cluster_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(30)
            raise RuntimeError(f"odradek up did not start:\n{output.read_text(errors='replace')}")
        time.sleep(0.05)
    doc = json.loads(cluster_file.read_text())
    return UpCluster(doc["bootstrap_servers"], data_dir, proc, output)


def stop_up(cluster: UpCluster) -> None:
    cluster.process.send_signal(signal.SIGINT)
    try:
        code = cluster.process.wait(60)
    except subprocess.TimeoutExpired:
        cluster.process.kill()
        cluster.process.wait(10)
        raise AssertionError("odradek up did not stop within 60s of SIGINT") from None
    assert code == 0, (
        f"odradek up exited with {code} after SIGINT:\n{cluster.output.read_text(errors='replace')}"
    )
