"""A service's launcher watchdog (odradek.parent_watch) sleeps until the launcher
exits instead of polling for it, and still stops the service when it does.

Real processes: a stand-in launcher starts a stand-in service that arms the watchdog
as every service does; the test counts the watchdog thread's wake-ups from /proc and
then SIGKILLs the launcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from helpers.processes import alive

from odradek.parent_watch import PARENT_PID_ENV

SERVICE = """
import os, threading, time
from odradek.parent_watch import watch_parent
watch_parent()
dog = next(t for t in threading.enumerate() if t.name == "parent-watchdog")
print(os.getpid(), dog.native_id, flush=True)
time.sleep(60)
"""

LAUNCHER = f"""
import os, subprocess, sys
env = dict(os.environ, {PARENT_PID_ENV}=str(os.getpid()))
subprocess.Popen([sys.executable, "-c", {SERVICE!r}], env=env)
sys.stdin.read()
"""


def _switches(pid: int, tid: int) -> int:
    with open(f"/proc/{pid}/task/{tid}/status") as status:
        fields = dict(line.split(":\t", 1) for line in status if ":\t" in line)
    return int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])


def test_the_watchdog_does_not_wake_while_the_launcher_lives_and_acts_when_it_dies() -> None:
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    service = 0
    try:
        assert launcher.stdout is not None
        service, dog = (int(x) for x in launcher.stdout.readline().split())
        before = _switches(service, dog)
        time.sleep(2.0)
        # A 0.5 s getppid() poll wakes it four times here; a pidfd wait not at all.
        assert _switches(service, dog) - before <= 1
        launcher.kill()
        launcher.wait(5)
        deadline = time.monotonic() + 10
        while alive(service) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(service), "the service outlived its launcher"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(5)
        if service and alive(service):
            os.kill(service, signal.SIGKILL)
