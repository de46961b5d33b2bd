"""The launcher's plan: which services ``odradek up`` starts for a shape."""

from __future__ import annotations

from pathlib import Path

from odradek.tools.launcher import ClusterOptions, plan


def kinds(opts: ClusterOptions) -> list[str]:
    return [spec.kind for spec in plan(opts, metadata="")]


def test_console_starts_with_the_gateways(tmp_path: Path) -> None:
    assert kinds(ClusterOptions(data_dir=tmp_path, port=0)).count("console") == 1


def test_no_console_without_a_gateway(tmp_path: Path) -> None:
    # Storage-only clusters (controller and storage tests) have nothing for the console to
    # show; waiting for it would time out the whole cluster start (a CI failure once).
    assert "console" not in kinds(ClusterOptions(data_dir=tmp_path, port=0, gateways=0))


def test_console_can_be_left_out(tmp_path: Path) -> None:
    assert "console" not in kinds(ClusterOptions(data_dir=tmp_path, port=0, console=False))
