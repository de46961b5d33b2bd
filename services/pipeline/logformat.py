"""nginx's ``combined`` access-log format: formatting (generator) and parsing.

    log_format combined '$remote_addr - $remote_user [$time_local] '
                        '"$request" $status $body_bytes_sent '
                        '"$http_referer" "$http_user_agent"';

e.g. ``203.0.113.7 - - [11/Oct/2019:20:07:31 +0800] "GET /api/v1/items?page=2
HTTP/1.1" 200 5316 "-" "Mozilla/5.0 ..."``. nginx writes a quote inside a field as
``\\x22``, so a quoted field never contains ``"``.

``COMBINED_REGEX`` and ``PATH_REGEX`` are valid in both Python's ``re`` and Java's
``Pattern``, so the Spark job (``regexp_extract``) and this module parse a line the
same way. Pure code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# Groups: 1 remote_addr, 2 remote_user, 3 time_local, 4 request, 5 status,
# 6 body_bytes_sent, 7 http_referer, 8 http_user_agent.
COMBINED_REGEX = r'^(\S+) \S+ (\S+) \[([^\]]+)\] "([^"]*)" (\d{3}) (\d+|-) "([^"]*)" "([^"]*)"'
# The path of "$request" ("METHOD URI PROTOCOL"), without query string or fragment.
PATH_REGEX = r"^\S+ ([^ ?#]+)"
TIME_LOCAL_FORMAT = "%d/%b/%Y:%H:%M:%S %z"
# The same layout in Spark's datetime pattern language.
TIME_LOCAL_SPARK_PATTERN = "dd/MMM/yyyy:HH:mm:ss Z"
NO_PATH = "-"

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_COMBINED = re.compile(COMBINED_REGEX)
_PATH = re.compile(PATH_REGEX)


@dataclass(frozen=True)
class AccessLogEntry:
    remote_addr: str
    time: datetime  # timezone-aware
    method: str
    uri: str
    status: int
    body_bytes_sent: int
    referer: str = "-"
    user_agent: str = "-"
    remote_user: str = "-"
    protocol: str = "HTTP/1.1"


def format_time_local(t: datetime) -> str:
    # Month names by hand: strftime's %b follows the C locale of the machine.
    off = t.utcoffset() or timedelta(0)
    sign = "-" if off < timedelta(0) else "+"
    minutes = abs(int(off.total_seconds())) // 60
    return (
        f"{t.day:02d}/{_MONTHS[t.month - 1]}/{t.year:04d}:{t.hour:02d}:{t.minute:02d}:"
        f"{t.second:02d} {sign}{minutes // 60:02d}{minutes % 60:02d}"
    )


def _field(text: str) -> str:
    return text.replace('"', "\\x22") if text else "-"


def format_line(e: AccessLogEntry) -> str:
    return (
        f"{e.remote_addr} - {e.remote_user or '-'} [{format_time_local(e.time)}] "
        f'"{_field(f"{e.method} {e.uri} {e.protocol}")}" {e.status} {e.body_bytes_sent} '
        f'"{_field(e.referer)}" "{_field(e.user_agent)}"'
    )


@dataclass(frozen=True)
class ParsedLine:
    client: str
    user: str
    time: datetime
    request: str
    path: str
    status: int
    body_bytes_sent: int
    referer: str
    user_agent: str

    @property
    def minute(self) -> datetime:
        """Start of the line's minute, in UTC (the job's aggregation window)."""
        t = self.time.astimezone(UTC)
        return t.replace(second=0, microsecond=0)


def request_path(request: str) -> str:
    m = _PATH.match(request)
    return m.group(1) if m else NO_PATH


def parse_line(line: str) -> ParsedLine | None:
    """The fields of one combined-format line, or ``None`` if it is not one."""
    m = _COMBINED.match(line)
    if m is None:
        return None
    try:
        t = datetime.strptime(m.group(3), TIME_LOCAL_FORMAT)
    except ValueError:
        return None
    size = m.group(6)
    return ParsedLine(
        client=m.group(1),
        user=m.group(2),
        time=t,
        request=m.group(4),
        path=request_path(m.group(4)),
        status=int(m.group(5)),
        body_bytes_sent=0 if size == "-" else int(size),
        referer=m.group(7),
        user_agent=m.group(8),
    )
