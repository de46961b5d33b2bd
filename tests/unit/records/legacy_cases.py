"""The legacy (magic 0/1) codec cases that kafka-python can build here, for interop tests
of message sets in both directions (read as-is, and converted)."""

import kafka.codec as kp_codec
import pytest

from odradek.records import Compression

# zstd needs magic 2: it never appears in a legacy message set.
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


def legacy_param(codec: Compression, magic: int) -> object:
    """One (codec, magic) case, skipped where kafka-python lacks the codec's library."""
    marks = []
    if codec == Compression.SNAPPY and not kp_codec.has_snappy():
        marks.append(pytest.mark.skip(reason="kafka-python needs python-snappy"))
    if codec == Compression.LZ4 and magic == 0 and kp_codec.xxhash is None:
        marks.append(pytest.mark.skip(reason="kafka-python needs xxhash for magic-0 lz4"))
    return pytest.param(codec, magic, marks=marks, id=f"{codec.name}-v{magic}")


LEGACY_CASES = [legacy_param(c, m) for m in (0, 1) for c in LEGACY_CODECS]
