"""The launcher's plan: which services ``odradek up`` starts for a shape."""

from __future__ import annotations

from pathlib import Path

from odradek.cli import build_parser
from odradek.tools.launcher import Cluster, ClusterOptions, plan


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


def test_several_listeners_shift_per_gateway(tmp_path: Path) -> None:
    # odradek up --listeners: gateway i adds i * (number of listeners) to each port, and
    # fixed broker ports leave room for every listener of every gateway.
    opts = ClusterOptions(
        data_dir=tmp_path,
        gateways=2,
        listeners="PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
        settings={"broker.port.start": "9200", "broker.port.count": "4"},
    )
    gateways = [spec.settings for spec in plan(opts, metadata="") if spec.kind == "gateway"]
    assert [g["listeners"] for g in gateways] == [
        "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
        "PLAINTEXT://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095",
    ]
    assert [g["broker.port.start"] for g in gateways] == ["9200", "9208"]
    ephemeral = ClusterOptions(
        data_dir=tmp_path, gateways=2, listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
    )
    assert {
        spec.settings["listeners"]
        for spec in plan(ephemeral, metadata="")
        if spec.kind == "gateway"
    } == {"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}


def test_internal_tls_follows_security_unless_told(tmp_path: Path) -> None:
    # odradek up --security sasl_ssl --no-internal-tls: the listener secured, the
    # services' own links plaintext (the security bench measures the two apart).
    def on(*argv: str) -> bool:
        args = build_parser().parse_args(["up", "--data-dir", str(tmp_path), *argv])
        opts = ClusterOptions(
            data_dir=tmp_path, security=args.security, internal_tls=args.internal_tls
        )
        return Cluster(opts).internal_tls_on

    assert not on()
    assert on("--internal-tls")
    assert on("--security", "sasl_ssl")
    assert on("--security", "ssl")
    assert not on("--security", "sasl_ssl", "--no-internal-tls")
