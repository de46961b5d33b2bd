"""``odradek reassign``: move partition replicas between brokers, like kafka-reassign-partitions.sh.

One action per run, with Kafka's options, JSON files and output:

* ``--generate --topics-to-move-json-file F --broker-list 1,2,3`` prints the current
  assignment of those topics and a proposed one over the listed brokers (Kafka's
  rack-unaware placement);
* ``--execute --reassignment-json-file F [--throttle B/s]
  [--replica-alter-log-dirs-throttle B/s] [--additional]`` prints the current
  assignment (save it for a rollback), sets the throttles as Kafka's tool does (the
  rates on every broker involved, the throttled replica lists on every topic moved),
  starts the reassignments and any log-directory moves the file's ``log_dirs`` ask for;
* ``--verify --reassignment-json-file F [--preserve-throttles]`` prints each
  partition's status and, once nothing is moving, clears the throttles;
* ``--cancel --reassignment-json-file F [--preserve-throttles]`` reverts the ones
  still running;
* ``--list`` prints every ongoing reassignment with its adding and removing replicas.

Odradek's addition: ``--wait`` (with ``--execute`` or ``--verify``) stays until the data
has moved, printing a progress line every ``--progress-interval-ms`` (partitions done,
MB copied of MB to copy, copy rate), then verifies (clearing the throttles unless
``--preserve-throttles``). The tool is a plain kafka-python admin client.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from kafka import KafkaAdminClient

from odradek.replica_placement import assign_replicas
from odradek.tools.common import (
    ToolError,
    UsageError,
    add_connection_arguments,
    connect,
    connection_config,
    run_tool,
)
from odradek.tools.reassign_admin import MoveProgress, ReassignAdmin, wait_for
from odradek.tools.reassign_files import (
    ReassignFileError,
    Reassignment,
    check_for_execute,
    format_reassignment,
    move_map,
    parse_broker_list,
    parse_reassignment,
    parse_topics,
    replica_name,
    tp_name,
)

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# options -> the actions that accept them (Kafka's ReassignPartitionsCommand checks)
OPTION_ACTIONS = {
    "topics_to_move_json_file": ("generate",),
    "broker_list": ("generate",),
    "disable_rack_aware": ("generate",),
    "reassignment_json_file": ("execute", "verify", "cancel"),
    "throttle": ("execute",),
    "replica_alter_log_dirs_throttle": ("execute",),
    "additional": ("execute",),
    "preserve_throttles": ("verify", "cancel", "execute"),
    "wait": ("execute", "verify"),
}
EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional "
    "to override this and create a new partition assignment in addition to the existing "
    "one. The --additional flag can also be used to change the throttle by resubmitting "
    "the current reassignment."
)
VERIFY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed."
)
DEFAULT_PROGRESS_INTERVAL_MS = 5000


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "reassign",
        help="move partition replicas between brokers (like kafka-reassign-partitions.sh)",
        description="Generate, execute, verify, cancel and list partition reassignments "
        "with kafka-reassign-partitions.sh's options, JSON files and output.",
    )
    add_connection_arguments(p)
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true", help=f"the {action} action")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="(--generate) topics")
    p.add_argument("--broker-list", metavar="IDS", help="(--generate) e.g. 100,101,102")
    p.add_argument("--disable-rack-aware", action="store_true", help="(--generate) accepted")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="the reassignment JSON")
    p.add_argument("--throttle", type=int, default=-1, metavar="B/s", help="inter-broker throttle")
    p.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        default=-1,
        metavar="B/s",
        help="throttle of moves between log directories of one broker",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=10_000,
        metavar="MS",
        help="how long to wait for log directory moves to start (default 10000)",
    )
    p.add_argument("--additional", action="store_true", help="execute beside running ones")
    p.add_argument("--preserve-throttles", action="store_true", help="leave throttles as they are")
    p.add_argument(
        "--wait",
        action="store_true",
        help="stay until the data has moved, printing progress, then verify",
    )
    p.add_argument(
        "--progress-interval-ms",
        type=int,
        default=DEFAULT_PROGRESS_INTERVAL_MS,
        metavar="MS",
        help=f"with --wait: how often to print progress (default {DEFAULT_PROGRESS_INTERVAL_MS})",
    )
    p.set_defaults(func=lambda a: run_tool(_run, a, ""))


def _action(args: argparse.Namespace) -> str:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError(
            "Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS)
        )
    action = chosen[0]
    defaults = {"throttle": -1, "replica_alter_log_dirs_throttle": -1}
    for option, actions in OPTION_ACTIONS.items():
        value = getattr(args, option)
        if value not in (None, False, defaults.get(option, None)) and action not in actions:
            flag = "--" + option.replace("_", "-")
            raise UsageError(f'Option "{flag}" can\'t be used with action "--{action}"')
    return action


def _read(path: str | None, option: str) -> str:
    if not path:
        raise UsageError(f'Missing required argument "[{option}]"')
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror or exc}") from None


def _run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    action = _action(args)
    admin: KafkaAdminClient = connect(
        KafkaAdminClient, args, connection_config(args, "odradek-reassign")
    )
    try:
        ops = ReassignAdmin(admin)
        try:
            if action == "generate":
                return _generate(args, ops, out)
            if action == "execute":
                return _execute(args, ops, out)
            if action == "verify":
                return _verify(args, ops, out)
            if action == "cancel":
                return _cancel(args, ops, out)
            return _list(ops, out)
        except ReassignFileError as exc:
            raise ToolError(str(exc)) from None
    finally:
        admin.close()


def _generate(args: argparse.Namespace, ops: ReassignAdmin, out: TextIO) -> int:
    topics = parse_topics(_read(args.topics_to_move_json_file, "topics-to-move-json-file"))
    if not args.broker_list:
        raise UsageError('Missing required argument "[broker-list]"')
    wanted = parse_broker_list(args.broker_list)
    current = ops.assignment(topics)
    brokers = [b for b in wanted if b in ops.brokers()]
    proposed: dict[tuple[str, int], list[int]] = {}
    for topic in sorted({t for t, _p in current}):
        parts = sorted(p for t, p in current if t == topic)
        rf = len(current[(topic, parts[0])])
        try:
            lists = assign_replicas(brokers, len(parts), rf)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        for p, replicas in zip(parts, lists, strict=True):
            proposed[(topic, p)] = replicas
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n", file=out)
    print(
        f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}", file=out
    )
    return 0


def _execute(args: argparse.Namespace, ops: ReassignAdmin, out: TextIO) -> int:
    plan = parse_reassignment(_read(args.reassignment_json_file, "reassignment-json-file"))
    check_for_execute(plan)
    targets = plan.targets
    ongoing = ops.ongoing()
    if ongoing and not args.additional:
        raise ToolError(EXISTING_MESSAGE)
    brokers = ops.brokers()
    for replicas in targets.values():
        for b in replicas:
            if b not in brokers:
                raise ToolError(f"Unknown broker id {b}")
    current = ops.assignment({t for t, _p in targets})
    missing = [tp for tp in targets if tp not in current]
    if missing:
        raise ToolError("Unable to find partition: " + ", ".join(tp_name(tp) for tp in missing))
    before = {tp: current[tp] for tp in targets}
    print(
        "Current partition replica assignment\n\n"
        f"{format_reassignment(before)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback",
        file=out,
    )
    if args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0:
        print(VERIFY_MESSAGE, file=out)
        if args.throttle >= 0:
            moves = move_map(
                {tp: (o.replicas, o.adding) for tp, o in ongoing.items()}, targets, current
            )
            ops.set_throttles(moves, args.throttle)
            print(f"The inter-broker throttle limit was set to {args.throttle} B/s", file=out)
        if args.replica_alter_log_dirs_throttle >= 0:
            ops.set_log_dir_throttle(
                {b for _t, _p, b in plan.log_dirs}, args.replica_alter_log_dirs_throttle
            )
            print(
                "The replica-alter-dir throttle limit was set to "
                f"{args.replica_alter_log_dirs_throttle} B/s",
                file=out,
            )
    sizes = ops.partition_sizes() if args.wait else {}
    errors = ops.alter(targets)
    if errors:
        raise ToolError(
            "Error reassigning partition(s):\n"
            + "\n".join(f"{tp_name(tp)}: {errors[tp]}" for tp in sorted(errors))
        )
    names = ",".join(tp_name(tp) for tp in sorted(targets))
    plural = "" if len(targets) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {names}", file=out)
    if plan.log_dirs:
        _start_moves(ops, plan, args.timeout, out)
    if args.wait:
        return _wait_and_verify(args, ops, plan, before, sizes, out)
    return 0


def _start_moves(ops: ReassignAdmin, plan: Reassignment, timeout_ms: int, out: TextIO) -> None:
    """Kafka's executeMoves: retry until each replica exists on its broker and accepted."""
    pending = dict(plan.log_dirs)
    deadline = time.monotonic() + timeout_ms / 1000.0
    while pending:
        for replica in sorted(ops.alter_log_dirs(pending), key=lambda r: (r[2], r[0], r[1])):
            topic, partition, broker = replica
            print(
                f"Successfully started moving log directory to {pending.pop(replica)} for "
                f"replica {topic}-{partition} with broker {broker} ",
                file=out,
            )
        if pending and time.monotonic() >= deadline:
            plural = "" if len(pending) == 1 else "s"
            raise ToolError(
                f"Timed out before log directory move{plural} could be started for: "
                + ",".join(
                    replica_name(*r) for r in sorted(pending, key=lambda r: (r[2], r[0], r[1]))
                )
            )
        if pending:
            time.sleep(0.1)


def _wait_and_verify(
    args: argparse.Namespace,
    ops: ReassignAdmin,
    plan: Reassignment,
    before: dict[tuple[str, int], list[int]],
    sizes: dict[tuple[str, int], int],
    out: TextIO,
) -> int:
    progress = MoveProgress(ops, plan.targets, before, sizes)
    wait_for(progress, out, interval_s=max(0.05, args.progress_interval_ms / 1000.0))
    while _moves_running(ops, plan):
        time.sleep(max(0.05, args.progress_interval_ms / 1000.0))
    return _verify_plan(args, ops, plan, out)


def _moves_running(ops: ReassignAdmin, plan: Reassignment) -> bool:
    if not plan.log_dirs:
        return False
    dirs = ops.log_dirs({b for _t, _p, b in plan.log_dirs})
    for (topic, partition, broker), _target in plan.log_dirs.items():
        if any(r.broker == broker and r.future for r in dirs.get((topic, partition), [])):
            return True
    return False


def _verify(args: argparse.Namespace, ops: ReassignAdmin, out: TextIO) -> int:
    plan = parse_reassignment(_read(args.reassignment_json_file, "reassignment-json-file"))
    if args.wait:
        current = ops.assignment({t for t, _p in plan.targets})
        before = {tp: current.get(tp, []) for tp in plan.targets}
        ongoing = ops.ongoing()
        for tp, o in ongoing.items():
            if tp in before:
                before[tp] = [r for r in o.replicas if r not in o.adding]
        return _wait_and_verify(args, ops, plan, before, ops.partition_sizes(), out)
    return _verify_plan(args, ops, plan, out)


def _verify_plan(
    args: argparse.Namespace, ops: ReassignAdmin, plan: Reassignment, out: TextIO
) -> int:
    ongoing = ops.ongoing()
    targets = plan.targets
    current = _current_or_empty(ops, targets)
    lines = ["Status of partition reassignment:"]
    for tp in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp_name(tp)} is still in progress.")
        elif current.get(tp, []) == targets[tp]:
            lines.append(f"Reassignment of partition {tp_name(tp)} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp_name(tp)}, but replica set is "
                f"{','.join(map(str, current.get(tp, [])))} rather than "
                f"{','.join(map(str, targets[tp]))}."
            )
    print("\n".join(lines), file=out)
    moves_running = False
    if plan.log_dirs:
        moves_running = _print_move_states(ops, plan, out)
    if not ongoing and not moves_running and not args.preserve_throttles:
        _clear_throttles(ops, targets, out)
    return 0


def _current_or_empty(
    ops: ReassignAdmin, targets: dict[tuple[str, int], list[int]]
) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for topic in sorted({t for t, _p in targets}):
        try:
            out.update(ops.assignment([topic]))
        except Exception:  # a deleted topic: its partitions have no replicas
            continue
    return out


def _print_move_states(ops: ReassignAdmin, plan: Reassignment, out: TextIO) -> bool:
    dirs = ops.log_dirs({b for _t, _p, b in plan.log_dirs})
    running = False
    lines = []
    for (topic, partition, broker), target in sorted(
        plan.log_dirs.items(), key=lambda e: (e[0][2], e[0][0], e[0][1])
    ):
        replicas = [r for r in dirs.get((topic, partition), []) if r.broker == broker]
        current = next((r.log_dir for r in replicas if not r.future), None)
        future = next((r.log_dir for r in replicas if r.future), None)
        name = replica_name(topic, partition, broker)
        if not replicas:
            lines.append(
                f"Partition {topic}-{partition} cannot be found in any live log directory on "
                f"broker {broker}."
            )
        elif current is None:
            lines.append(
                f"Partition {topic}-{partition} is not found in any live log dir on broker "
                f"{broker}. There is likely an offline log directory on the broker."
            )
        elif future is not None:
            running = True
            if future == target:
                lines.append(f"Reassignment of replica {name} is still in progress.")
            else:
                lines.append(
                    f"Partition {topic}-{partition} on broker {broker} is being moved to log "
                    f"dir {future} instead of {target}."
                )
        elif current == target:
            lines.append(f"Reassignment of replica {name} completed successfully.")
        else:
            lines.append(
                f"Partition {topic}-{partition} on broker {broker} is not being moved from log "
                f"dir {current} to {target}."
            )
    print("\n".join(lines), file=out)
    return running


def _clear_throttles(
    ops: ReassignAdmin, targets: dict[tuple[str, int], list[int]], out: TextIO
) -> None:
    brokers = set(ops.brokers())
    for replicas in targets.values():
        brokers |= set(replicas)
    known = set(ops.brokers())
    plural = "" if len(brokers) == 1 else "s"
    print(
        f"Clearing broker-level throttles on broker{plural} {','.join(map(str, sorted(brokers)))}",
        file=out,
    )
    ops.clear_throttles(brokers & known, ())
    topics = sorted({t for t, _p in targets})
    plural = "" if len(topics) == 1 else "s"
    print(f"Clearing topic-level throttles on topic{plural} {','.join(topics)}", file=out)
    existing = {t for t, _p in _current_or_empty(ops, targets)}
    ops.clear_throttles((), [t for t in topics if t in existing])


def _cancel(args: argparse.Namespace, ops: ReassignAdmin, out: TextIO) -> int:
    plan = parse_reassignment(_read(args.reassignment_json_file, "reassignment-json-file"))
    targets = plan.targets
    ongoing = ops.ongoing()
    cancel = sorted(tp for tp in targets if tp in ongoing)
    if cancel:
        errors = ops.alter({tp: None for tp in cancel})
        if errors:
            plural = "" if len(errors) == 1 else "s"
            raise ToolError(
                f"Error cancelling partition reassignment{plural} for:\n"
                + "\n".join(f"{tp_name(tp)}: {errors[tp]}" for tp in sorted(errors))
            )
        plural = "" if len(cancel) == 1 else "s"
        print(
            f"Successfully cancelled partition reassignment{plural} for: "
            + ",".join(tp_name(tp) for tp in cancel),
            file=out,
        )
    else:
        print("None of the specified partition reassignments are active.", file=out)
    if plan.log_dirs:
        dirs = ops.log_dirs({b for _t, _p, b in plan.log_dirs})
        back = {}
        for (topic, partition, broker), _target in plan.log_dirs.items():
            replicas = [r for r in dirs.get((topic, partition), []) if r.broker == broker]
            current = next((r.log_dir for r in replicas if not r.future), None)
            if current is not None and any(r.future for r in replicas):
                back[(topic, partition, broker)] = current
        if back:
            _start_moves(ops, Reassignment(log_dirs=back), args.timeout, out)
        else:
            print("None of the specified partition moves are active.", file=out)
    if not args.preserve_throttles:
        _clear_throttles(ops, targets, out)
    return 0


def _list(ops: ReassignAdmin, out: TextIO) -> int:
    ongoing = ops.ongoing()
    if not ongoing:
        print("No partition reassignments found.", file=out)
        return 0
    lines = ["Current partition reassignments:"]
    for tp in sorted(ongoing):
        o = ongoing[tp]
        line = f"{tp_name(tp)}: replicas: {','.join(map(str, o.replicas))}."
        if o.adding:
            line += f" adding: {','.join(map(str, o.adding))}."
        if o.removing:
            line += f" removing: {','.join(map(str, o.removing))}."
        lines.append(line)
    print("\n".join(lines), file=out)
    return 0
