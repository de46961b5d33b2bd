"""Odradek's data pipeline on Spark: the ``odradek`` source/sink format and jobs.

``register(spark)`` makes ``spark.read.format("odradek")`` (and ``readStream``,
``write``, ``writeStream``) available. PySpark is imported only when needed, so the
generator and other tools run without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "odradek"


def register(spark: SparkSession) -> None:
    """Register the ``odradek`` data source with ``spark`` (idempotent)."""
    from odradek.pipeline.datasource import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)


__all__ = ["FORMAT", "register"]
