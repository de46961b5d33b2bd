"""``python -m bench [name ...]``: run the benchmark modules and print their reports.

Each ``bench/bench_<name>.py`` exposes ``main(argv)``; with no names, all run in turn.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def available() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        m.name[len("bench_") :]
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("bench_")
    )


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")] or available()
    extra = [a for a in argv if a.startswith("-")]
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(
            f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available())}",
            file=sys.stderr,
        )
        return 2
    for name in names:
        print(f"==== bench {name} ====", flush=True)
        start = time.perf_counter()
        importlib.import_module(f"bench.bench_{name}").main(extra)
        print(f"==== {name} done in {time.perf_counter() - start:.1f}s ====\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
