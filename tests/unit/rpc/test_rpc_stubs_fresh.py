"""The committed gRPC stubs match proto/: regenerate with ``make proto`` when this fails."""

from __future__ import annotations

from pathlib import Path

from odradek.rpc.generate import STUB_DIR, generate, proto_files


def test_every_proto_has_stubs_and_they_are_current(tmp_path: Path) -> None:
    assert proto_files(), "no .proto files found"
    fresh = {p.name: p.read_text() for p in generate(tmp_path)}
    committed = {p.name: p.read_text() for p in STUB_DIR.iterdir() if p.suffix in (".py", ".pyi")}
    committed.pop("__init__.py", None)
    fresh.pop("__init__.py", None)
    assert sorted(fresh) == sorted(committed), "stub files differ from proto/: run make proto"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale stubs {stale}: run make proto"
