"""glibc malloc settings for a serving process: large buffers come from a heap that
keeps its pages, instead of pages the kernel faults in and zeroes for every buffer.

Records cross a service in buffers of up to a few MiB each: a Produce request read in
place (odradek.protocol.framing), a Fetch answer off the storage data link, and on a
TLS listener the ciphertext of each response, which uvloop's SSL transport reads out
of its memory BIO into one new bytes object per write. glibc serves sizes above
``M_MMAP_THRESHOLD`` (128 KiB, raised on the fly up to the largest mapping freed) with
``mmap``, and hands the top of the heap back to the kernel as soon as more than
``M_TRIM_THRESHOLD`` (twice that) is free there, which a few MiB-sized buffers freed
together always are. Every buffer then costs a page fault and a zeroed page per 4 KiB:
240 minor faults per MB sent on a SASL_SSL consume, every page of every response, and
0.5-1 gateway CPU-s per GB (docs/security.md, "Throughput").

So, at start, :data:`MMAP_THRESHOLD` (buffers below it come from the heap) and
:data:`TRIM_THRESHOLD` (up to that much free heap top is kept for the next buffers):
a process keeps the memory of its busiest moment (up to that much) instead of asking
for it again. Setting them also stops glibc's own adjusting of both. An environment
that sets glibc's tunables (``GLIBC_TUNABLES``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_MMAP_THRESHOLD_``) is left as it is; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

log = logging.getLogger(__name__)

# mallopt(3) parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 8 << 20
TRIM_THRESHOLD = 64 << 20
_OVERRIDES = ("GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


def tune_malloc() -> bool:
    """Apply :data:`MMAP_THRESHOLD` and :data:`TRIM_THRESHOLD`; whether they were."""
    if platform.libc_ver()[0] != "glibc" or any(os.environ.get(v) for v in _OVERRIDES):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    done = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and done
    if not done:
        log.warning("mallopt refused the malloc thresholds; glibc's defaults stay")
    return done
