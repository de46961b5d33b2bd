"""``odradek certs``: a local CA and certificates for TLS listeners and clients.

``odradek certs --dir DIR server NAME --host H ...`` and ``odradek certs --dir DIR
client NAME`` write ``NAME.crt`` (chain), ``NAME.key`` and ``NAME.pem`` (key and
chain: Kafka's ``ssl.keystore.location`` with ``ssl.keystore.type=PEM``) next to
``ca.crt`` (the trust store), creating the CA on first use. Existing files are kept.
"""

from __future__ import annotations

import argparse
from pathlib import Path

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
    client = sub.add_parser("client", help="a client certificate (ssl.client.auth)")
    client.add_argument("name", help="the certificate's CN (principal User:CN=NAME)")
    client.add_argument("--ou", default=None, help="an OU in the subject")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ca, _ = ensure_ca(args.dir)
    if args.what == "ca":
        print(ca)
        return 0
    if args.what == "server":
        hosts = tuple(args.host) or ("127.0.0.1", "localhost")
        out = issue(args.dir, args.name, hosts=hosts, client=False)
    else:
        out = issue(args.dir, args.name, server=False, organizational_unit=args.ou)
    print(f"certificate: {out.cert}\nkey: {out.key}\nkeystore (PEM): {out.pem}\ntruststore: {ca}")
    return 0
