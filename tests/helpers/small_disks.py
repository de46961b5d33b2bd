"""Small real filesystems for disk-full tests: a tmpfs of a given size mounted by the
test (root only), filled to ENOSPC with a filler file and emptied again.

A full tmpfs answers ENOSPC to any write that needs a new page, as a full disk does;
``fsync`` on it always succeeds, so these filesystems test the write path's answer to a
full disk, not the fsync path's (tests/unit/storage/test_storage_disk_errors.py injects
fsync errors).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

FILLER = "odradek-test-filler"


def mount_tmpfs(path: Path, size: str) -> None:
    """Mount a tmpfs of ``size`` (mount's syntax: ``192k``, ``256m``) at ``path``
    (created if missing); raises OSError with mount's message when that is refused."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.CalledProcessError as exc:
        raise OSError(f"mount -t tmpfs at {path}: {exc.stderr.strip()}") from exc


def unmount(path: Path) -> None:
    """Detach the filesystem at ``path`` (lazily: a process still using it keeps it)."""
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True, timeout=30)


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    mount_tmpfs(path, size)
    try:
        yield path
    finally:
        unmount(path)


def unavailable_reason() -> str | None:
    """Why small filesystems cannot be mounted here, or None."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root (CI runs as root)"
    with tempfile.TemporaryDirectory(prefix="odr-tmpfs-probe-") as probe:
        try:
            mount_tmpfs(Path(probe), "64k")
        except (OSError, subprocess.SubprocessError) as exc:
            return f"cannot mount a tmpfs: {exc}"
        unmount(Path(probe))
    return None


def fill(mount: Path) -> Path:
    """Fill the filesystem at ``mount`` until ENOSPC with one filler file; returns it.
    Writes that need a new page fail from then on until :func:`empty` removes it."""
    filler = mount / FILLER
    chunk = bytes(1 << 20)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 1 << 12):  # megabytes first, then the last pages
            while True:
                try:
                    os.write(fd, chunk[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler


def empty(mount: Path) -> None:
    """Remove the filler :func:`fill` wrote, if any."""
    (mount / FILLER).unlink(missing_ok=True)


def usage(mount: Path) -> tuple[int, int]:
    """(used, total) bytes of the filesystem at ``mount``."""
    st = os.statvfs(mount)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize
