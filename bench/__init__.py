"""Benchmarks (``make bench``): not tests. Each module reports ratios measured in one run."""
