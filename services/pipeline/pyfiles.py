"""``python -m odradek.pipeline.pyfiles --output odradek_pipeline.zip``: the
``odradek.pipeline`` package as one zip for ``spark-submit --py-files``.

Executors import the data source by its module path when Spark hands them a
pickled reader or writer, so the package must be importable there. The zip holds
an empty ``odradek/__init__.py``, ``odradek/pipeline/**.py`` and the two shared
packages the executors' direct reader and producer use, ``odradek/protocol``
(Kafka's wire format) and ``odradek/records`` (record batches), with the record
walk compiled for this interpreter when the install has it (see
``odradek.pipeline.native``; executors of another Python version use numpy). The cluster's
Python must have ``confluent-kafka``, ``pyarrow``, ``numpy``, ``kafka-python``,
``crc32c``, ``lz4``, ``zstandard`` and ``cramjam``.

The files are found through ``odradek.pipeline`` itself, never through the
``odradek`` root package: run from a directory that holds a folder named
``odradek`` (a clone of this repository, say), Python resolves ``odradek`` to that
folder as a namespace package with no ``__file__``.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import sys
import zipfile
from pathlib import Path

import odradek.pipeline
import odradek.protocol
import odradek.records

ROOT_INIT = '"""Odradek: only the pipeline package is shipped in this zip."""\n'


SHIPPED = (odradek.pipeline, odradek.protocol, odradek.records)


def build(output: Path) -> list[str]:
    """Write the zip; return the archive names it holds."""
    names: list[str] = []
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("odradek/__init__.py", ROOT_INIT)
        names.append("odradek/__init__.py")
        for package in SHIPPED:
            assert package.__file__ is not None
            root = Path(package.__file__).parent
            prefix = package.__name__.replace(".", "/")
            for path in sorted(root.rglob("*.py")) + _extensions(root):
                arcname = f"{prefix}/{path.relative_to(root).as_posix()}"
                zf.write(path, arcname)
                names.append(arcname)
    return names


def _extensions(root: Path) -> list[Path]:
    """Compiled modules built for this interpreter (loaded from the zip by
    ``odradek.pipeline.native``)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return sorted(p for p in root.rglob("*") if p.name.endswith(suffixes))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m odradek.pipeline.pyfiles", description=__doc__)
    p.add_argument("--output", default="dist/odradek_pipeline.zip")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    names = build(Path(args.output))
    print(f"wrote {args.output} ({len(names)} modules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
