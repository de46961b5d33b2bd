"""``odradek cluster rebalance`` and ``odradek cluster decommission --node N``.

What a user needs when the data outgrows its storage nodes, or one must go:

* ``rebalance`` spreads replicas evenly over every broker (storage node), in count and
  in bytes, moving as few replicas as :mod:`odradek.tools.balance` finds, then moves
  preferred leadership back to the first replicas (ElectLeaders) so leaders spread too.
  Run it after adding storage nodes: they start empty and this fills them.
* ``decommission --node N`` moves every replica off broker N (to the brokers the move
  loads least) and, once done, confirms that N holds nothing so it can be removed.
  ``--check`` only answers whether N holds replicas (exit 0 when it holds none).
* ``scale-down-check --storage-nodes N`` answers whether a storage StatefulSet may
  shrink to N pods: the nodes it would remove (ids from ``--first-id`` + N up) must
  hold no replicas. The Helm chart runs it before every upgrade; ``rebalance
  --expect-brokers N --only-if-empty-brokers`` after one (new, empty nodes get filled).

Both print the plan (per broker: replicas, MB, preferred leaderships, before and after),
start the reassignments (``--throttle B/s`` as kafka-reassign-partitions.sh sets it,
cleared at the end), and print a progress line every ``--progress-interval-ms`` while
data moves. ``--dry-run`` prints the plan and the reassignment JSON (usable with
``odradek reassign --execute``) and changes nothing. The tool is a plain kafka-python
admin client (DescribeLogDirs gives the partition sizes).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from kafka import KafkaAdminClient

from odradek.tools.balance import PartitionLoad, plan, spread
from odradek.tools.common import (
    ToolError,
    add_connection_arguments,
    connect,
    connection_config,
    mb,
    run_tool,
)
from odradek.tools.reassign_admin import MoveProgress, ReassignAdmin, wait_for
from odradek.tools.reassign_files import format_reassignment, move_map, tp_name

PREFIX = "Error: "
DEFAULT_PROGRESS_INTERVAL_MS = 5000

TP = tuple[str, int]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "cluster",
        help="rebalance storage nodes, or drain one before removing it",
        description="Spread partitions and bytes evenly over the storage nodes, or move "
        "everything off one node so it can be removed.",
    )
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)
    rebalance = actions.add_parser(
        "rebalance", help="even out replicas and bytes over every storage node"
    )
    _common(rebalance)
    rebalance.add_argument(
        "--max-moves", type=int, default=None, metavar="N", help="move at most N replicas"
    )
    rebalance.add_argument(
        "--expect-brokers",
        type=int,
        default=0,
        metavar="N",
        help="first wait (up to --broker-wait-ms) until N brokers are online",
    )
    rebalance.add_argument(
        "--broker-wait-ms", type=int, default=600_000, metavar="MS", help="default 600000"
    )
    rebalance.add_argument(
        "--only-if-empty-brokers",
        action="store_true",
        help="do nothing unless some online broker holds no replicas (new nodes)",
    )
    rebalance.set_defaults(func=lambda a: run_tool(_rebalance, a, PREFIX))

    check = actions.add_parser(
        "scale-down-check",
        help="may the storage nodes shrink to N? (the removed ones must hold no replicas)",
    )
    add_connection_arguments(check)
    check.add_argument("--storage-nodes", type=int, required=True, metavar="N")
    check.add_argument(
        "--first-id", type=int, default=100, metavar="ID", help="id of the first node (100)"
    )
    check.set_defaults(func=lambda a: run_tool(_scale_down_check, a, PREFIX))

    decommission = actions.add_parser(
        "decommission", help="move every replica off one storage node before removing it"
    )
    _common(decommission)
    decommission.add_argument("--node", type=int, required=True, metavar="ID", help="broker id")
    decommission.add_argument(
        "--check",
        action="store_true",
        help="only check: exit 0 when the node holds no replicas, 1 when it does",
    )
    decommission.set_defaults(func=lambda a: run_tool(_decommission, a, PREFIX))


def _common(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p)
    p.add_argument(
        "--throttle", type=int, default=-1, metavar="B/s", help="replication throttle while moving"
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument(
        "--no-wait", action="store_true", help="start the moves and return (follow with reassign)"
    )
    p.add_argument(
        "--progress-interval-ms",
        type=int,
        default=DEFAULT_PROGRESS_INTERVAL_MS,
        metavar="MS",
        help=f"how often to print progress (default {DEFAULT_PROGRESS_INTERVAL_MS})",
    )


def _admin(args: argparse.Namespace) -> KafkaAdminClient:
    admin: KafkaAdminClient = connect(
        KafkaAdminClient, args, connection_config(args, "odradek-cluster")
    )
    return admin


def _rebalance(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    admin = _admin(args)
    try:
        ops = ReassignAdmin(admin)
        brokers = _wait_for_brokers(ops, args.expect_brokers, args.broker_wait_ms, out)
        if args.only_if_empty_brokers:
            holding = {b for r in ops.assignment().values() for b in r}
            empty = [b for b in brokers if b not in holding]
            if not empty:
                print("Every broker holds replicas: nothing to fill.", file=out)
                return 0
            print(
                f"Broker(s) {','.join(map(str, empty))} hold no replicas: filling them.", file=out
            )
        return _move(args, ops, brokers, out, "Rebalance", max_moves=args.max_moves)
    finally:
        admin.close()


def _wait_for_brokers(ops: ReassignAdmin, expected: int, wait_ms: int, out: TextIO) -> list[int]:
    deadline = time.monotonic() + wait_ms / 1000.0
    reported = -1
    while True:
        brokers = sorted(ops.brokers())
        if len(brokers) >= expected:
            return brokers
        if len(brokers) != reported:
            print(f"Waiting for {expected} brokers; {len(brokers)} online.", file=out, flush=True)
            reported = len(brokers)
        if time.monotonic() >= deadline:
            raise ToolError(f"Only {len(brokers)} of {expected} brokers came online")
        time.sleep(1.0)


def _scale_down_check(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    admin = _admin(args)
    try:
        ops = ReassignAdmin(admin)
        first_gone = args.first_id + args.storage_nodes
        holders: dict[int, int] = {}
        for replicas in ops.assignment().values():
            for b in replicas:
                if b >= first_gone:
                    holders[b] = holders.get(b, 0) + 1
        if holders:
            for b, n in sorted(holders.items()):
                print(
                    f"Storage node {b} holds {n} replica(s): drain it first with "
                    f"odradek cluster decommission --node {b}",
                    file=out,
                )
            return 1
        print(
            f"No storage node from id {first_gone} on holds replicas: "
            f"{args.storage_nodes} storage node(s) can keep the data.",
            file=out,
        )
        return 0
    finally:
        admin.close()


def _decommission(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    admin = _admin(args)
    try:
        ops = ReassignAdmin(admin)
        node = args.node
        live = sorted(ops.brokers())
        held = _held_by(ops.assignment(), node)
        if args.check:
            if held:
                print(
                    f"Node {node} still holds {len(held)} replica(s); drain it first: "
                    f"odradek cluster decommission --node {node}",
                    file=out,
                )
                return 1
            print(f"Node {node} holds no replicas; it can be removed.", file=out)
            return 0
        if node not in live and not held:
            raise ToolError(f"Unknown broker id {node}")
        targets = [b for b in live if b != node]
        if not targets:
            raise ToolError(f"Node {node} is the only broker; nothing can take its replicas")
        code = _move(args, ops, targets, out, "Decommission", only_from=node)
        if code or args.dry_run or args.no_wait:
            return code
        remaining = _held_by(ops.assignment(), node)
        if remaining:
            raise ToolError(f"Node {node} still holds {', '.join(tp_name(tp) for tp in remaining)}")
        print(f"Node {node} holds no replicas; it can be removed.", file=out)
        return 0
    finally:
        admin.close()


def _held_by(assignment: dict[TP, list[int]], node: int) -> list[TP]:
    return sorted(tp for tp, replicas in assignment.items() if node in replicas)


def _move(
    args: argparse.Namespace,
    ops: ReassignAdmin,
    brokers: list[int],
    out: TextIO,
    what: str,
    *,
    max_moves: int | None = None,
    only_from: int | None = None,
) -> int:
    ongoing = ops.ongoing()
    if ongoing:
        raise ToolError(
            "Cannot plan while partition reassignments are running: "
            + ",".join(tp_name(tp) for tp in sorted(ongoing))
            + " (see odradek reassign --list)"
        )
    current = ops.assignment()
    live = set(ops.brokers())
    draining = {only_from} if only_from is not None else set()
    offline = sorted({b for r in current.values() for b in r} - live - draining)
    if offline:
        raise ToolError(
            f"Broker(s) {','.join(map(str, offline))} hold replicas but are not online: bring "
            "them back, or decommission them, before moving data"
        )
    sizes = ops.partition_sizes()
    loads = [
        PartitionLoad(t, p, tuple(replicas), sizes.get((t, p), 0))
        for (t, p), replicas in sorted(current.items())
    ]
    try:
        if only_from is not None:  # a drain moves only what the node holds
            targets = plan(loads, brokers, max_moves=0, leaders="moved")
        else:
            targets = plan(loads, brokers, max_moves=max_moves)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    _print_plan(loads, targets, out)
    if not targets:
        print(f"{what}: nothing to move.", file=out)
        return 0
    adding = sum(len(set(targets[p.tp]) - set(p.replicas)) for p in loads if p.tp in targets)
    nbytes = sum(
        sizes.get(p.tp, 0) * len(set(targets[p.tp]) - set(p.replicas))
        for p in loads
        if p.tp in targets
    )
    print(
        f"{what}: moving {adding} replica(s), {mb(nbytes):.1f} MB, of {len(targets)} partition(s).",
        file=out,
    )
    if args.dry_run:
        print(
            f"Proposed partition reassignment configuration\n{format_reassignment(targets)}",
            file=out,
        )
        return 0
    if args.throttle >= 0:
        ops.set_throttles(move_map({}, targets, current), args.throttle)
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s", file=out)
    errors = ops.alter(targets)
    if errors:
        raise ToolError(
            "Error reassigning partition(s):\n"
            + "\n".join(f"{tp_name(tp)}: {errors[tp]}" for tp in sorted(errors))
        )
    print(f"Started {len(targets)} partition reassignment(s).", file=out)
    if args.no_wait:
        print(
            "Not waiting: follow them with odradek reassign --list"
            + (
                " and clear the throttle with odradek reassign --verify"
                if args.throttle >= 0
                else ""
            ),
            file=out,
        )
        return 0
    before = {tp: current[tp] for tp in targets}
    progress = MoveProgress(ops, targets, before, sizes)
    wait_for(progress, out, interval_s=max(0.05, args.progress_interval_ms / 1000.0))
    ops.elect_preferred(targets)
    if args.throttle >= 0:
        involved = set(brokers) | {b for r in before.values() for b in r}
        ops.clear_throttles(involved & set(ops.brokers()), {t for t, _p in targets})
        print("Cleared the replication throttles.", file=out)
    print(f"{what} complete.", file=out)
    return 0


def _print_plan(loads: list[PartitionLoad], targets: dict[TP, list[int]], out: TextIO) -> None:
    before = spread(loads, {})
    after = spread(loads, targets)
    print("Broker   replicas (before -> after)   MB (before -> after)   leaders", file=out)
    for broker in sorted(set(before) | set(after)):
        b = before.get(broker, (0, 0, 0))
        a = after.get(broker, (0, 0, 0))
        print(
            f"{broker:<8} {b[0]:>8} -> {a[0]:<8}          {mb(b[1]):>9.1f} -> {mb(a[1]):<9.1f}"
            f"  {b[2]} -> {a[2]}",
            file=out,
        )
