"""The service shell's malloc settings (odradek.malloc_tuning): MiB-sized buffers
allocated and freed together reuse heap pages instead of being faulted in anew.

Each case runs in a fresh interpreter (malloc settings are process-wide): three 1 MiB
buffers alive at once, then freed, fifty times — the pattern of a request, its answer
and its ciphertext — counting minor page faults per round.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

ROUNDS = """
import resource, sys
from odradek.malloc_tuning import tune_malloc
tuned = tune_malloc() if sys.argv[1] == "tuned" else False
def faults(): return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    held = [bytearray(1 << 20) for _ in range(3)]; del held
start = faults()
for _ in range(50):
    held = [bytearray(1 << 20) for _ in range(3)]; del held
print(tuned, (faults() - start) / 50)
"""

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


def faults_per_round(mode: str, **env: str) -> tuple[bool, float]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**clean, **env},
        timeout=60,
    ).stdout.split()
    return out[0] == "True", float(out[1])


@glibc
def test_tuned_process_reuses_heap_pages() -> None:
    tuned, faults = faults_per_round("tuned")
    assert tuned
    assert faults < 16  # a MiB is 256 pages: buffers are not faulted in again


@glibc
def test_glibc_defaults_fault_every_buffer_in() -> None:
    """What the tuning is for: with glibc's defaults each round faults in most pages."""
    tuned, faults = faults_per_round("default")
    assert not tuned
    assert faults > 256


@glibc
def test_an_environment_setting_is_left_alone() -> None:
    tuned, _ = faults_per_round("tuned", MALLOC_TRIM_THRESHOLD_="1048576")
    assert not tuned
