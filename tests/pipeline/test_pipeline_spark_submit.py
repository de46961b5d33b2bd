"""The access-log job through ``spark-submit`` on a standalone Spark cluster
(``local-cluster``: a master, two workers and separate executor JVMs on this
machine), with a Python that does not have Odradek installed: the package reaches
the driver and the executors only as the ``--py-files`` zip, as on a real cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from pipeline_kafka import read_all, run_generator

from odradek.pipeline.jobs import access_log
from odradek.pipeline.pyfiles import build
from odradek.tools.launcher import Cluster


def bare_python(tmp: Path) -> str:
    """A venv that sees this venv's third-party packages but not Odradek (an
    editable install needs its own .pth processing, which a plain path entry skips)."""
    env_dir = tmp / "bare"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    check = subprocess.run([str(py), "-c", "import odradek"], capture_output=True, timeout=60)
    assert check.returncode != 0, "the bare interpreter must not import odradek by itself"
    return str(py)


@pytest.mark.slow
@pytest.mark.timeout(900)  # spark-submit has 600 s of its own; a loaded machine needs ~250 s
def test_access_log_job_on_a_standalone_cluster_with_py_files(
    cluster: Cluster, unique_topic: str, tmp_path: Path
) -> None:
    bs = cluster.bootstrap_servers
    run_generator(
        bs,
        unique_topic,
        *("--rate", "0", "--count", "6000"),
        *("--start-time", "2024-05-01T12:00:00+00:00", "--log-rate", "20"),
    )
    py = bare_python(tmp_path)
    zip_path = tmp_path / "odradek_pipeline.zip"
    build(zip_path)
    summary = f"{unique_topic}-summary"
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": py,
        "PYSPARK_DRIVER_PYTHON": py,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # PySpark 4.x starts the streaming source's driver-side Python process
        # without --py-files on its path: it finds the zip through PYTHONPATH.
        "PYTHONPATH": str(zip_path),
    }
    job = Path(access_log.__file__)
    res = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local-cluster[2,1,1024]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            # Executors must not see the zip any other way than through --py-files.
            "--conf",
            "spark.executorEnv.PYTHONPATH=/nonexistent",
            "--py-files",
            str(zip_path),
            str(job),
            "--bootstrap-server",
            bs,
            "--topic",
            unique_topic,
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--output",
            str(tmp_path / "out"),
            "--summary-topic",
            summary,
            "--trigger-available-now",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert "minute summaries" in res.stdout
    batches = sorted(
        p.name for p in (tmp_path / "out" / access_log.COUNTS_TABLE).glob("batch_id=*")
    )
    assert batches and all(
        (tmp_path / "out" / access_log.COUNTS_TABLE / b / "_SUCCESS").exists() for b in batches
    )

    keys = [(r.key or b"").decode() for r in read_all(bs, summary, 1)]
    # 6000 lines at 20/s: minutes 12:00-12:04, of which 12:00-12:02 are past the watermark.
    assert keys == [f"2024-05-01T12:0{m}:00Z" for m in range(3)]
