"""``odradek groups`` takes Kafka's option habits: --group and --bootstrap-server after the action."""

from __future__ import annotations

import subprocess
import sys

from odradek.tools.launcher import Cluster


def _groups(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "groups", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_group_option_and_bootstrap_after_the_action(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap_servers
    by_option = _groups("describe", "--bootstrap-server", bootstrap, "--group", "no-such-group")
    positional = _groups("--bootstrap-server", bootstrap, "describe", "no-such-group")
    assert by_option.returncode == positional.returncode
    assert by_option.stdout == positional.stdout
    assert "no-such-group" in by_option.stdout + by_option.stderr
    missing = _groups("describe", "--bootstrap-server", bootstrap)
    assert missing.returncode == 2
    assert "--group" in missing.stderr
