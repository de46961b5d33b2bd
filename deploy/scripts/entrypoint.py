#!/usr/bin/env python3
"""Container entry point: fill in per-container settings, then exec the service.

``odradek-entrypoint SERVICE [--set name=value ...]`` (SERVICE is one of
controller, storage, gateway, coordinator, offsets, transactions, console, mirror) becomes
``python -m odradek.SERVICE ...`` in the same process (``exec``), so the service is
PID 1 and receives SIGTERM itself for its graceful drain. Any other first argument
is run as a plain command (``odradek topics list``, ``sh``).

Why this exists: one image serves every replica, and replicas differ only in what a
container learns at start — its own address and its node id. Settings already given
(``ODRADEK_<NAME>`` environment variables or ``--set``) always win; this only adds
defaults for what is missing, as ``ODRADEK_*`` variables (the lowest-but-one source
of :mod:`odradek.config`, so ``--set`` still overrides them):

- ``grpc.listener``: ``<own IP>:9093``. The services bind this address and register
  its host with the controller, so it must be an address other containers reach
  (``0.0.0.0`` would be registered as is). The IP is ``POD_IP`` (Kubernetes downward
  API) or what the container's own hostname resolves to.
- ``metrics.port``: 9102 (``/metrics``, ``/healthz``, ``/readyz``).
- ``node.id``: unique per replica, by ``ODRADEK_NODE_ID_FROM``:
  ``ordinal`` — base + the ``-N`` suffix of the hostname (StatefulSet pods:
  ``odradek-storage-2`` -> 102); ``compose`` — base + N - 1 from the ``-N`` suffix of
  the container name that reverse DNS gives for the own IP (``docker compose --scale``
  numbers replicas from 1: ``odradek-coordinator-3`` -> 202); ``hash`` — a stable id
  from the CRC-32 of the hostname in a block of ten million per kind (Deployment
  pods, whose names carry a random suffix); ``auto`` (default) — the first of
  ordinal, compose, hash that applies. Bases follow ``odradek up``: gateways 0,
  storage 100, coordinators 200, offset stores 300, transaction coordinators 400,
  controller 3000.
- gateway ``listeners`` ``PLAINTEXT://0.0.0.0:9092`` and ``advertised.listeners``
  ``NAME://<own IP>:<port>`` for each listener; storage ``log.dirs`` and controller
  ``metadata.store`` under ``/var/lib/odradek``; ``controller.address``
  ``controller:9093``; the web console's ``console.listener`` ``0.0.0.0:8080`` (it
  has no node id: it is a client of the cluster, not a member).
- ``internal.tls.{ca,cert,key}`` from ``ODRADEK_INTERNAL_TLS_DIR`` (a mounted Secret,
  docs/security.md "Between services"): ``ca.crt`` and this service's certificate,
  ``<service>-<node id>.crt``/``.key`` when the directory has one (storage nodes:
  their certificate names their id), else the kind-wide ``<service>.crt``/``.key``.

``odradek-entrypoint healthcheck [readyz|healthz]`` probes the service's own HTTP
endpoint (Docker HEALTHCHECK; no curl in the image). ``ODRADEK_ENTRYPOINT_DRY_RUN=1``
prints the resolved command and added settings as JSON instead of running them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Mapping, Sequence

SERVICES = (
    "controller",
    "storage",
    "gateway",
    "coordinator",
    "offsets",
    "transactions",
    "console",
    "mirror",
)
NODE_ID_BASE = {
    "gateway": 0,
    "storage": 100,
    "coordinator": 200,
    "offsets": 300,
    "transactions": 400,
    "controller": 3000,
}
# Hashed ids live far above the ordinal ranges, one block of ten million per kind,
# so a hashed id never collides with an ordinal one or another kind's.
HASH_BLOCK = {
    "gateway": 1,
    "coordinator": 2,
    "offsets": 3,
    "storage": 4,
    "controller": 5,
    "transactions": 6,
}
HASH_SPAN = 10_000_000
DEFAULT_GRPC_PORT = 9093
DEFAULT_METRICS_PORT = 9102
DEFAULT_KAFKA_PORT = 9092
DEFAULT_CONSOLE_PORT = 8080
DATA_ROOT = "/var/lib/odradek"
STRATEGIES = ("auto", "ordinal", "compose", "hash")

_SUFFIX = re.compile(r"-(\d+)$")


class EntrypointError(RuntimeError):
    pass


def env_name(setting: str) -> str:
    """``log.dirs`` -> ``ODRADEK_LOG_DIRS`` (the mapping :mod:`odradek.config` reads)."""
    return "ODRADEK_" + setting.upper().replace(".", "_")


def name_ordinal(name: str) -> int | None:
    """The trailing ``-N`` of a host or container name (first DNS label only)."""
    match = _SUFFIX.search(name.split(".", 1)[0])
    return int(match.group(1)) if match else None


def hashed_node_id(service: str, hostname: str) -> int:
    return HASH_BLOCK[service] * HASH_SPAN + zlib.crc32(hostname.encode()) % HASH_SPAN


def own_ip(environ: Mapping[str, str], hostname: str) -> str:
    ip = environ.get("POD_IP", "").strip()
    if ip:
        return ip
    try:
        return socket.gethostbyname(hostname)
    except OSError as exc:
        raise EntrypointError(f"cannot resolve own hostname {hostname!r}: {exc}") from None


def nameservers(resolv_conf: str = "/etc/resolv.conf") -> list[str]:
    try:
        with open(resolv_conf) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [ln.split()[1] for ln in lines if ln.startswith("nameserver") and len(ln.split()) > 1]


def ptr_query(ip: str, query_id: int = 0x0DEC) -> bytes:
    """A DNS PTR query for ``ip`` (RFC 1035 message, recursion desired)."""
    labels = [*reversed(ip.split(".")), "in-addr", "arpa"]
    qname = b"".join(bytes([len(p)]) + p.encode() for p in labels) + b"\x00"
    return (
        query_id.to_bytes(2, "big")
        + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
        + qname
        + b"\x00\x0c\x00\x01"
    )


def _read_name(msg: bytes, pos: int) -> tuple[str, int]:
    """A possibly compressed domain name at ``pos``; returns it and the end position."""
    labels: list[str] = []
    end = -1
    for _ in range(128):  # bounded: a pointer loop in a hostile answer cannot spin
        length = msg[pos]
        if length == 0:
            return ".".join(labels), (end if end >= 0 else pos + 1)
        if length & 0xC0 == 0xC0:
            if end < 0:
                end = pos + 2
            pos = ((length & 0x3F) << 8) | msg[pos + 1]
            continue
        labels.append(msg[pos + 1 : pos + 1 + length].decode("ascii", "replace"))
        pos += 1 + length
    raise ValueError("DNS name too long")


def parse_ptr_answer(msg: bytes, query_id: int = 0x0DEC) -> str | None:
    """The first PTR target in a DNS response, or None."""
    if len(msg) < 12 or int.from_bytes(msg[0:2], "big") != query_id or msg[3] & 0x0F:
        return None
    qdcount, ancount = int.from_bytes(msg[4:6], "big"), int.from_bytes(msg[6:8], "big")
    pos = 12
    for _ in range(qdcount):
        _, pos = _read_name(msg, pos)
        pos += 4
    for _ in range(ancount):
        _, pos = _read_name(msg, pos)
        rtype = int.from_bytes(msg[pos : pos + 2], "big")
        rdlength = int.from_bytes(msg[pos + 8 : pos + 10], "big")
        pos += 10
        if rtype == 12:
            return _read_name(msg, pos)[0]
        pos += rdlength
    return None


def reverse_name(ip: str) -> str | None:
    """The DNS name of ``ip`` from the resolver itself, not /etc/hosts.

    Docker's /etc/hosts maps the own IP to the container id; its embedded DNS
    server answers the PTR with the container name (``project-service-N.network``),
    which carries the replica number that ``--scale`` assigned.
    """
    for server in nameservers()[:3]:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(2.0)
            try:
                sock.sendto(ptr_query(ip), (server, 53))
                answer = parse_ptr_answer(sock.recv(4096))
            except (OSError, ValueError, IndexError):
                continue
        if answer:
            return answer
    return None


def derive_node_id(
    service: str,
    strategy: str,
    hostname: str,
    ip: str,
    resolve: Callable[[str], str | None] = reverse_name,
) -> int:
    base = NODE_ID_BASE[service]
    if strategy not in STRATEGIES:
        raise EntrypointError(
            f"ODRADEK_NODE_ID_FROM={strategy!r}: expected one of {', '.join(STRATEGIES)}"
        )
    if strategy in ("auto", "ordinal"):
        ordinal = name_ordinal(hostname)
        if ordinal is not None:
            return base + ordinal
        if strategy == "ordinal":
            raise EntrypointError(f"hostname {hostname!r} has no -N ordinal suffix")
    if strategy in ("auto", "compose"):
        name = resolve(ip)
        number = name_ordinal(name) if name else None
        if number is not None and number >= 1:
            return base + number - 1
        if strategy == "compose":
            raise EntrypointError(f"reverse DNS of {ip} gave {name!r}: no -N replica number")
    return hashed_node_id(service, hostname)


def plan(
    service: str,
    environ: Mapping[str, str],
    hostname: str,
    resolve: Callable[[str], str | None] = reverse_name,
    exists: Callable[[str], bool] = os.path.exists,
) -> dict[str, str]:
    """The ``ODRADEK_*`` variables to add for ``service`` (those not already set)."""
    if service not in SERVICES:
        raise EntrypointError(f"unknown service {service!r}")
    added: dict[str, str] = {}
    ip = ""

    def need(setting: str) -> bool:
        return env_name(setting) not in environ

    def address() -> str:
        nonlocal ip
        if not ip:
            ip = own_ip(environ, hostname)
        return ip

    if need("grpc.listener"):
        added[env_name("grpc.listener")] = f"{address()}:{DEFAULT_GRPC_PORT}"
    if need("metrics.port"):
        added[env_name("metrics.port")] = str(DEFAULT_METRICS_PORT)
    if service == "console":
        if need("console.listener"):
            added[env_name("console.listener")] = f"0.0.0.0:{DEFAULT_CONSOLE_PORT}"
    elif service == "mirror":
        pass  # a Kafka client of other clusters: no node id, no controller
    elif need("node.id"):
        strategy = environ.get("ODRADEK_NODE_ID_FROM", "auto").strip().lower() or "auto"
        node_id = derive_node_id(service, strategy, hostname, address(), resolve)
        added[env_name("node.id")] = str(node_id)
    if service not in ("controller", "mirror") and need("controller.address"):
        added[env_name("controller.address")] = f"controller:{DEFAULT_GRPC_PORT}"
    if service == "gateway":
        listeners = environ.get(env_name("listeners"))
        if listeners is None:
            listeners = f"PLAINTEXT://0.0.0.0:{DEFAULT_KAFKA_PORT}"
            added[env_name("listeners")] = listeners
        if need("advertised.listeners"):
            # Every listener at this container's address, under its own name (Kafka
            # refuses advertised names that are not in listeners).
            added[env_name("advertised.listeners")] = ",".join(
                f"{item.split('://', 1)[0] if '://' in item else 'PLAINTEXT'}://"
                f"{address()}:{item.rsplit(':', 1)[-1]}"
                for item in (v.strip() for v in listeners.split(","))
                if item
            )
    if service == "storage" and need("log.dirs"):
        added[env_name("log.dirs")] = f"{DATA_ROOT}/data"
    if service == "controller" and need("metadata.store"):
        added[env_name("metadata.store")] = f"file://{DATA_ROOT}/controller"
    tls_dir = environ.get("ODRADEK_INTERNAL_TLS_DIR", "").rstrip("/")
    if tls_dir and service != "mirror" and need("internal.tls.cert"):
        node_id = environ.get(env_name("node.id")) or added.get(env_name("node.id"))
        name = service
        if node_id is not None and exists(f"{tls_dir}/{service}-{node_id}.crt"):
            name = f"{service}-{node_id}"
        added[env_name("internal.tls.ca")] = f"{tls_dir}/ca.crt"
        added[env_name("internal.tls.cert")] = f"{tls_dir}/{name}.crt"
        added[env_name("internal.tls.key")] = f"{tls_dir}/{name}.key"
    return added


def healthcheck(environ: Mapping[str, str], hostname: str, path: str = "readyz") -> int:
    """0 when ``/<path>`` answers 200 on the service's own metrics port, else 1."""
    port = environ.get(env_name("metrics.port"), str(DEFAULT_METRICS_PORT))
    hosts: list[str] = []
    listener = environ.get(env_name("grpc.listener"), "")
    if listener.rpartition(":")[0]:
        hosts.append(listener.rpartition(":")[0])
    else:
        try:
            hosts.append(own_ip(environ, hostname))
        except EntrypointError:
            pass
    hosts.append("127.0.0.1")  # services that bind their metrics server to loopback
    for host in dict.fromkeys(hosts):
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/{path}", timeout=3) as resp:
                if resp.status == 200:
                    return 0
        except (urllib.error.URLError, OSError):
            continue
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    environ = dict(os.environ)
    hostname = socket.gethostname()
    if not args:
        print("usage: odradek-entrypoint SERVICE [--set name=value ...]", file=sys.stderr)
        return 2
    if args[0] == "healthcheck":
        return healthcheck(environ, hostname, args[1] if len(args) > 1 else "readyz")
    if args[0] not in SERVICES:
        if environ.get("ODRADEK_ENTRYPOINT_DRY_RUN") == "1":
            print(json.dumps({"argv": args, "env": {}}))
            return 0
        os.execvp(args[0], args)
    service = args[0]
    try:
        added = plan(service, environ, hostname)
    except EntrypointError as exc:
        print(f"odradek-entrypoint: {exc}", file=sys.stderr)
        return 2
    argv_out = [sys.executable, "-m", f"odradek.{service}", *args[1:]]
    if environ.get("ODRADEK_ENTRYPOINT_DRY_RUN") == "1":
        print(json.dumps({"argv": argv_out, "env": added}))
        return 0
    for key, value in sorted(added.items()):
        print(f"odradek-entrypoint: {key}={value}", file=sys.stderr)
    os.execve(sys.executable, argv_out, {**environ, **added})
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
