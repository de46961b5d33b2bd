"""Receive buffers that are not zeroed first (issue 18).

``bytearray(n)`` writes n zero bytes before the socket overwrites them all: for the
buffer of a 3 MB data link Fetch answer, or the read buffers of the Kafka framing, that
``memset`` was 5.5% of a gateway's CPU on a consume run (``perf``), more than the
Python code of the Fetch path. :func:`receive_buffer` asks CPython for a bytearray of
that size without initialising it (``PyByteArray_FromStringAndSize(NULL, n)``, a
public C API call). Its bytes are whatever the allocator had there, so a caller must
only ever read the part the socket has filled: the frame readers
(:mod:`odradek.datalink.frame`, :mod:`odradek.protocol.framing`) expose a buffer only
up to the bytes received. Small buffers, and interpreters other than CPython, get a
plain ``bytearray``.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

# Below this, the foreign call costs more than zeroing the bytes.
UNZEROED_FROM_BYTES = 64 * 1024


def _unzeroed_allocator() -> Callable[[None, int], bytearray] | None:
    if sys.implementation.name != "cpython":
        return None
    try:
        new = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:
        return None
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    return new  # type: ignore[no-any-return]


_UNZEROED = _unzeroed_allocator()


def receive_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes for a socket to fill; contents undefined."""
    if size >= UNZEROED_FROM_BYTES and _UNZEROED is not None:
        return _UNZEROED(None, size)
    return bytearray(size)
