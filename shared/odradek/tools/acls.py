"""``odradek acls``: add, list and remove ACLs, with kafka-acls.sh's options.

``odradek acls --add --allow-principal User:alice --operation Read --topic orders``,
``--deny-principal``, ``--allow-host``/``--deny-host`` (default ``*``),
``--topic``/``--group``/``--transactional-id``/``--cluster``,
``--resource-pattern-type literal|prefixed`` (``match``/``any`` for ``--list`` and
``--remove``), ``--list [resource options] [--principal P]``, ``--remove ...``.
Works against any Kafka broker; ``--command-config`` carries the admin's credentials.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from odradek.tools.common import (
    UsageError,
    add_connection_arguments,
    connect,
    connection_config,
    run_tool,
)

CLUSTER_NAME = "kafka-cluster"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "acls",
        help="add, list and remove ACLs (like kafka-acls.sh)",
        description="Manage ACLs through any Kafka broker with kafka-acls.sh's options.",
    )
    add_connection_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--principal", default=None, help="--list: only this principal's ACLs")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument(
        "--operation",
        action="append",
        default=[],
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, All (repeatable; default All)",
    )
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument(
        "--resource-pattern-type",
        default=None,
        choices=("literal", "prefixed", "match", "any"),
        help="default: literal for --add, any for --list and --remove",
    )
    p.set_defaults(func=lambda args: run_tool(_run, args, "Error while executing ACL command: "))


def _operation(name: str) -> ACLOperation:
    key = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()
    try:
        return ACLOperation[key.replace("__", "_")]
    except KeyError:
        raise UsageError(f"Unknown operation {name}") from None


def _resources(args: argparse.Namespace, pattern: ACLResourcePatternType) -> list[Any]:
    out: list[tuple[ResourceType, str]] = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _run(args: argparse.Namespace) -> int:
    default_pattern = "literal" if args.add else "any"
    pattern = ACLResourcePatternType[(args.resource_pattern_type or default_pattern).upper()]
    resources = _resources(args, pattern)
    if args.add and not resources:
        raise UsageError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    if args.add and not (args.allow_principal or args.deny_principal):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal")
    ops = [_operation(o) for o in args.operation] or [ACLOperation.ALL]
    admin: KafkaAdminClient = connect(
        KafkaAdminClient, args, connection_config(args, "odradek-acls")
    )
    try:
        if args.list:
            patterns = [
                ResourcePatternFilter(rtype, name, pattern) for rtype, name in resources
            ] or [ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)]
            for rp in patterns:
                acls, _ = admin.describe_acls(
                    ACLFilter(args.principal, None, ACLOperation.ANY, ACLPermissionType.ANY, rp)
                )
                by_resource: dict[tuple[str, str, str], list[Any]] = {}
                for acl in acls:
                    r = acl.resource_pattern
                    key = (r.resource_type.name, r.resource_name, r.pattern_type.name)
                    by_resource.setdefault(key, []).append(acl)
                for (rtype, name, ptype), entries in sorted(by_resource.items()):
                    print(
                        f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, "
                        f"name={name}, patternType={ptype})`: "
                    )
                    for a in entries:
                        print(
                            f" \t(principal={a.principal}, host={a.host}, "
                            f"operation={a.operation.name}, "
                            f"permissionType={a.permission_type.name})"
                        )
            return 0
        bindings = []
        for perm, principals, hosts in (
            (ACLPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
            (ACLPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
        ):
            for principal in principals:
                for host in hosts:
                    for op in ops:
                        for rtype, name in resources:
                            bindings.append((principal, host, op, perm, rtype, name))
        if args.add:
            acls = [
                ACL(pr, h, op, perm, ResourcePattern(rtype, name, pattern))
                for pr, h, op, perm, rtype, name in bindings
            ]
            result = admin.create_acls(acls)
            for acl in result["succeeded"]:
                print(f"Adding ACL: {acl}")
            if result["failed"]:
                raise UsageError(f"{len(result['failed'])} ACL(s) not created: {result['failed']}")
            return 0
        filters = [
            ACLFilter(pr, h, op, perm, ResourcePatternFilter(rtype, name, pattern))
            for pr, h, op, perm, rtype, name in bindings
        ] or [
            ACLFilter(
                None,
                None,
                ACLOperation.ANY,
                ACLPermissionType.ANY,
                ResourcePatternFilter(rtype, name, pattern),
            )
            for rtype, name in resources
        ]
        if not filters:
            raise UsageError("--remove needs a resource (--topic, --group, ...)")
        removed = 0
        for _flt, matching, _error in admin.delete_acls(filters):
            for acl in matching:
                removed += 1
                print(f"Removed ACL: {acl}")
        print(f"Removed {removed} ACL(s)")
        return 0
    finally:
        admin.close()
