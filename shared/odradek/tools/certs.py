"""``odradek certs``: a local CA and certificates for TLS listeners and clients.

``odradek certs --dir DIR server NAME --host H ...`` and ``odradek certs --dir DIR
client NAME`` write ``NAME.crt`` (chain), ``NAME.key`` and ``NAME.pem`` (key and
chain: Kafka's ``ssl.keystore.location`` with ``ssl.keystore.type=PEM``) next to
``ca.crt`` (the trust store), creating the CA on first use. Existing files are kept.
``odradek certs --dir DIR member KIND ID`` writes a service's certificate for mutual
TLS between services, ``KIND-ID.crt``/``.key`` naming ``odradek://KIND/ID``
(:mod:`odradek.internal_tls`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from odradek import internal_tls
from odradek.certs import ensure_ca, issue


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "certs",
        help="create a local CA and server/client certificates (PEM)",
        description="Create a local certificate authority and certificates signed by it.",
    )
    p.add_argument("--dir", type=Path, default=Path("data/certs"), help="default data/certs")
    sub = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    sub.add_parser("ca", help="just the CA (ca.crt, ca.key)")
    server = sub.add_parser("server", help="a server certificate (TLS listener)")
    server.add_argument("name")
    server.add_argument(
        "--host", action="append", default=[], help="a DNS name or IP the server is reached at"
    )
    server.add_argument(
        "--client-auth",
        action="store_true",
        help="also usable as a client certificate (etcd members present theirs to each "
        "other over peer TLS)",
    )
    client = sub.add_parser("client", help="a client certificate (ssl.client.auth)")
    client.add_argument("name", help="the certificate's CN (principal User:CN=NAME)")
    client.add_argument("--ou", default=None, help="an OU in the subject")
    member = sub.add_parser(
        "member", help="a service's certificate for mutual TLS between services"
    )
    member.add_argument("kind", choices=internal_tls.KINDS)
    member.add_argument(
        "node_id",
        metavar="ID",
        help="the service's node.id, or '*': one certificate for every node of the kind "
        "(not for storage)",
    )
    member.add_argument(
        "--server-name",
        default=internal_tls.DEFAULT_SERVER_NAME,
        help="internal.tls.server.name (default odradek.internal)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ca, _ = ensure_ca(args.dir)
    if args.what == "ca":
        print(ca)
        return 0
    if args.what == "member":
        if args.node_id != "*" and not args.node_id.isdigit():
            print(f"odradek certs: ID must be a node id or '*', got {args.node_id!r}")
            return 2
        node_id = None if args.node_id == "*" else int(args.node_id)
        try:
            out = internal_tls.issue_member(args.dir, args.kind, node_id, args.server_name)
        except ValueError as exc:
            print(f"odradek certs: {exc}")
            return 2
        for key, value in internal_tls.settings_for(args.dir, out).items():
            print(f"{key}={value}")
        return 0
    if args.what == "server":
        hosts = tuple(args.host) or ("127.0.0.1", "localhost")
        out = issue(args.dir, args.name, hosts=hosts, client=args.client_auth)
    else:
        out = issue(args.dir, args.name, server=False, organizational_unit=args.ou)
    print(f"certificate: {out.cert}\nkey: {out.key}\nkeystore (PEM): {out.pem}\ntruststore: {ca}")
    return 0
