"""``python -m odradek.pipeline.pyfiles --output odradek_pipeline.zip``: the
``odradek.pipeline`` package as one zip for ``spark-submit --py-files``.

Executors import the data source by its module path when Spark hands them a
pickled reader or writer, so the package must be importable there. The zip holds
an empty ``odradek/__init__.py`` and ``odradek/pipeline/**.py`` only: the pipeline
needs nothing else from Odradek (its executors' own needs are ``confluent-kafka``
and ``pyarrow``, which must be installed on the cluster's Python).

The files are found through ``odradek.pipeline`` itself, never through the
``odradek`` root package: run from a directory that holds a folder named
``odradek`` (a clone of this repository, say), Python resolves ``odradek`` to that
folder as a namespace package with no ``__file__``.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

import odradek.pipeline

ROOT_INIT = '"""Odradek: only the pipeline package is shipped in this zip."""\n'


def build(output: Path) -> list[str]:
    """Write the zip; return the archive names it holds."""
    names: list[str] = []
    output.parent.mkdir(parents=True, exist_ok=True)
    pipeline_dir = Path(odradek.pipeline.__file__).parent
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("odradek/__init__.py", ROOT_INIT)
        names.append("odradek/__init__.py")
        for path in sorted(pipeline_dir.rglob("*.py")):
            arcname = "odradek/pipeline/" + path.relative_to(pipeline_dir).as_posix()
            zf.write(path, arcname)
            names.append(arcname)
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m odradek.pipeline.pyfiles", description=__doc__)
    p.add_argument("--output", default="dist/odradek_pipeline.zip")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    names = build(Path(args.output))
    print(f"wrote {args.output} ({len(names)} modules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
