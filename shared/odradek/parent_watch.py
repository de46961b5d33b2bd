"""A service started by a launcher stops when the launcher dies, however it dies.

``odradek up`` (and every test cluster) starts each service in a session of its own so
Ctrl-C reaches only the launcher, which then stops them in order. When the launcher
itself is killed (SIGKILL, the OOM killer) nothing would stop them, so the launcher
passes its pid in ``ODRADEK_PARENT_PID`` and each service, at start:

- asks the kernel for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``, Linux;
  only when ``ODRADEK_PARENT_DEATHSIG=1``, which the launcher sets when it starts the
  service from its main thread: the signal follows the *thread* that forked);
- checks it has not already been orphaned between fork and that call;
- runs a watchdog thread that waits for the parent's exit on a pidfd (polling
  ``getppid()`` where there is none; a daemon thread, so it works even when the
  event loop is wedged): once the parent is gone it sends SIGTERM to its own
  process (the service drains as on Ctrl-C) and, if the process still lives after
  :data:`DRAIN_GRACE_S`, exits hard.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
import signal
import threading
import time

PARENT_PID_ENV = "ODRADEK_PARENT_PID"
DEATHSIG_ENV = "ODRADEK_PARENT_DEATHSIG"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 0.5
DRAIN_GRACE_S = 30.0

log = logging.getLogger(__name__)


def launcher_env(parent_pid: int, *, from_main_thread: bool) -> dict[str, str]:
    """The variables a launcher adds to a service's environment."""
    env = {PARENT_PID_ENV: str(parent_pid)}
    if from_main_thread:
        env[DEATHSIG_ENV] = "1"
    return env


def set_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)``; False where unavailable (not Linux)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError, TypeError):
        return False
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return int(prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)) == 0


def _wait_for_exit(parent: int, poll_s: float) -> None:
    """Return once ``parent`` is no longer this process's parent.

    Blocks on a pidfd of the parent (Linux 5.3+: readable once it exits), so an idle
    service's watchdog never wakes (docs/data-link.md, "Idle CPU"); polls
    ``getppid()`` every ``poll_s`` where there is no pidfd, and until the process has
    been reparented."""
    try:
        fd = os.pidfd_open(parent)
    except (AttributeError, OSError):  # not Linux, an old kernel, or already gone
        fd = -1
    if fd >= 0:
        try:
            if os.getppid() == parent:  # the pidfd is the parent's, not a reused pid's
                waiter = select.poll()  # (select() refuses fds past FD_SETSIZE)
                waiter.register(fd, select.POLLIN)
                waiter.poll()
        finally:
            os.close(fd)
    while os.getppid() == parent:
        time.sleep(poll_s)


def _watchdog(parent: int, poll_s: float, grace_s: float) -> None:
    _wait_for_exit(parent, poll_s)
    log.error("launcher (pid %d) is gone: stopping", parent)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    log.error("still running %.0fs after the launcher died: exiting", grace_s)
    os._exit(1)


def watch_parent(
    environ: dict[str, str] | None = None,
    *,
    poll_s: float = POLL_S,
    grace_s: float = DRAIN_GRACE_S,
) -> int | None:
    """Arm the death signal and the watchdog when a launcher asked for them.

    Returns the watched parent pid (None when not started by a launcher). Exits at
    once when the parent is already gone.
    """
    env = os.environ if environ is None else environ
    raw = env.get(PARENT_PID_ENV)
    if not raw:
        return None
    parent = int(raw)
    if env.get(DEATHSIG_ENV) == "1":
        set_parent_death_signal()
    if os.getppid() != parent:
        log.error("launcher (pid %d) died before this service started", parent)
        raise SystemExit(1)
    threading.Thread(
        target=_watchdog, args=(parent, poll_s, grace_s), name="parent-watchdog", daemon=True
    ).start()
    return parent
