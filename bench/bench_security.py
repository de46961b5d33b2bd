"""Security benchmark: what SASL_SSL costs against PLAINTEXT, and authentications/s.

Four local clusters run side by side in this run (``odradek up`` as a library),
measured the same way with librdkafka (confluent-kafka) over ``--rounds`` rounds
(after one small unmeasured warm-up each): in a round the produce phases of all of
them one after another, then their consume phases, in ABBA order; every round is
reported and the medians over them:

- PLAINTEXT: plain ``odradek up``;
- SASL_SSL listener: ``--security sasl_ssl --no-internal-tls``, TLS and SASL on the
  client's connections only, the services' own links (gRPC, the data link) plaintext;
- SASL_SSL TCP link: ``--security sasl_ssl`` with ``--set data.socket.path=``: mutual
  TLS between services, the data link too, as between hosts;
- SASL_SSL: ``--security sasl_ssl``, which also runs mutual TLS between services, but
  the gateway reaches the storage node on its host over the data link's Unix socket
  (docs/data-link.md, "Same host"), as every configuration but the third does.

The difference between the second and the third is what internal TLS costs, between
the first and the second what the client listener's TLS costs, between the third and
the fourth what the Unix socket saves. Measured per
configuration:

1. produce MB/s: ``--records`` records of ``--size`` bytes, acks=all, one partition;
2. consume MB/s: the same records read back from the beginning by a group-less
   consumer;
3. (SASL_SSL only) authentications/s: sequential new connections, each a TLS
   handshake plus a complete SaslHandshake + SaslAuthenticate exchange, for
   SCRAM-SHA-512 and for PLAIN (PLAIN runs PBKDF2 on the gateway for every login).

Reported per round as MB/s and as the ratio to PLAINTEXT's MB/s in the same round
(issue 15's goal for SASL_SSL: >= 0.7), then the medians: MB/s, the per-round
ratios' median and range, and the CPU seconds per GB the gateway, the storage node and the
client spent in each phase (and the client's busiest thread's share of it), each
process's busiest thread's CPU seconds per GB and how long it waited runnable for a
core, and two ratios less moved by the machine's other load than MB/s: the CPU ratio
(PLAINTEXT's total CPU per GB over the setup's: the MB/s ratio if these processes
saturated the cores) and the busiest-thread ratio (PLAINTEXT's busiest thread's CPU
per GB over the setup's: the MB/s ratio when more threads are runnable than there are
cores and each gets its share of one, as on the shared machine). The client's threads
are measured before the client is closed: librdkafka's threads, which encrypt, end
with it and take their CPU time with them.

``--replicas=N`` runs N storage nodes and gives the topic N replicas (acks=all then
waits for the followers; the storage figures are the nodes' sum): replication between
storage nodes on one host, which the default single node leaves out.

    python -m bench security [--records=100000] [--size=1000] [--logins=200] [--rounds=5]
        [--setups=PLAINTEXT,SASL_SSL]   (a subset: PLAINTEXT always runs) [--replicas=1]
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import ssl
import statistics
import struct
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.producing import produce_waiting
from odradek.config import parse_properties
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version
from odradek.sasl.scram import ScramMechanism, client_proof, salted_password
from odradek.tools.launcher import Cluster, ClusterOptions

Figures = dict[str, float]  # "produce", "consume" (MB/s), "<phase> <kind> cpu" (CPU-s/GB)


def _create(conf: dict[str, Any], replicas: int = 1) -> str:
    topic = f"bench-sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(conf)
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(topic, 1, replicas)])[topic].result(60)
            return topic
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _nothing() -> None:
    pass


def _produce_mb_s(
    conf: dict[str, Any], topic: str, records: int, size: int, at_end: Callable[[], None] = _nothing
) -> float:
    """MB/s produced; ``at_end`` runs once the last record is acknowledged, while
    librdkafka's threads are still alive (they end with the client, and a thread that
    ended takes its CPU time with it)."""
    producer = Producer(
        {
            **conf,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )
    value = b"x" * size
    start = time.perf_counter()
    for _ in range(records):
        produce_waiting(producer, topic, value, 0)
    if producer.flush(120):
        raise RuntimeError("produce did not finish")
    mb_s = records * size / (time.perf_counter() - start) / 1e6
    at_end()
    return mb_s


def _consume_mb_s(
    conf: dict[str, Any], topic: str, records: int, size: int, at_end: Callable[[], None] = _nothing
) -> float:
    """MB/s consumed; ``at_end`` as for :func:`_produce_mb_s`."""
    consumer = Consumer(
        {**conf, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - start
    at_end()
    consumer.close()
    return got * size / elapsed / 1e6


def _exact(sock: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _frame(sock: ssl.SSLSocket, api_key: int, version: int, message: Any, cid: int) -> Any:
    sock.sendall(encode_request(api_key, version, cid, "bench", message))
    head = _exact(sock, 4)
    (size,) = struct.unpack(">i", head)
    data = _exact(sock, size)
    _, offset = parse_response_header(data, response_header_version(api_key, version))
    return decode_response(api_key, version, data[offset:])


def _login(address: tuple[str, int], ca: Path, mechanism: str, password: str) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(address, timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=address[0]) as sock:
            hs = _frame(sock, 17, 1, SaslHandshakeRequest(mechanism=mechanism), 1)
            assert hs.error_code == 0, hs
            if mechanism == "PLAIN":
                r = _frame(
                    sock,
                    36,
                    2,
                    SaslAuthenticateRequest(auth_bytes=f"\0admin\0{password}".encode()),
                    2,
                )
                assert r.error_code == 0, r
                return
            mech = ScramMechanism.SCRAM_SHA_512
            bare = f"n=admin,r={uuid.uuid4().hex}"
            r = _frame(sock, 36, 2, SaslAuthenticateRequest(auth_bytes=b"n,," + bare.encode()), 2)
            first = bytes(r.auth_bytes).decode()
            attrs = dict(p.split("=", 1) for p in first.split(","))
            salted = salted_password(mech, password, base64.b64decode(attrs["s"]), int(attrs["i"]))
            without = f"c=biws,r={attrs['r']}"
            proof = client_proof(mech, salted, f"{bare},{first},{without}".encode())
            final = f"{without},p={base64.b64encode(proof).decode()}".encode()
            r = _frame(sock, 36, 2, SaslAuthenticateRequest(auth_bytes=final), 3)
            assert r.error_code == 0, r


def _logins_per_s(cluster: Cluster, mechanism: str, count: int, password: str) -> float:
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    ca = cluster.data_dir / "certs" / "ca.crt"
    start = time.perf_counter()
    for _ in range(count):
        _login((host, int(port)), ca, mechanism, password)
    return count / (time.perf_counter() - start)


@dataclass(frozen=True)
class Setup:
    """One configuration of the run: its name in the report and how it is started."""

    label: str
    security: str
    internal_tls: bool | None = None  # None: as --security implies
    settings: tuple[tuple[str, str], ...] = ()  # --set


SETUPS = (
    Setup("PLAINTEXT", "plaintext"),
    Setup("SASL_SSL listener", "sasl_ssl", internal_tls=False),
    # The data link over TCP with mutual TLS, as between hosts (docs/data-link.md).
    Setup("SASL_SSL TCP link", "sasl_ssl", settings=(("data.socket.path", ""),)),
    Setup("SASL_SSL", "sasl_ssl"),
)


def _start(setup: Setup, root: Path, replicas: int = 1) -> tuple[Cluster, dict[str, Any]]:
    cluster = Cluster(
        ClusterOptions(
            data_dir=root / setup.label.replace(" ", "-"),
            storage_nodes=replicas,
            port=0,
            console=False,
            security=setup.security,
            internal_tls=setup.internal_tls,
            settings=dict(setup.settings),
        )
    )
    cluster.start()
    conf: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers}
    if setup.security != "plaintext":
        conf.update(parse_properties((cluster.data_dir / "librdkafka.conf").read_text()))
    return cluster, conf


def _pids(cluster: Cluster, kind: str) -> list[int]:
    return [svc.process.pid for svc in cluster.services if svc.spec.kind == kind]


def _thread_schedstats(pid: int | str) -> dict[str, tuple[int, int]]:
    """Nanoseconds each thread of process ``pid`` ("self": the client's Python loop and
    librdkafka's threads) has run and has waited runnable for a core (the first two
    fields of ``/proc/<pid>/task/<tid>/schedstat``), by thread id."""
    out: dict[str, tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ran, waited = f.read().split()[:2]
        except (OSError, ValueError):
            continue
        out[tid] = (int(ran), int(waited))
    return out


def _threads(cluster: Cluster) -> dict[str, dict[str, tuple[int, int]]]:
    """:func:`_thread_schedstats` of the gateway's, the storage node's and the client's
    threads, by kind."""
    out: dict[str, dict[str, tuple[int, int]]] = {"client": _thread_schedstats("self")}
    for kind in ("gateway", "storage"):
        out[kind] = {
            f"{pid}/{tid}": v
            for pid in _pids(cluster, kind)
            for tid, v in _thread_schedstats(pid).items()
        }
    return out


def _phase(
    cluster: Cluster, conf: dict[str, Any], topic: str, phase: str, args: argparse.Namespace
) -> Figures:
    """MB/s of one phase, the CPU seconds per GB the gateway, the storage node and the
    client spent in it, how busy the client's busiest thread was, and each process's
    busiest thread's CPU seconds per GB and the seconds per GB it waited runnable for
    a core. One thread of the pipeline does each stage of a connection's bytes
    (librdkafka's broker thread encrypts them, the gateway's event loop decrypts and
    handles them), so on a shared machine, where each runnable thread gets its share
    of a core, MB/s follows the busiest one (docs/security.md, "Produce over SASL_SSL:
    what the pipeline waits on")."""
    run = _produce_mb_s if phase == "produce" else _consume_mb_s
    gb = args.records * args.size / 1e9
    out: Figures = {}
    before = {k: _cpu_seconds(_pids(cluster, k)) for k in ("gateway", "storage")}
    threads, start = _threads(cluster), time.perf_counter()
    end: list[tuple[float, dict[str, dict[str, tuple[int, int]]]]] = []
    out[phase] = run(
        conf,
        topic,
        args.records,
        args.size,
        lambda: end.append((time.perf_counter() - start, _threads(cluster))),
    )
    elapsed, after = end[0]
    for kind, was in before.items():
        out[f"{phase} {kind} cpu"] = (_cpu_seconds(_pids(cluster, kind)) - was) / gb
    for kind, now in after.items():
        used = {
            t: (ran - threads[kind].get(t, (0, 0))[0], waited - threads[kind].get(t, (0, 0))[1])
            for t, (ran, waited) in now.items()
        }
        ran, waited = max(used.values(), default=(0, 0))
        out[f"{phase} {kind} thread cpu"] = ran / 1e9 / gb
        out[f"{phase} {kind} thread wait"] = waited / 1e9 / gb
        if kind == "client":
            out[f"{phase} client cpu"] = sum(r for r, _ in used.values()) / 1e9 / gb
            out[f"{phase} client thread"] = ran / 1e9 / elapsed
    return out


def _cpu_seconds(pids: list[int]) -> float:
    """CPU seconds the processes' threads have run, from ``/proc/<pid>/task/*/schedstat``
    (nanoseconds): ``/proc/<pid>/stat`` counts clock ticks (10 ms), a tenth of a CPU-s
    per GB on a 100 MB phase, as much as the differences measured. A thread that ended
    takes its time with it: the services' threads live as long as they do."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total / 1e9


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _order(setups: int, round_no: int) -> list[int]:
    """The setups' order in round ``round_no``: reversed every other round (ABBA), so a
    load that rises or falls through the run does not favour the setup measured first."""
    order = list(range(setups))
    return order if round_no % 2 == 0 else order[::-1]


def _warm_up(cluster: Cluster, conf: dict[str, Any], args: argparse.Namespace) -> None:
    """One small unmeasured produce and consume per cluster before the rounds: the
    first phase of a new cluster also opens the data link, the log segment and the
    metadata caches, which the rounds after it do not pay."""
    small = argparse.Namespace(records=max(1, args.records // 10), size=args.size)
    topic = _create(conf, args.replicas)
    _produce_mb_s(conf, topic, small.records, small.size)
    _consume_mb_s(conf, topic, small.records, small.size)


def _ratios(per_round: list[Figures], plain: list[Figures], what: str) -> list[float]:
    """Each round's MB/s over PLAINTEXT's in the same round."""
    return [r[what] / p[what] if p[what] else 0.0 for r, p in zip(per_round, plain, strict=True)]


def _cpu_ratios(per_round: list[Figures], plain: list[Figures], what: str) -> list[float]:
    """Each round's CPU ratio: PLAINTEXT's CPU seconds per GB (gateway + storage +
    client) over the setup's, in the same round. When these processes keep the cores
    busy, MB/s goes as 1 / (CPU per GB), so this estimates the MB/s ratio without the
    other tenants of a shared machine, which move MB/s far more than CPU per GB
    (docs/security.md, "The ratio's noise")."""

    def total(r: Figures) -> float:
        return sum(r[f"{what} {kind} cpu"] for kind in ("gateway", "storage", "client"))

    return [total(p) / total(r) if total(r) else 0.0 for r, p in zip(per_round, plain, strict=True)]


def _busiest(r: Figures, what: str) -> float:
    """CPU seconds per GB of the phase's busiest thread, of the three processes."""
    return max(r[f"{what} {kind} thread cpu"] for kind in ("gateway", "storage", "client"))


def _thread_ratios(per_round: list[Figures], plain: list[Figures], what: str) -> list[float]:
    """Each round's busiest-thread ratio: PLAINTEXT's busiest thread's CPU seconds per
    GB over the setup's. With the cores shared by more runnable threads than cores, each
    thread gets about a fair share of one, so MB/s goes as 1 / (the busiest thread's
    CPU per GB), not 1 / (the pipeline's total): this is what the MB/s ratio comes to
    there (docs/security.md)."""
    return [
        _busiest(p, what) / _busiest(r, what) if _busiest(r, what) else 0.0
        for r, p in zip(per_round, plain, strict=True)
    ]


def _report(setups: list[Setup], rounds: list[list[Figures]], args: argparse.Namespace) -> None:
    """Per round: each setup's MB/s and its ratio to PLAINTEXT's MB/s in the same
    round (measured seconds apart); then the medians over the rounds: MB/s,
    the per-round ratios' median, and the CPU figures' medians."""
    print(
        f"records: {args.records} x {args.size} B, acks=all, one partition, "
        f"{args.replicas} storage node(s) and replica(s); "
        f"{len(rounds[0])} rounds, setups alternating (ABBA), medians"
    )
    plain = rounds[0]
    for what in ("produce", "consume"):
        print(f"{what}:")
        for setup, per_round in zip(setups, rounds, strict=True):
            ratios = _ratios(per_round, plain, what)
            cells = "  ".join(
                f"{r[what]:6.1f} ({ratio:.2f})" for r, ratio in zip(per_round, ratios, strict=True)
            )
            print(f"  {setup.label:<19} rounds MB/s (ratio): {cells}")
        for setup, per_round in zip(setups, rounds, strict=True):
            ratios = _ratios(per_round, plain, what)

            def med(key: str, per_round: list[Figures] = per_round, what: str = what) -> float:
                return _median([r[f"{what} {key}"] for r in per_round])

            print(
                f"  {setup.label:<19} median {_median([r[what] for r in per_round]):7.1f} MB/s  "
                f"ratio {_median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})   "
                f"CPU-s/GB gateway {med('gateway cpu'):5.2f}  "
                f"storage {med('storage cpu'):5.2f}  client {med('client cpu'):5.2f}"
                f"  (busiest client thread {med('client thread'):.0%})"
            )
        for setup, per_round in zip(setups, rounds, strict=True):

            def med2(key: str, per_round: list[Figures] = per_round, what: str = what) -> float:
                return _median([r[f"{what} {key}"] for r in per_round])

            print(
                f"  {setup.label:<19} busiest thread CPU-s/GB (run-queue wait s/GB): "
                + "  ".join(
                    f"{kind} {med2(kind + ' thread cpu'):.2f} ({med2(kind + ' thread wait'):.2f})"
                    for kind in ("gateway", "storage", "client")
                )
            )
        for setup, per_round in zip(setups[1:], rounds[1:], strict=True):
            busiest = _thread_ratios(per_round, plain, what)
            print(
                f"  {setup.label:<19} busiest-thread ratio (PLAINTEXT's busiest thread's "
                f"CPU-s/GB over this one's) {_median(busiest):.2f} "
                f"({min(busiest):.2f}-{max(busiest):.2f})"
            )
            cpu = _cpu_ratios(per_round, plain, what)
            print(
                f"  {setup.label:<19} CPU ratio (PLAINTEXT's CPU-s/GB over this one's, "
                f"all three processes) {_median(cpu):.2f} ({min(cpu):.2f}-{max(cpu):.2f})"
            )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench security")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--logins", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument(
        "--setups",
        default=",".join(s.label for s in SETUPS),
        help="comma-separated labels (PLAINTEXT is always run: the ratios' base)",
    )
    args = parser.parse_args(argv)
    wanted = {w.strip() for w in args.setups.split(",")}
    unknown = wanted - {s.label for s in SETUPS}
    if unknown:
        parser.error(f"unknown setups {sorted(unknown)}; known: {[s.label for s in SETUPS]}")
    setups = [s for s in SETUPS if s.label == "PLAINTEXT" or s.label in wanted]
    # The clusters run side by side and are measured alternately, every round of each
    # kept: a phase is 100 MB, a second or two, so one phase says little on a shared
    # machine; the median of the per-round ratios (each setup against PLAINTEXT of the
    # same round) does.
    rounds: list[list[Figures]] = [[] for _ in setups]
    logins: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp:
        clusters = []
        try:
            for setup in setups:
                clusters.append(_start(setup, Path(tmp), args.replicas))
            for cluster, conf in clusters:
                _warm_up(cluster, conf, args)
            for round_no in range(args.rounds):
                # One phase of every setup after another (produce, then consume), so
                # the phases a ratio compares are seconds apart.
                topics = [_create(conf, args.replicas) for _cluster, conf in clusters]
                measured: list[Figures] = [{} for _ in setups]
                for phase in ("produce", "consume"):
                    for i in _order(len(setups), round_no):
                        cluster, conf = clusters[i]
                        measured[i].update(_phase(cluster, conf, topics[i], phase, args))
                for per_round, figures in zip(rounds, measured, strict=True):
                    per_round.append(figures)
            secured = [i for i, s in enumerate(setups) if s.security == "sasl_ssl"]
            if secured and args.logins > 0:
                cluster, conf = clusters[secured[-1]]
                for mechanism in ("SCRAM-SHA-512", "PLAIN"):
                    logins[mechanism] = _logins_per_s(
                        cluster, mechanism, args.logins, conf["sasl.password"]
                    )
        finally:
            for cluster, _conf in clusters:
                cluster.stop()
    _report(setups, rounds, args)
    for mechanism, rate in logins.items():
        print(f"authentications/s ({mechanism}, TLS + SASL, sequential): {rate:.0f}")
