"""The ``odradek`` command: one argparse parser, one subcommand per tool module.

Each module in :data:`COMMANDS` provides ``register(subparsers)``, which adds its
subcommand and sets ``func`` (taking the parsed ``argparse.Namespace``, returning an
exit code). Adding a command is adding its module name to the list.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS: list[str] = [
    "odradek.tools.up",
    "odradek.tools.dump_log",
    "odradek.tools.topics",
    "odradek.tools.produce",
    "odradek.tools.consume",
    "odradek.tools.groups",
    "odradek.tools.console",
    "odradek.tools.reassign",
    "odradek.tools.cluster",
    "odradek.tools.mirror",
    "odradek.tools.certs",
    "odradek.tools.users",
    "odradek.tools.acls",
    "odradek.tools.quotas",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="odradek", description="Odradek, a Kafka-compatible distributed commit log."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
