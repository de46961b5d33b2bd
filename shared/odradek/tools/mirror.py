"""``odradek mirror``: copy topics from source clusters into a target cluster, in the foreground.

    odradek mirror --source HOST:PORT --target HOST:PORT [--topics REGEX] [--topics-exclude REGEX]
                   [--policy identity|alias] [--source-alias A] [--target-alias B]
    odradek mirror --config mirror.properties [--set name=value ...]

The flags describe one flow ``source->target`` (identity policy unless ``--policy
alias``: ``<source-alias>.<topic>``); a ``--config`` file (MirrorMaker 2's
``connect-mirror-maker.properties`` names, see docs/mirror.md) describes any number of
sources, per-cluster security settings and the rest. Both can be combined: flags and
``--set`` override the file. The mirror runs as ``python -m odradek.mirror``.
"""

from __future__ import annotations

import argparse
import os
import sys

from odradek.tools.common import add_settings_argument


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "mirror",
        help="mirror topics from source clusters into a target cluster (MirrorMaker 2 style)",
        description="Mirror topics from one or more source clusters into a target cluster.",
    )
    p.add_argument("--config", default=None, help="MM2-style properties or YAML file")
    p.add_argument("--source", default=None, metavar="BOOTSTRAP", help="source bootstrap servers")
    p.add_argument("--target", default=None, metavar="BOOTSTRAP", help="target bootstrap servers")
    p.add_argument("--source-alias", default="source", help="the source's alias (default source)")
    p.add_argument("--target-alias", default="target", help="the target's alias (default target)")
    p.add_argument("--topics", default=None, metavar="REGEX", help="topics to mirror (default .*)")
    p.add_argument("--topics-exclude", default=None, metavar="REGEX", help="topics to leave out")
    p.add_argument(
        "--policy",
        choices=("identity", "alias"),
        default=None,
        help="target topic names: identity (same name, the default with --source) or "
        "alias (<source-alias>.<topic>, for mirroring both ways)",
    )
    p.add_argument("--group-id", default=None, help="mirror.group.id: instances sharing the work")
    p.add_argument("--metrics-port", type=int, default=None, help="port of /metrics (default any)")
    add_settings_argument(
        p, "any mirror setting, e.g. target.security.protocol=SASL_SSL (repeatable)"
    )
    p.set_defaults(func=run)


def settings_from_flags(args: argparse.Namespace) -> list[str]:
    """The ``--set`` items the flags stand for."""
    out: list[str] = []
    if args.source or args.target:
        if not (args.source and args.target):
            raise SystemExit("odradek mirror: --source and --target go together")
        src, tgt = args.source_alias, args.target_alias
        if src == tgt:
            raise SystemExit("odradek mirror: --source-alias and --target-alias must differ")
        out += [
            f"clusters={src},{tgt}",
            f"{src}.bootstrap.servers={args.source}",
            f"{tgt}.bootstrap.servers={args.target}",
            f"{src}->{tgt}.enabled=true",
            f"replication.policy.class={args.policy or 'identity'}",
        ]
    elif args.policy:
        out.append(f"replication.policy.class={args.policy}")
    if args.topics:
        out.append(f"topics={args.topics}")
    if args.topics_exclude:
        out.append(f"topics.exclude={args.topics_exclude}")
    if args.group_id:
        out.append(f"mirror.group.id={args.group_id}")
    if args.metrics_port is not None:
        out.append(f"metrics.listener=0.0.0.0:{args.metrics_port}")
    return out


def command(args: argparse.Namespace) -> list[str]:
    if not args.config and not args.source:
        raise SystemExit("odradek mirror: give --source and --target, or --config FILE")
    cmd = [sys.executable, "-m", "odradek.mirror"]
    if args.config:
        cmd += ["--config", str(args.config)]
    for item in settings_from_flags(args) + list(args.settings):
        cmd += ["--set", item]
    return cmd


def run(args: argparse.Namespace) -> int:
    cmd = command(args)
    os.execv(cmd[0], cmd)
    return 0  # pragma: no cover - execv does not return
