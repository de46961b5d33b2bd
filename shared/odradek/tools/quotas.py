"""``odradek quotas``: client quotas, like ``kafka-configs.sh --entity-type users/clients``.

``odradek quotas --alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
--entity-type users --entity-name alice [--entity-type clients --entity-name app]``,
``--entity-default`` for the default entity (``<default>``), the shortcuts ``--user
NAME``, ``--client NAME``, ``--user-defaults``, ``--client-defaults``; ``--alter
--delete-config producer_byte_rate``; ``--describe`` (with no entity: every quota).
AlterClientQuotas and DescribeClientQuotas against any Kafka broker; ``--command-config``
carries the admin's credentials. Output lines are kafka-configs.sh's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kafka import KafkaAdminClient

from odradek.client_quotas import CLIENT_ID, MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED, USER
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from odradek.tools.common import (
    ToolError,
    UsageError,
    add_connection_arguments,
    connect,
    connection_config,
    run_tool,
)

ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
_UNNAMED = object()  # --entity-type without --entity-name/--entity-default yet
_TYPE_TEXT = {USER: "user-principal", CLIENT_ID: "client-id"}


class _EntityAction(argparse.Action):
    """Keeps --entity-type/--entity-name/--entity-default (and the shortcuts) in the
    order given, pairing each name with the type before it, as kafka-configs.sh does."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        entities: list[list[Any]] = getattr(namespace, "entities", None) or []
        namespace.entities = entities
        value = values if isinstance(values, str) else None
        if option_string == "--entity-type":
            if value not in ENTITY_TYPES:
                raise UsageError(f"--entity-type must be one of: {', '.join(ENTITY_TYPES)}")
            entities.append([ENTITY_TYPES[value], _UNNAMED])
        elif option_string in ("--entity-name", "--entity-default"):
            if not entities or entities[-1][1] is not _UNNAMED:
                raise UsageError(f"{option_string} must follow an --entity-type")
            entities[-1][1] = value if option_string == "--entity-name" else None
        elif option_string in ("--user", "--client"):
            entities.append([USER if option_string == "--user" else CLIENT_ID, value])
        else:  # --user-defaults / --client-defaults
            entities.append([USER if option_string == "--user-defaults" else CLIENT_ID, None])


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "quotas",
        help="alter and describe client quotas (like kafka-configs.sh --entity-type users/clients)",
        description="Client quotas (producer_byte_rate, consumer_byte_rate, request_percentage) "
        "by user, client id or both, through any Kafka broker.",
    )
    add_connection_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    p.add_argument("--add-config", default="", metavar="K=V[,K=V...]")
    p.add_argument("--delete-config", default="", metavar="K[,K...]")
    p.add_argument("--entity-type", action=_EntityAction, metavar="users|clients")
    p.add_argument("--entity-name", action=_EntityAction, metavar="NAME")
    p.add_argument("--entity-default", action=_EntityAction, nargs=0)
    p.add_argument("--user", action=_EntityAction, metavar="NAME")
    p.add_argument("--client", action=_EntityAction, metavar="NAME")
    p.add_argument("--user-defaults", action=_EntityAction, nargs=0)
    p.add_argument("--client-defaults", action=_EntityAction, nargs=0)
    p.add_argument("--validate-only", action="store_true", help="--alter: check, change nothing")
    p.set_defaults(
        func=lambda args: run_tool(_run, args, "Error while executing config command: "),
        entities=None,
    )


def _add_config(text: str) -> list[tuple[str, float]]:
    out = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--add-config: expected key=value, got {item!r}")
        try:
            out.append((key.strip(), float(value)))
        except ValueError:
            raise UsageError(f"--add-config: {key.strip()} must be a number") from None
    return out


def entity_description(entity: Sequence[tuple[str, str | None]]) -> str:
    """kafka-configs.sh's words: ``user-principal 'alice', the default client-id``."""
    parts = []
    for etype in (USER, CLIENT_ID):
        for t, name in entity:
            if t == etype:
                text = _TYPE_TEXT[t]
                parts.append(f"{text} '{name}'" if name is not None else f"the default {text}")
    parts += [f"{t} '{n}'" for t, n in entity if t not in _TYPE_TEXT]
    return ", ".join(parts)


def _send(admin: KafkaAdminClient, request: Any) -> Any:
    # kafka-python's AdminClient has no client-quota methods: send the request as its
    # own methods do (version negotiated with the broker).
    return admin._manager.run(admin._manager.send, request)


def _run(args: argparse.Namespace) -> int:
    entities: list[tuple[str, str | None]] = []
    for etype, name in args.entities or []:
        if name is _UNNAMED:
            if args.alter:
                raise UsageError(
                    "--alter needs --entity-name or --entity-default per --entity-type"
                )
            entities.append((etype, _UNNAMED))  # type: ignore[arg-type]
        else:
            entities.append((etype, name))
    if len({t for t, _ in entities}) != len(entities):
        raise UsageError("each entity type may be given once")
    if args.alter:
        if not entities:
            raise UsageError("--alter needs an entity (--entity-type users|clients ...)")
        adds = _add_config(args.add_config)
        deletes = [k.strip() for k in args.delete_config.split(",") if k.strip()]
        if not adds and not deletes:
            raise UsageError("--alter needs --add-config or --delete-config")
    admin: KafkaAdminClient = connect(
        KafkaAdminClient, args, connection_config(args, "odradek-quotas")
    )
    try:
        if args.describe:
            return _describe(admin, entities)
        E = AlterClientQuotasRequest.EntryData
        request = AlterClientQuotasRequest(
            entries=[
                E(
                    entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entities],
                    ops=[E.OpData(key=k, value=v, remove=False) for k, v in adds]
                    + [E.OpData(key=k, value=0.0, remove=True) for k in deletes],
                )
            ],
            validate_only=bool(args.validate_only),
        )
        response: AlterClientQuotasResponse = _send(admin, request)
        failed = [e for e in response.entries if e.error_code]
        if failed:
            raise ToolError(
                "; ".join(
                    f"{entity_description([(d.entity_type, d.entity_name) for d in e.entity])}: "
                    f"{e.error_message or 'error ' + str(e.error_code)}"
                    for e in failed
                )
            )
        verb = "Validated" if args.validate_only else "Completed updating"
        print(f"{verb} config for {entity_description(entities)}.")
        return 0
    finally:
        admin.close()


def _describe(admin: KafkaAdminClient, entities: list[tuple[str, Any]]) -> int:
    C = DescribeClientQuotasRequest.ComponentData
    components = []
    for etype, name in entities:
        if name is _UNNAMED:
            components.append(C(entity_type=etype, match_type=MATCH_SPECIFIED, match=None))
        elif name is None:
            components.append(C(entity_type=etype, match_type=MATCH_DEFAULT, match=None))
        else:
            components.append(C(entity_type=etype, match_type=MATCH_EXACT, match=name))
    response: DescribeClientQuotasResponse = _send(
        admin, DescribeClientQuotasRequest(components=components, strict=bool(entities))
    )
    if response.error_code:
        raise ToolError(response.error_message or f"error {response.error_code}")
    for entry in response.entries or []:
        entity = [(d.entity_type, d.entity_name) for d in entry.entity]
        values = ", ".join(f"{v.key}={v.value}" for v in sorted(entry.values, key=lambda v: v.key))
        print(f"Quota configs for {entity_description(entity)} are {values}")
    return 0
