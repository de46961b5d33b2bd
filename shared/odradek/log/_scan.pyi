from odradek.records.header import Buffer

def scan(
    buf: Buffer,
    start: int,
    stop: int,
    count: int,
    base_timestamp: int,
    compacted: bool,
    check_ts: bool,
    low: int,
    high: int,
    /,
) -> tuple[int, int] | None: ...
