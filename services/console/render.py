"""How record keys, values and headers are shown: text, pretty JSON or hex (pure).

``auto`` picks JSON when the bytes parse as JSON, text when they decode as UTF-8
without control characters, hex otherwise, so binary data never garbles a page.
"""

from __future__ import annotations

import json

FORMATS = ("auto", "text", "json", "hex")
MAX_SHOWN = 64 * 1024


def as_hex(data: bytes) -> str:
    lines = []
    for i in range(0, len(data), 16):
        chunk = data[i : i + 16]
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:08x}  {chunk.hex(' '):<47}  {printable}")
    return "\n".join(lines)


def _text(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return None
    return text


def _json(data: bytes) -> str | None:
    text = _text(data)
    if text is None or not text.strip():
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def render(data: bytes | None, fmt: str) -> tuple[str, str]:
    """(shown text, format used); ``None`` data is Kafka's null, shown as ``null``."""
    if data is None:
        return "null", "null"
    clipped = data[:MAX_SHOWN]
    suffix = f"\n… ({len(data) - MAX_SHOWN} more bytes)" if len(data) > MAX_SHOWN else ""
    if fmt == "hex":
        return as_hex(clipped) + suffix, "hex"
    if fmt in ("json", "auto"):
        pretty = _json(clipped)
        if pretty is not None:
            return pretty + suffix, "json"
        if fmt == "json":
            # Asked for JSON but it is not: say so rather than hide the data.
            text = _text(clipped)
            return (text if text is not None else as_hex(clipped)) + suffix, (
                "text (not JSON)" if text is not None else "hex (not JSON)"
            )
    text = _text(clipped)
    if text is not None:
        return text + suffix, "text"
    return as_hex(clipped) + suffix, "hex"


def parse_headers(lines: str) -> list[tuple[str, bytes | None]]:
    """Headers typed one per line as ``name=value`` (or ``name:value``)."""
    out: list[tuple[str, bytes | None]] = []
    for raw in lines.splitlines():
        line = raw.strip()
        if not line:
            continue
        sep = "=" if "=" in line else ":"
        name, found, value = line.partition(sep)
        if not found or not name.strip():
            raise ValueError(f"Invalid header {line!r}: expected name=value")
        out.append((name.strip(), value.strip().encode()))
    return out


def human_bytes(n: float | None) -> str:
    if n is None:
        return "\u2013"  # en dash: no value
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value = float(n)
    for unit in units:
        if abs(value) < 1024 or unit == units[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def human_rate(n: float | None, unit: str = "/s") -> str:
    if n is None:
        return "\u2013"  # en dash: no value
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M{unit}"
    if n >= 1000:
        return f"{n / 1000:.1f}k{unit}"
    return f"{n:.1f}{unit}" if n and n < 10 else f"{n:.0f}{unit}"
