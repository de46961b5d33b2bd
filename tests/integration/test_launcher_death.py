"""``odradek up`` killed with SIGKILL takes its services with it (no orphans holding
ports), and two storage processes can never share a log directory (``.lock``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.processes import alive
from helpers.waiting import wait_until

from odradek.parent_watch import launcher_env, watch_parent
from odradek.tools.etcd_server import etcd_binary
from odradek.tools.launcher import Cluster


@pytest.mark.slow  # tens of seconds: in make test-slow, which CI runs
@pytest.mark.timeout(180)
def test_sigkill_of_odradek_up_stops_every_service(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    log = open(tmp_path / "up.log", "wb")
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek",
            "up",
            "--data-dir",
            str(data),
            "--port",
            "0",
            "--no-console",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        cluster_file = data / "cluster.json"
        wait_until(
            lambda: cluster_file.exists() or launcher.poll() is not None,
            "cluster.json",
            timeout=120,
        )
        assert launcher.poll() is None, (tmp_path / "up.log").read_text()
        info = json.loads(cluster_file.read_text())
        pids = [s["pid"] for s in info["services"]]
        assert len(pids) >= 5 and all(alive(p) for p in pids)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
        wait_until(lambda: not any(alive(p) for p in pids), "services gone", timeout=60)
    finally:
        log.close()
        if launcher.poll() is None:
            launcher.kill()
        for p in pids:
            if alive(p):
                os.kill(p, signal.SIGKILL)


def test_a_service_refuses_to_start_once_its_launcher_is_gone() -> None:
    env = launcher_env(os.getppid() + 10_000_000, from_main_thread=False)
    with pytest.raises(SystemExit):
        watch_parent(env)
    assert watch_parent({}) is None


@pytest.mark.timeout(120)
def test_second_storage_process_on_a_log_dir_fails_at_start(cluster: Cluster) -> None:
    """Kafka's ``.lock``: the first storage node holds its directory; a second process
    started on it (same node id, as a mistaken restart would be) exits with a clear error."""
    storage = next(s for s in cluster.services if s.spec.kind == "storage")
    settings = dict(storage.spec.settings)
    settings["grpc.listener"] = "127.0.0.1:0"
    cmd = [sys.executable, "-m", "odradek.storage"]
    for key, value in settings.items():
        if key not in ("metrics.port",):
            cmd += ["--set", f"{key}={value}"]
    proc = subprocess.run(cmd, capture_output=True, timeout=100, stdin=subprocess.DEVNULL)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode != 0
    # One line says what is wrong (no traceback of ours to read through).
    assert "odradek.storage: Failed to acquire lock on file .lock in" in err, err[-2000:]
    assert storage.process.poll() is None  # the first one is untouched


_ETCD_STARTER = """
import sys, time
from pathlib import Path
from odradek.tools.etcd_server import EtcdServer
server = EtcdServer(Path(sys.argv[1]), fast=True)
server.start()
print(server.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(60)
def test_sigkill_of_the_etcd_starter_stops_etcd(tmp_path: Path) -> None:
    """``odradek up --etcd`` (and a test cluster on etcd) killed with SIGKILL takes its
    etcd with it: the launcher's Cluster starts it as below, from the main thread."""
    if etcd_binary() is None:
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    starter = subprocess.Popen(
        [sys.executable, "-c", _ETCD_STARTER, str(tmp_path / "etcd")],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    etcd_pid = 0
    try:
        assert starter.stdout is not None
        etcd_pid = int(starter.stdout.readline())
        assert alive(etcd_pid)
        starter.send_signal(signal.SIGKILL)
        starter.wait(10)
        wait_until(lambda: not alive(etcd_pid), "etcd gone with its starter", timeout=20)
    finally:
        if starter.poll() is None:
            starter.kill()
        if etcd_pid and alive(etcd_pid):
            os.kill(etcd_pid, signal.SIGKILL)
