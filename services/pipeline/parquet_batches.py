"""One Parquet directory per streaming micro-batch, published by an atomic rename.

Layout under ``root``:

    root/batch_id=0/part-*.parquet, _SUCCESS     batch 0's rows, complete
    root/batch_id=1/...
    root/_staging/batch_id=<n>/...               a batch being written (hidden from
                                                 Spark readers by the leading "_")

Readers load ``root`` as one table (``batch_id`` becomes a partition column).

Invariants: ``batch_id=<n>`` appears only complete (written under ``_staging``,
then renamed, which is atomic on HDFS and local file systems) and holds exactly
the rows of micro-batch ``n``. A replayed batch finds its directory already there
and leaves it alone (the replay computes the same rows); a crash while writing
leaves only a staging directory, which the next attempt overwrites. Object stores
without atomic rename need Spark's committers instead.

Paths go through Hadoop's FileSystem API (on the JVM), so any file system Spark
can write to works.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

STAGING = "_staging"


class ParquetBatches:
    def __init__(self, spark: SparkSession, root: str) -> None:
        self.root = root.rstrip("/")
        jvm: Any = spark._jvm  # Hadoop's FileSystem lives on the JVM
        self._Path = jvm.org.apache.hadoop.fs.Path
        conf = spark._jsc.hadoopConfiguration()
        self._fs = self._Path(self.root).getFileSystem(conf)

    def final_path(self, batch_id: int) -> str:
        return f"{self.root}/batch_id={batch_id}"

    def staging_path(self, batch_id: int) -> str:
        return f"{self.root}/{STAGING}/batch_id={batch_id}"

    def exists(self, batch_id: int) -> bool:
        return bool(self._fs.exists(self._Path(self.final_path(batch_id))))

    def write(self, batch_id: int, df: DataFrame) -> bool:
        """Write ``df`` as batch ``batch_id`` unless it is already there; True if written."""
        if self.exists(batch_id):
            return False
        staging = self.staging_path(batch_id)
        df.write.mode("overwrite").parquet(staging)
        self._fs.mkdirs(self._Path(self.root))
        if not self._fs.rename(self._Path(staging), self._Path(self.final_path(batch_id))):
            raise OSError(f"could not rename {staging} to {self.final_path(batch_id)}")
        return True
