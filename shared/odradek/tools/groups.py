"""``odradek groups``: consumer groups, like Kafka's ``kafka-consumer-groups.sh``.

    odradek groups list [--state STATE ...]
    odradek groups describe GROUP ...            offsets and lag per partition, and members
    odradek groups delete GROUP ...              only Empty groups (NON_EMPTY_GROUP otherwise)
    odradek groups reset-offsets GROUP --topic T[:P[,P...]] ... (--to-earliest | --to-latest
        | --to-offset N | --shift-by N | --to-datetime ISO8601) [--execute]

Everything goes through the Kafka protocol with kafka-python's admin client, so the
tool works against any Kafka-compatible cluster. The cluster is ``--bootstrap-server``,
else ``$ODRADEK_BOOTSTRAP``, else the ``cluster.json`` of ``odradek up --data-dir``
(``./data``), else ``127.0.0.1:9092``. ``reset-offsets`` prints the plan and changes
nothing without ``--execute`` (as Kafka's tool), and needs the group to be inactive.
Lag is the partition's log end (high watermark) minus the committed offset. KIP-848
consumer groups (``group.protocol=consumer``) are described with ConsumerGroupDescribe
(:mod:`odradek.tools.consumer_groups_view`): group and assignment epochs, and each
member's epoch, assignment and target assignment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from odradek.protocol.consumer_protocol import decode_assignment
from odradek.tools import consumer_groups_view


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "groups",
        help="list, describe, delete consumer groups and reset their offsets",
        description="Consumer groups, like kafka-consumer-groups.sh.",
    )
    # Connection options are accepted before or after the action, as Kafka users type them.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap-server", default=argparse.SUPPRESS, help="HOST:PORT of any broker (gateway)"
    )
    common.add_argument(
        "--data-dir", default=argparse.SUPPRESS, type=Path, help="an `odradek up` data dir"
    )
    p.add_argument("--bootstrap-server", default=None, help="HOST:PORT of any broker (gateway)")
    p.add_argument("--data-dir", default=Path("./data"), type=Path, help="an `odradek up` data dir")
    sub = p.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    ls = sub.add_parser("list", help="all groups", parents=[common])
    ls.add_argument("--state", action="append", default=[], help="only groups in this state")
    ds = sub.add_parser("describe", help="offsets, lag and members of groups", parents=[common])
    ds.add_argument("groups", nargs="*", metavar="GROUP")
    ds.add_argument(
        "--group", dest="group_options", action="append", default=[], help="a group (repeatable)"
    )
    dl = sub.add_parser("delete", help="delete Empty groups and their offsets", parents=[common])
    dl.add_argument("groups", nargs="*", metavar="GROUP")
    dl.add_argument(
        "--group", dest="group_options", action="append", default=[], help="a group (repeatable)"
    )
    rs = sub.add_parser("reset-offsets", help="move a group's committed offsets", parents=[common])
    rs.add_argument("group", nargs="?", metavar="GROUP")
    rs.add_argument("--group", dest="group_option", default=None, help="the group")
    rs.add_argument(
        "--topic", action="append", required=True, help="TOPIC or TOPIC:P[,P...] (repeatable)"
    )
    how = rs.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--shift-by", type=int)
    how.add_argument("--to-datetime", help="ISO 8601, e.g. 2024-01-31T12:00:00Z")
    rs.add_argument("--execute", action="store_true", help="apply (default: only show the plan)")
    p.set_defaults(func=run)


def bootstrap(args: argparse.Namespace) -> str:
    if args.bootstrap_server:
        return str(args.bootstrap_server)
    env = os.environ.get("ODRADEK_BOOTSTRAP")
    if env:
        return env
    cluster_file = Path(args.data_dir) / "cluster.json"
    try:
        found = json.loads(cluster_file.read_text()).get("bootstrap_servers")
        if found:
            return str(found)
    except (OSError, ValueError):
        pass
    return "127.0.0.1:9092"


def run(args: argparse.Namespace) -> int:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap(args), client_id="odradek-groups")
    except KafkaError as exc:
        print(f"odradek groups: cannot reach the cluster: {exc}", file=sys.stderr)
        return 1
    try:
        action = args.groups_command
        if action in ("describe", "delete"):
            args.groups = [*args.groups, *args.group_options]
            if not args.groups:
                print("odradek groups: name at least one group (GROUP or --group)", file=sys.stderr)
                return 2
        if action == "reset-offsets":
            args.group = args.group or args.group_option
            if not args.group:
                print("odradek groups: name the group (GROUP or --group)", file=sys.stderr)
                return 2
        if action == "list":
            return list_groups(admin, args.state, sys.stdout)
        if action == "describe":
            return describe_groups(admin, args.groups, sys.stdout, bootstrap(args))
        if action == "delete":
            return delete_groups(admin, args.groups, sys.stdout)
        return reset_offsets(admin, args, sys.stdout)
    except KafkaError as exc:
        print(f"odradek groups: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()


def _table(rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


def list_groups(admin: Any, states: list[str], out: TextIO) -> int:
    groups = admin.list_groups(states_filter=states or None)
    rows: list[Sequence[Any]] = [("GROUP", "STATE", "PROTOCOL-TYPE")]
    for g in sorted(groups, key=lambda g: g["group_id"]):
        rows.append((g["group_id"], g.get("group_state") or "-", g.get("protocol_type") or "-"))
    _table(rows, out)
    return 0


def _owners(members: Iterable[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    owners: dict[tuple[str, int], dict[str, Any]] = {}
    for m in members:
        assignment = m.get("member_assignment")
        partitions: list[tuple[str, list[int]]] = []
        if isinstance(assignment, (bytes, bytearray)):
            try:
                decoded = decode_assignment(assignment)
                partitions = [(tp.topic, list(tp.partitions)) for tp in decoded.assigned_partitions]
            except Exception:
                partitions = []
        elif isinstance(assignment, dict):
            for tp in assignment.get("assigned_partitions") or []:
                partitions.append((tp["topic"], list(tp["partitions"])))
        for topic, parts in partitions:
            for p in parts:
                owners[(topic, p)] = m
    return owners


def describe_groups(
    admin: Any, group_ids: list[str], out: TextIO, bootstrap_server: str | None = None
) -> int:
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    if bootstrap_server is not None:
        # KIP-848 consumer groups first: epochs and assignments as their coordinator
        # keeps them; the others are classic groups (or none).
        try:
            consumer = [
                g
                for g in consumer_groups_view.describe(bootstrap_server, group_ids)
                if consumer_groups_view.is_consumer_group(g)
            ]
        except (OSError, ValueError):
            consumer = []
        for g in consumer:
            consumer_groups_view.render(g, out, _table)
        done = {g.group_id for g in consumer}
        group_ids = [g for g in group_ids if g not in done]
        if not group_ids:
            return 0
    described = admin.describe_groups(group_ids)
    committed = admin.list_group_offsets({g: None for g in group_ids})
    status = 0
    for group_id in group_ids:
        d = described.get(group_id) or {}
        state = d.get("group_state", "Dead")
        offsets = committed.get(group_id) or {}
        members = d.get("members") or []
        if state == "Dead" and not offsets:
            out.write(f"Consumer group '{group_id}' does not exist.\n\n")
            status = 1
            continue
        out.write(
            f"GROUP {group_id}  state {state}  protocol {d.get('protocol_data') or '-'}"
            f"  members {len(members)}\n"
        )
        owners = _owners(members)
        parts = sorted(set(offsets) | {TopicPartition(t, p) for t, p in owners})
        ends: dict[Any, Any] = {}
        if parts:
            try:
                ends = admin.list_partition_offsets(dict.fromkeys(parts, OffsetSpec.LATEST))
            except Exception:
                ends = {}
        rows: list[Sequence[Any]] = [
            (
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            )
        ]
        for tp in parts:
            c = offsets.get(tp)
            current = c.offset if c is not None and c.offset >= 0 else None
            end_info = ends.get(tp)
            end = getattr(end_info, "offset", None)
            lag = end - current if end is not None and current is not None else None
            owner = owners.get((tp.topic, tp.partition)) or {}
            rows.append(
                (
                    tp.topic,
                    tp.partition,
                    "-" if current is None else current,
                    "-" if end is None else end,
                    "-" if lag is None else lag,
                    owner.get("member_id") or "-",
                    owner.get("client_host") or "-",
                    owner.get("client_id") or "-",
                )
            )
        if len(rows) > 1:
            _table(rows, out)
        idle = [m for m in members if not any(o is m for o in owners.values())]
        for m in idle:
            out.write(f"  member {m.get('member_id')} ({m.get('client_id')}) has no partitions\n")
        out.write("\n")
    return status


def delete_groups(admin: Any, group_ids: list[str], out: TextIO) -> int:
    results = admin.delete_groups(group_ids)
    items = results.items() if isinstance(results, dict) else results
    status = 0
    for group_id, error in items:
        text = error if isinstance(error, str) else getattr(error, "__name__", str(error))
        ok = text in ("OK", "NoError", "None") or error is None
        if not ok:
            status = 1
        out.write(f"{group_id}: {'deleted' if ok else text}\n")
    return status


def _partitions(admin: Any, specs: list[str]) -> list[Any]:
    from kafka import TopicPartition

    out: list[Any] = []
    for spec in specs:
        topic, _, listed = spec.partition(":")
        if listed:
            out.extend(TopicPartition(topic, int(p)) for p in listed.split(",") if p.strip())
        else:
            described = admin.describe_topics([topic])
            for t in described:
                for p in t.get("partitions") or []:
                    out.append(TopicPartition(topic, p.get("partition_index", p.get("partition"))))
    return sorted(out)


def reset_offsets(admin: Any, args: argparse.Namespace, out: TextIO) -> int:
    from kafka.admin import OffsetSpec, OffsetTimestamp

    group_id = args.group
    partitions = _partitions(admin, args.topic)
    if not partitions:
        out.write("no partitions matched\n")
        return 1
    specs: dict[Any, Any]
    if args.to_earliest:
        specs = dict.fromkeys(partitions, OffsetSpec.EARLIEST)
    elif args.to_latest:
        specs = dict.fromkeys(partitions, OffsetSpec.LATEST)
    elif args.to_datetime:
        when = datetime.fromisoformat(args.to_datetime.replace("Z", "+00:00"))
        specs = dict.fromkeys(partitions, OffsetTimestamp(int(when.timestamp() * 1000)))
    elif args.to_offset is not None:
        specs = dict.fromkeys(partitions, int(args.to_offset))
    else:
        current = admin.list_group_offsets({group_id: partitions}).get(group_id) or {}
        specs = {}
        for tp in partitions:
            c = current.get(tp)
            base = c.offset if c is not None and c.offset >= 0 else 0
            specs[tp] = max(0, base + int(args.shift_by))
    if not args.execute:
        earliest = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.EARLIEST))
        latest = admin.list_partition_offsets(dict.fromkeys(partitions, OffsetSpec.LATEST))
        rows: list[Sequence[Any]] = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
        resolved = {}
        for tp, spec in specs.items():
            if isinstance(spec, int) and not isinstance(spec, OffsetSpec):
                lo, hi = earliest[tp].offset, latest[tp].offset
                resolved[tp] = min(max(spec, lo), hi)
        if any(not isinstance(s, int) or isinstance(s, OffsetSpec) for s in specs.values()):
            lookup = {
                tp: s
                for tp, s in specs.items()
                if not isinstance(s, int) or isinstance(s, OffsetSpec)
            }
            for tp, found in admin.list_partition_offsets(lookup).items():
                resolved[tp] = found.offset if found.offset >= 0 else latest[tp].offset
        for tp in partitions:
            rows.append((group_id, tp.topic, tp.partition, resolved.get(tp, "-")))
        _table(rows, out)
        out.write("(dry run: add --execute to apply)\n")
        return 0
    results = admin.reset_group_offsets(group_id, specs)
    rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "RESULT")]
    status = 0
    for tp in partitions:
        r = results.get(tp) or {}
        error = r.get("error")
        name = getattr(error, "__name__", str(error))
        if name != "NoError":
            status = 1
        rows.append((group_id, tp.topic, tp.partition, r.get("offset", "-"), name))
    _table(rows, out)
    return status
