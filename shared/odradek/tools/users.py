"""``odradek users``: SCRAM credentials, like ``kafka-configs.sh --entity-type users``.

``odradek users add --user alice --password PW [--mechanism SCRAM-SHA-512]
[--iterations 4096]`` (AlterUserScramCredentials with a salted password computed
here, as Kafka's AdminClient does: the password never leaves this process),
``odradek users delete --user alice [--mechanism ...]``, ``odradek users describe
[--user alice]``. Works against any Kafka broker; ``--command-config`` carries the
admin's own credentials.
"""

from __future__ import annotations

import argparse
import getpass
import os

from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

from odradek.sasl.scram import MIN_ITERATIONS
from odradek.tools.common import (
    ToolError,
    add_connection_arguments,
    connect,
    connection_config,
    run_tool,
)

MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "users",
        help="add, delete and describe SCRAM users (like kafka-configs.sh --entity-type users)",
        description="Manage SCRAM-SHA-256/512 credentials through any Kafka broker.",
    )
    actions = p.add_subparsers(dest="users_action", metavar="ACTION", required=True)
    for name, text in (
        ("add", "add or replace a user's credential"),
        ("delete", "delete a user's credential"),
        ("describe", "list users and their mechanisms"),
    ):
        a = actions.add_parser(name, help=text)
        add_connection_arguments(a)
        a.add_argument("--user", required=name != "describe", action="append", default=[])
        if name != "describe":
            a.add_argument(
                "--mechanism",
                choices=sorted(MECHANISMS),
                action="append",
                default=[],
                help="default: both for add and delete",
            )
        if name == "add":
            a.add_argument(
                "--password",
                default=None,
                help="the password (default: $ODRADEK_PASSWORD, else asked for)",
            )
            a.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    p.set_defaults(func=lambda args: run_tool(_run, args, "Error while executing users: "))


def _run(args: argparse.Namespace) -> int:
    admin: KafkaAdminClient = connect(
        KafkaAdminClient, args, connection_config(args, "odradek-users")
    )
    try:
        if args.users_action == "describe":
            found = admin.describe_user_scram_credentials(args.user or None)
            for user in sorted(found):
                info = found[user]
                if info["error"]:
                    print(f"{user}: {info['error']}")
                    continue
                creds = ", ".join(
                    f"{ScramMechanism(c['mechanism']).name.replace('_', '-')}"
                    f"=[iterations={c['iterations']}]"
                    for c in info["credential_infos"]
                )
                print(f"SCRAM credential configs for user-principal '{user}' are {creds}")
            return 0
        mechanisms = [MECHANISMS[m] for m in (args.mechanism or sorted(MECHANISMS))]
        alterations: list[object] = []
        if args.users_action == "add":
            password = args.password or os.environ.get("ODRADEK_PASSWORD") or getpass.getpass()
            if not password:
                raise ToolError("a password is required")
            for user in args.user:
                alterations += [
                    UserScramCredentialUpsertion(user, m, password, iterations=args.iterations)
                    for m in mechanisms
                ]
        else:
            for user in args.user:
                alterations += [UserScramCredentialDeletion(user, m) for m in mechanisms]
        results = admin.alter_user_scram_credentials(alterations)
        failed = {u: e for u, e in results.items() if e}
        for user in sorted(results):
            verb = "Completed updating config for user" if not results[user] else "Failed for"
            print(f"{verb} {user}." + (f" {results[user]}" if results[user] else ""))
        if failed:
            raise ToolError(f"{len(failed)} user(s) not changed")
        return 0
    finally:
        admin.close()
