"""The optional C record walk and layout (``odradek.records._columns``) wherever the
pipeline runs: from the install, or from the ``pyfiles`` zip.

Python cannot import an extension module from inside a zip (zipimport loads only
source and bytecode), so an executor that got the package through
``spark-submit --py-files`` would fall back to the numpy path, about 4x the CPU per
record. The zip therefore carries the extension built for the interpreter that made
it; here it is copied once to a cache directory, named by its content hash, and
loaded from there. An executor whose interpreter does not match the file's ABI tag
keeps the numpy path.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import zipimport
from pathlib import Path
from types import ModuleType

MODULE = "odradek.records._columns"


def load_columns() -> ModuleType | None:
    """The extension module, or None where neither the install nor the zip has one
    this interpreter can load."""
    try:
        from odradek.records import _columns

        return _columns
    except ImportError:
        pass
    try:
        return _from_zip()
    except (ImportError, OSError):
        return None


def _from_zip() -> ModuleType | None:
    import odradek.records

    loader = getattr(odradek.records, "__loader__", None)
    if not isinstance(loader, zipimport.zipimporter):
        return None
    prefix = "odradek/records/_columns"
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        try:
            data = loader.get_data(f"{loader.archive}/{prefix}{suffix}")
        except OSError:
            continue
        return _load(data, suffix)
    return None


def _load(data: bytes, suffix: str) -> ModuleType:
    digest = hashlib.sha256(data).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"odradek-native-{os.getuid()}"
    cache.mkdir(mode=0o700, exist_ok=True)
    path = cache / f"_columns-{digest}{suffix}"
    if not path.exists():
        # Written under a unique name and renamed: concurrent executors on one host
        # never load a half-written file.
        fd, tmp = tempfile.mkstemp(dir=cache, suffix=suffix)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(
        MODULE, path, loader=importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[MODULE] = module
    return module
