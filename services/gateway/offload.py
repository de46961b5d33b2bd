"""The gateway's legacy record conversions off its event loop (:mod:`odradek.offload`).

Up-conversion of legacy produce message sets (Produce v0-2) and down-conversion for
old fetchers (Fetch v0-3) decompress and rebuild every record; large inputs run in a
worker thread, bounded, and every conversion decompresses at most
:data:`LEGACY_CONVERSION_MAX_BYTES` per batch (beyond it: CORRUPT_MESSAGE for a
produce, UNSUPPORTED/empty for a fetch, as a bounded broker must).
"""

from __future__ import annotations

from odradek.offload import OFFLOAD_MIN_BYTES, run_heavy

__all__ = ["LEGACY_CONVERSION_MAX_BYTES", "OFFLOAD_MIN_BYTES", "run_heavy"]

LEGACY_CONVERSION_MAX_BYTES = 64 * 1024 * 1024
