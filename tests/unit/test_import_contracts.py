"""The import contracts of ``make lint`` (``[tool.importlinter]`` in pyproject.toml) hold,
and they catch what they are meant to catch.

lint-imports runs, as in ``make lint``, on a copy of the tree shaped like the installed
package (``odradek/`` = ``shared/odradek/*`` + ``services/<name>``): setuptools maps
``odradek.<service>`` onto ``services/<name>``, which import-linter cannot follow in the
source tree. The copies here get one forbidden import injected and must fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = REPO / "pyproject.toml"
SERVICES = (
    "gateway",
    "storage",
    "controller",
    "coordinator",
    "offsets",
    "pipeline",
    "console",
    "mirror",
    "transactions",
)


def lint_imports() -> str:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("lint-imports is not installed (import-linter, in the test extra)")
    return found


def package_tree(root: Path) -> Path:
    """``root/odradek`` laid out like the installed package."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "shared" / "odradek", root / "odradek", ignore=ignore)
    for service in (REPO / "services").iterdir():
        if (service / "__init__.py").exists():
            shutil.copytree(service, root / "odradek" / service.name, ignore=ignore)
    return root


def run_contracts(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [lint_imports(), "--no-cache", "--no-logo", str(PYPROJECT)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def inject(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}  # injected by test_import_contracts\n")


def test_the_real_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = run_contracts(package_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_service_importing_another_service_breaks_the_build(tmp_path: Path) -> None:
    root = package_tree(tmp_path)
    inject(root / "odradek" / "gateway" / "connection.py", "import odradek.storage.partition")
    result = run_contracts(root)
    assert result.returncode != 0
    assert "odradek.gateway is not allowed to import odradek.storage" in result.stdout


def test_a_service_reaching_another_through_the_library_breaks_the_build(tmp_path: Path) -> None:
    root = package_tree(tmp_path)
    inject(root / "odradek" / "metadata_cache.py", "import odradek.offsets.store")
    result = run_contracts(root)
    assert result.returncode != 0
    assert "The shared library never imports a service BROKEN" in " ".join(result.stdout.split())


@pytest.mark.parametrize(
    ("module", "line", "forbidden"),
    [
        ("records/varint.py", "import asyncio", "odradek.records is not allowed to import asyncio"),
        ("protocol/framing.py", "import grpc", "odradek.protocol is not allowed to import grpc"),
        ("log/segment.py", "import odradek.rpc.channel", "odradek.log is not allowed to import"),
    ],
)
def test_io_in_the_pure_codecs_breaks_the_build(
    tmp_path: Path, module: str, line: str, forbidden: str
) -> None:
    root = package_tree(tmp_path)
    inject(root / "odradek" / module, line)
    result = run_contracts(root)
    assert result.returncode != 0
    assert forbidden in result.stdout


def test_contracts_name_every_service_and_every_library_module() -> None:
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    contracts = {c["id"]: c for c in config["contracts"]}
    services = {p.name for p in (REPO / "services").iterdir() if (p / "__init__.py").exists()}
    assert services == set(SERVICES)
    assert set(contracts["services-independent"]["modules"]) == {f"odradek.{s}" for s in services}
    library = {
        f"odradek.{p.stem}"
        for p in (REPO / "shared" / "odradek").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert set(contracts["library-below-services"]["source_modules"]) == library
    assert set(contracts["library-below-services"]["forbidden_modules"]) == {
        f"odradek.{s}" for s in services
    }
