"""Regenerate the gRPC stubs in ``odradek/rpc/v1`` from ``proto/odradek/v1`` (``make proto``).

protoc names generated modules after the proto package (``odradek.v1``); we import
them as ``odradek.rpc.v1`` so the stubs live beside the library that uses them, and
rewrite the imports accordingly. ``generate(out_dir)`` is also used by the test that
fails when the committed stubs are stale.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PROTO_ROOT = REPO / "proto"
STUB_DIR = Path(__file__).resolve().parent / "v1"
_IMPORT = re.compile(r"^from odradek\.v1 import ", re.M)


def proto_files() -> list[Path]:
    return sorted((PROTO_ROOT / "odradek" / "v1").glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Write ``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` into ``out_dir``."""
    from grpc_tools import protoc  # only needed by developers, not at run time

    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{Path(protoc.__file__).parent / '_proto'}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *[str(p.relative_to(PROTO_ROOT)) for p in proto_files()],
        ]
        if protoc.main(args) != 0:
            raise RuntimeError("protoc failed")
        out_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sorted((Path(tmp) / "odradek" / "v1").iterdir()):
            text = _IMPORT.sub("from odradek.rpc.v1 import ", src.read_text())
            dest = out_dir / src.name
            dest.write_text(text)
            written.append(dest)
        (out_dir / "__init__.py").write_text(
            '"""Generated gRPC stubs; run `make proto` to refresh."""\n'
        )
        return written


def main() -> None:
    if STUB_DIR.exists():
        shutil.rmtree(STUB_DIR)
    for path in generate(STUB_DIR):
        print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
