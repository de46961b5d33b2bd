"""Spark jobs built on the odradek source and sink (``python -m odradek.pipeline.jobs.<name>``)."""
