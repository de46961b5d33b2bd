"""Stopping a child process the way every launcher here does: SIGTERM, then SIGKILL."""

from __future__ import annotations

import signal
import subprocess


def terminate(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Ask ``proc`` to drain (SIGTERM), kill it after ``grace`` seconds; no-op if gone."""
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
