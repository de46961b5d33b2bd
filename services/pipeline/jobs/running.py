"""Running a job's streaming query in the foreground until it ends or is interrupted."""

from __future__ import annotations

from pyspark.sql.streaming import StreamingQuery


def run_until_stopped(query: StreamingQuery, checkpoint: str) -> int:
    """Wait for ``query``; Ctrl-C stops it cleanly (its checkpoint keeps its progress)."""
    print(f"query {query.id} (run {query.runId}) started from {checkpoint}", flush=True)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    return 0
