"""Well-behaved clients beside hostile ones (issue 14): the gateway's p99 and RSS.

One cluster; 100 well-behaved clients each send one-record acks=1 Produce requests
at a steady rate over their own connection and time every answer. Two conditions of
the same length, each in ``--rounds`` segments that alternate (alone, hostile, alone,
...: the load of a shared machine drifts within a minute, and one phase after the other
measured that drift as much as the attack): the 100 alone, and the 100 while 50
hostile clients hammer the same gateway port:

* never-read (20): pipeline Metadata requests and read nothing, until their writes
  stall for 5 s (the gateway stops reading them once
  ``connection.max.unread.response.bytes`` of answers wait), then reconnect;
* trickle (15): announce a 1 MB request and send a byte now and then, until aborted
  (``connection.request.read.timeout.ms``, set to 2 s here), then reconnect;
* oversize (15): announce more than ``socket.request.max.bytes`` and push bytes
  (64 KiB every 10 ms) until closed, then reconnect;
* slow-read (none unless asked, e.g. ``--hostile=...,slow-read=10``): pipeline
  Metadata requests as fast as the gateway reads them and read 4 KiB of answers every
  50 ms: each time the answers drain below ``connection.max.unread.response.bytes``
  the gateway reads on, and finds up to a socket buffer of 26-byte requests waiting.

The hostile clients run in a process of their own, as they would on other machines:
sharing the good clients' event loop, their own work (the oversize clients push
64 KiB writes in a loop) delayed the good clients' timing, not only the gateway.
Attackers on other hosts take no CPU from the gateway's host either, but on a small
shared machine the hostile process did (11-34% of a core), from the gateway, the
storage node and the process that times the well-behaved clients' answers (whose loop
thread waited for a CPU twice as long beside it: docs/security.md, "Hostile clients").
``--attacker-cpu`` says where it runs: ``idle`` (the default) under SCHED_IDLE, on CPU
time nothing else of the machine wants; ``nice`` at nice 19; ``shared`` as any other
process (the method before). Several, comma-separated (``--attacker-cpu=idle,shared``),
each get a segment per round, so they are compared at the same moments. Each run
prints, per placement, what the attack achieved per second (connections opened, bytes
handed to the transport, oversize attempts, trickle bytes, never-read Metadata
requests written; most of a never-read client's bytes fill the two kernels' socket
buffers before its writes stall) beside the gateway's Metadata answers and the
connections it cut: a placement that starved the attack shows there.

Reported: p50/p99 produce latency per phase and their ratio (goal p99 within 1.5x;
a request unanswered for 30 s ends its client and counts as infinitely late),
the gateway's peak RSS per phase against its budget (``queued.max.request.bytes``),
and how many hostile connections the gateway cut. ``python -m bench hostile``
(``--seconds``, ``--good``, ``--rate``, ``--hostile never-read=20,trickle=15,oversize=15``
for another mix, ``--attacker-cpu``); the gateway's CPU use per phase is shown too.

Where the time goes, per phase: how long the gateway's loop thread and the clients'
own loop thread waited for a CPU (``/proc/PID/task/PID/schedstat``: on a shared 2-core
machine, most of the tail, the clients' share included), the CPU of the well-behaved and the hostile clients' processes, and the gateway's loop lag
probe (:mod:`odradek.loop_lag`, turned on here by ``ODRADEK_LOOP_LAG_PROBE_MS=1``):
how often the loop was late by 5/20/50 ms, how often its thread was computing for that
long meanwhile, the cyclic collector's runs, and the TCP retransmissions of the network
namespace (tail loss probes: on loopback, ACKs later than the ~200 ms probe timeout;
they rise ~50-fold with the hostile clients, on the hostile sockets: the gateway's data
link to the storage node is its Unix socket here, and other processes of the namespace
count too; docs/security.md, "Hostile clients"), and the gateway's own Produce time
(``odradek_gateway_request_seconds``: handler start to response ready, the storage
round trip included) against the clients' timing. ``ODRADEK_LOOP_STALL_STACKS=FILE`` in
the environment also writes the loop thread's stacks during its stalls to FILE (a
sample names where the loop thread let go of the GIL, often a system call made from
Python such as ``unsent_bytes``'s ioctl, not necessarily where the time went).
All of these are read while the well-behaved clients run (the hostile process
outlives them by up to 5 s). Last, per condition, its p99 by segment and how many of
the requests at or over its pooled p99 were sent within one second: on the shared
machine the pooled p99 was mostly one episode of one segment in which every client
was late together (docs/security.md, "Hostile clients").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import uvloop

from bench.local_cluster import temporary_cluster
from odradek.protocol.messages import MetadataRequest, ProduceRequest, encode_request
from odradek.records.record import BatchBuilder

READ_TIMEOUT_MS = 2000
KINDS = ("never-read", "trickle", "oversize", "slow-read")
# Where the hostile process may run (--attacker-cpu; hostile_process's _place).
ATTACKER_CPU = ("idle", "nice", "shared")
# What the hostile process counts (printed per second): so a run shows the attack was
# not starved of CPU by its placement.
VOLUME = (
    "connections",
    "bytes",
    "oversize attempts",
    "trickle bytes",
    "never-read requests",
    "slow-read requests",
)
UNANSWERED_S = 30.0
# What an oversize client pushes after its size prefix, and how often (until cut off).
PUSH = b"\0" * 65536
PUSH_EVERY_S = 0.01
BUDGET = 256 * 1024 * 1024
# Between a hostile segment and the next one alone: the gateway drops what the hostile
# process left open when it exited.
SETTLE_S = 1.0
LAG = "odradek_event_loop_lag_seconds"
LAG_CPU = "odradek_event_loop_lag_cpu_seconds"
GC = "odradek_gc_pause_seconds"
# The gateway's own time per request (handler start to response ready, the storage
# node's round trip included), by API: split from the clients' timing, it tells the
# gateway's share of a tail from the clients' process and the machine's.
REQUEST = "odradek_gateway_request_seconds"


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_ticks() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine (/proc/stat), for its idle share."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields)


def _tcp_probes() -> tuple[int, int]:
    """(retransmitted segments, tail loss probes) of this network namespace so far
    (/proc/net/snmp, /proc/net/netstat): on loopback nothing is lost, so a probe means
    a segment's ACK came later than the probe timeout (about 200 ms with one segment
    in flight), what a request in it waits for too. Other processes count as well."""
    counts: dict[str, int] = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            return 0, 0
        for names, values in zip(lines[::2], lines[1::2], strict=False):
            prefix = names.split()[0]
            for name, value in zip(names.split()[1:], values.split()[1:], strict=False):
                counts[prefix + name] = int(value)
    return counts.get("Tcp:RetransSegs", 0), counts.get("TcpExt:TCPLossProbes", 0)


def _answered(metrics_port: int, api: str) -> float:
    """Requests of ``api`` the gateway has handled so far (its Prometheus counter)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    prefix = f'odradek_gateway_requests_total{{request="{api}"'
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)
    )


def _lag_buckets(metrics_port: int) -> dict[tuple[str, str], float]:
    """The loop lag probe's cumulative bucket counts (odradek.loop_lag) by (series, le)."""
    names = "&".join(f"name[]={name}_bucket" for name in (LAG, LAG_CPU, GC, REQUEST))
    with urllib.request.urlopen(
        f"http://127.0.0.1:{metrics_port}/metrics?{names}", timeout=10
    ) as reply:
        text = reply.read().decode()
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith(REQUEST):
            if 'request="Produce"' in line:  # summed over versions
                le = line.split('le="')[-1].split('"')[0]
                value = float(line.rsplit(" ", 1)[1])
                out[(REQUEST, le)] = out.get((REQUEST, le), 0.0) + value
        elif line.startswith("odradek_"):
            labels, _, value = line.partition("} ")
            series, _, labels = labels.partition("{")
            generation = labels.split('generation="')[-1].split('"')[0] if "gen" in labels else ""
            le = labels.split('le="')[-1].rstrip('"')
            out[(series.removesuffix("_bucket") + generation, le)] = float(value)
    return out


def _add_delta(
    into: dict[tuple[str, str], float],
    before: dict[tuple[str, str], float],
    after: dict[tuple[str, str], float],
) -> None:
    """Add one segment's bucket counts (``after - before``) to ``into``."""
    for key, value in after.items():
        into[key] = into.get(key, 0.0) + value - before.get(key, 0.0)


def _data_links(metrics_port: int) -> dict[str, int]:
    """The gateway's data link connections opened so far, by transport (unix, tcp)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("odradek_data_link_connections_total{"):
            transport = line.split('transport="', 1)[1].split('"', 1)[0]
            out[transport] = int(float(line.rsplit(" ", 1)[1]))
    return out


def _stalls(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> str:
    """Probe sleeps late by more than 5/20/50 ms in a phase, and of those late by 5 ms
    or more, how many had the loop's thread on the CPU for 5/20/50 ms (busy, not
    descheduled)."""

    def count(series: str, bound: str = "+Inf") -> int:
        return int(after.get((series, bound), 0) - before.get((series, bound), 0))

    def over(series: str, bound: str) -> int:
        return count(series) - count(series, bound)

    late = "/".join(str(over(LAG, b)) for b in ("0.005", "0.02", "0.05"))
    busy = "/".join(str(over(LAG_CPU, b)) for b in ("0.005", "0.02", "0.05"))
    gcs = "/".join(str(count(f"{GC}{g}")) for g in "012")
    slow_gc = "/".join(str(over(f"{GC}{g}", "0.005")) for g in "012")
    return f"{late:>14} {busy:>14} {gcs:>16} {slow_gc:>10}"


def _request_pct(counts: dict[tuple[str, str], float], q: float) -> str:
    """The bucket bound under which fraction ``q`` of the gateway's Produce times fell."""
    buckets = sorted(
        (float(le), count) for (series, le), count in counts.items() if series == REQUEST
    )
    if not buckets or buckets[-1][1] <= 0:
        return "-"
    for bound, count in buckets:
        if count >= q * buckets[-1][1]:
            return f"<= {bound * 1000:g} ms" if bound != float("inf") else "> 30 s"
    return "-"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _produce_frame(topic: str, partition: int, cid: int) -> bytes:
    builder = BatchBuilder()
    builder.append(int(time.time() * 1000), None, b"x" * 100)
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            data(
                name=topic,
                partition_data=[
                    data.PartitionProduceData(index=partition, records=builder.build())
                ],
            )
        ],
    )
    return encode_request(0, 9, cid, "good", request)


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def _good_client(
    host: str,
    port: int,
    topic: str,
    index: int,
    rate: float,
    stop: float,
    out: list[float],
    sent_at: list[float],
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    interval = 1.0 / rate
    cid = 0
    next_at = time.monotonic() + (index % 10) * interval / 10
    try:
        while time.monotonic() < stop:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
            cid += 1
            sent = time.perf_counter()
            writer.write(_produce_frame(topic, index % 3, cid))
            try:
                await asyncio.wait_for(_read_frame(reader), UNANSWERED_S)
            except TimeoutError:
                out.append(float("inf"))  # unanswered: counts above any percentile
                sent_at.append(sent)
                return
            out.append(time.perf_counter() - sent)
            sent_at.append(sent)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _count(volume: dict[str, int], key: str, n: int = 1) -> None:
    volume[key] = volume.get(key, 0) + n


async def _cut(
    kind: str,
    host: str,
    port: int,
    stop: float,
    cuts: dict[str, int],
    volume: dict[str, int],
) -> None:
    """One hostile client: misbehave until the gateway cuts us off, then start again.
    What it achieved goes into ``volume`` (see :data:`VOLUME`): bytes are those handed
    to the transport (a never-read client's last write may still sit in its buffer)."""
    metadata = encode_request(
        3,
        12,
        1,
        "hostile",
        MetadataRequest(
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ),
    )
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        _count(volume, "connections")
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow_reader = None
        if kind == "slow-read":
            slow_reader = asyncio.ensure_future(_read_slowly(reader))
        try:
            while time.monotonic() < stop:
                if kind in ("slow-read", "never-read"):
                    n = 2000 if kind == "slow-read" else 50
                    writer.write(metadata * n)
                    _count(volume, "bytes", n * len(metadata))
                    _count(volume, f"{kind} requests", n)
                    await asyncio.wait_for(writer.drain(), 5)
                elif kind == "trickle":
                    writer.write(struct.pack(">i", 1_000_000))
                    _count(volume, "bytes", 4)
                    while time.monotonic() < stop:
                        writer.write(b"\0")
                        _count(volume, "bytes")
                        _count(volume, "trickle bytes")
                        await writer.drain()
                        await asyncio.sleep(0.5)
                else:  # oversize
                    writer.write(struct.pack(">i", 200 * 1024 * 1024) + PUSH)
                    _count(volume, "oversize attempts")
                    _count(volume, "bytes", 4 + len(PUSH))
                    while time.monotonic() < stop:
                        await asyncio.wait_for(writer.drain(), 5)
                        # The next 64 KiB once the gateway has had PUSH_EVERY_S to cut
                        # us off: pushed back to back, this process wrote up to 4 MiB
                        # (its own socket's send buffer) per connection the gateway had
                        # refused on its first read, ~5 writes on average, CPU taken
                        # from the gateway on this machine.
                        with contextlib.suppress(TimeoutError):
                            if not await asyncio.wait_for(reader.read(1), PUSH_EVERY_S):
                                cuts[kind] = cuts.get(kind, 0) + 1  # closed (EOF)
                                break
                        writer.write(PUSH)
                        _count(volume, "bytes", len(PUSH))
                if reader.at_eof():
                    break
        except (OSError, TimeoutError, RuntimeError, asyncio.IncompleteReadError):
            # (uvloop raises RuntimeError for a write to a transport the reset closed)
            cuts[kind] = cuts.get(kind, 0) + 1
        finally:
            if slow_reader is not None:
                slow_reader.cancel()
            writer.close()
        await asyncio.sleep(0.05)


async def _read_slowly(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(OSError):
        while await reader.read(4096):
            await asyncio.sleep(0.05)


@dataclass
class Phase:
    """What one phase measured."""

    latencies: list[float]
    peak_rss_mib: float
    cuts: dict[str, int]
    gateway_cpu: float  # CPU seconds per second
    machine_idle: float  # share of the machine's CPU time
    tcp_retransmits: int  # segments retransmitted in the network namespace
    tcp_loss_probes: int  # of which tail loss probes
    gateway_runq: float  # seconds per second the gateway's loop thread waited for a CPU
    hostile_cpu: float  # CPU seconds per second of the hostile clients' process
    clients_cpu: float  # ... of this process (the well-behaved clients)
    # seconds per second this process's loop thread (the clients' timing) waited for a CPU
    clients_runq: float
    seconds: float = 0.0  # the phase's length (summed over pooled segments)
    # what the hostile clients achieved (:data:`VOLUME`), totals over the phase
    volume: dict[str, int] = field(default_factory=dict)
    hostile_runq: float = 0.0  # seconds per second the hostile process waited for a CPU
    # when each request of ``latencies`` was sent (time.perf_counter), in the same order
    sent_at: list[float] = field(default_factory=list)
    # the gateway's lag probe buckets while the well-behaved clients ran (_lag_buckets)
    lag: dict[tuple[str, str], float] = field(default_factory=dict)


def _pooled(segments: list[Phase]) -> Phase:
    """One condition's segments of equal length as one phase: latencies and counts
    pooled, rates averaged, the highest RSS."""
    n = len(segments)
    cuts: dict[str, int] = {}
    volume: dict[str, int] = {}
    for seg in segments:
        for kind, count in seg.cuts.items():
            cuts[kind] = cuts.get(kind, 0) + count
        for key, count in seg.volume.items():
            volume[key] = volume.get(key, 0) + count
    return Phase(
        [lat for seg in segments for lat in seg.latencies],
        max(seg.peak_rss_mib for seg in segments),
        cuts,
        sum(seg.gateway_cpu for seg in segments) / n,
        sum(seg.machine_idle for seg in segments) / n,
        sum(seg.tcp_retransmits for seg in segments),
        sum(seg.tcp_loss_probes for seg in segments),
        sum(seg.gateway_runq for seg in segments) / n,
        sum(seg.hostile_cpu for seg in segments) / n,
        sum(seg.clients_cpu for seg in segments) / n,
        sum(seg.clients_runq for seg in segments) / n,
        sum(seg.seconds for seg in segments),
        volume,
        sum(seg.hostile_runq for seg in segments) / n,
        [sent for seg in segments for sent in seg.sent_at],
    )


def _runq_s(pid: int) -> float:
    """Seconds the loop thread of ``pid`` has waited on a run queue (schedstat)."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9


def _rusage_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def _phase(
    host: str,
    port: int,
    topic: str,
    args: argparse.Namespace,
    pid: int,
    attacker_cpu: str | None,
    seconds: float,
    metrics_port: int,
) -> Phase:
    """One segment: the well-behaved clients alone (``attacker_cpu`` None), or beside
    the hostile process run with that CPU placement (:data:`ATTACKER_CPU`). Measured
    while the well-behaved clients run: the hostile process outlives them by up to 5 s
    (a never-read client waits that long for its stalled write), and that tail, with
    no client to delay, held half of a segment's loop turns of more than 5 ms of the
    gateway's own CPU and part of its CPU (docs/security.md, "Hostile clients")."""
    child = None
    if attacker_cpu is not None:
        mix = ",".join(f"{kind}={count}" for kind, count in args.hostile.items())
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import sys; from bench.bench_hostile import hostile_process; "
            "hostile_process(sys.argv[1:])",
            host,
            str(port),
            str(seconds),
            mix,
            attacker_cpu,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=str(Path(__file__).resolve().parent.parent),
        )
        assert child.stdout is not None and child.stdin is not None
        await child.stdout.readline()  # "ready": imported, placed, not started
    # (the scrape holds the gateway's loop a little: one per segment, in every condition)
    lag_start = _lag_buckets(metrics_port)
    stop = time.monotonic() + seconds
    cpu_start = _cpu_s(pid)
    runq_start = _runq_s(pid)
    clients_runq_start = _runq_s(os.getpid())
    self_start = _rusage_s(resource.RUSAGE_SELF)
    idle_start, total_start = _cpu_ticks()
    retrans_start, probes_start = _tcp_probes()
    latencies: list[float] = []
    sent_at: list[float] = []
    report: dict[str, object] = {}
    peak = 0.0

    async def sample() -> None:
        nonlocal peak
        while time.monotonic() < stop:
            peak = max(peak, _rss_mib(pid))
            await asyncio.sleep(0.1)

    if child is not None:
        assert child.stdin is not None
        child.stdin.write(b"go\n")
    tasks = [
        asyncio.ensure_future(
            _good_client(host, port, topic, i, args.rate, stop, latencies, sent_at)
        )
        for i in range(args.good)
    ]
    tasks.append(asyncio.ensure_future(sample()))
    await asyncio.gather(*tasks, return_exceptions=True)
    idle_end, total_end = _cpu_ticks()
    retrans_end, probes_end = _tcp_probes()
    cpu_end, runq_end = _cpu_s(pid), _runq_s(pid)
    clients_runq_end = _runq_s(os.getpid())
    self_end = _rusage_s(resource.RUSAGE_SELF)
    lag: dict[tuple[str, str], float] = {}
    _add_delta(lag, lag_start, _lag_buckets(metrics_port))
    if child is not None:
        out, _ = await child.communicate()
        report = json.loads(out or b"{}")
    return Phase(
        latencies,
        peak,
        dict(report.get("cuts", {})),  # type: ignore[call-overload]
        (cpu_end - cpu_start) / seconds,
        (idle_end - idle_start) / max(1, total_end - total_start),
        retrans_end - retrans_start,
        probes_end - probes_start,
        (runq_end - runq_start) / seconds,
        float(report.get("cpu_s", 0.0)) / seconds,  # type: ignore[arg-type]
        (self_end - self_start) / seconds,
        (clients_runq_end - clients_runq_start) / seconds,
        seconds,
        dict(report.get("volume", {})),  # type: ignore[call-overload]
        float(report.get("runq_s", 0.0)) / seconds,  # type: ignore[arg-type]
        sent_at,
        lag,
    )


def _place(attacker_cpu: str) -> None:
    """Put this (the hostile) process where ``attacker_cpu`` says (:data:`ATTACKER_CPU`)."""
    if attacker_cpu == "idle":
        # SCHED_IDLE: runs only on a CPU nothing else of the machine wants (Linux's
        # sched(7)); its loopback sends' kernel work (delivery into the gateway's
        # socket) runs in its context too, so it is deferred with it.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    elif attacker_cpu == "nice":
        os.nice(19)  # weight 15 against 1024 (nice 0): ~1.5% of a contended CPU
    elif attacker_cpu != "shared":
        raise ValueError(f"unknown attacker CPU placement {attacker_cpu!r}")


def hostile_process(argv: list[str]) -> None:
    """The hostile clients' process: ``host port seconds mix attacker_cpu``; places
    itself (:func:`_place`), prints ``ready``, starts on a line read from stdin, then
    prints the cuts, what it achieved (:data:`VOLUME`), its CPU seconds and how long it
    waited for a CPU (JSON)."""
    host, port, seconds, mix = argv[0], int(argv[1]), float(argv[2]), _mix(argv[3])
    _place(argv[4] if len(argv) > 4 else "shared")
    volume: dict[str, int] = {}

    async def run() -> dict[str, int]:
        loop = asyncio.get_running_loop()

        def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
            # A reset by the gateway, delivered to a stream future nobody awaits any more
            # (a read given up on after PUSH_EVERY_S): what the attack is for, not news.
            if not isinstance(context.get("exception"), ConnectionError):
                loop.default_exception_handler(context)

        loop.set_exception_handler(quiet)
        stop = time.monotonic() + seconds
        cuts: dict[str, int] = {}
        kinds = [kind for kind, count in mix.items() for _ in range(count)]
        await asyncio.gather(
            *(_cut(k, host, port, stop, cuts, volume) for k in kinds), return_exceptions=True
        )
        return cuts

    # Ready once imported; the attack starts on the parent's word, so this process's
    # start (a second of CPU importing the protocol modules) is not part of a segment,
    # and its CPU is counted from then on.
    print("ready", flush=True)
    sys.stdin.readline()
    cpu_start = time.process_time()
    runq_start = _runq_s(os.getpid())
    # uvloop, as the gateway runs: on the default loop the same attack cost this process
    # about twice the CPU per connection (~2 ms per oversize attempt, half of it asyncio's
    # Python), CPU taken from the gateway on a 2-core machine.
    cuts = uvloop.run(run())
    print(
        json.dumps(
            {
                "cuts": cuts,
                "cpu_s": time.process_time() - cpu_start,
                "runq_s": _runq_s(os.getpid()) - runq_start,
                "volume": volume,
            }
        ),
        flush=True,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


def _worst_second(ph: Phase, p99_ms: float) -> tuple[int, int]:
    """(of the requests at or over ``p99_ms``, how many were sent within the one second
    that holds the most of them; how many there are): near all of them in one second
    means the p99 is one episode in which every client waited (on a shared machine,
    mostly the gateway or the clients waiting for a CPU), not the attack's steady cost."""
    slow = sorted(
        sent for lat, sent in zip(ph.latencies, ph.sent_at, strict=True) if lat * 1000 >= p99_ms
    )
    worst = start = 0
    for end, sent in enumerate(slow):
        while sent - slow[start] > 1.0:
            start += 1
        worst = max(worst, end - start + 1)
    return worst, len(slow)


def _mix(text: str) -> dict[str, int]:
    """``kind=count,...`` for --hostile."""
    mix: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, _, count = item.partition("=")
        if kind not in KINDS:
            raise argparse.ArgumentTypeError(f"unknown hostile kind {kind!r}")
        mix[kind] = int(count)
    return mix


def _placements(text: str) -> list[str]:
    """``--attacker-cpu``: one or more of :data:`ATTACKER_CPU`, comma-separated."""
    modes = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [mode for mode in modes if mode not in ATTACKER_CPU]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(
            f"--attacker-cpu takes {', '.join(ATTACKER_CPU)} (comma-separated), not {text!r}"
        )
    return list(dict.fromkeys(modes))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench hostile")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--good", type=int, default=100)
    parser.add_argument("--rate", type=float, default=5.0, help="requests/s per good client")
    parser.add_argument(
        "--hostile",
        type=_mix,
        default=_mix("never-read=20,trickle=15,oversize=15"),
        help="hostile clients by kind (default never-read=20,trickle=15,oversize=15)",
    )
    parser.add_argument(
        "--attacker-cpu",
        type=_placements,
        default=["idle"],
        help="where the hostile process runs (default idle): idle = SCHED_IDLE, the CPU "
        "nothing else wants, as attackers on other hosts would take none of the "
        "gateway's or the clients'; nice = nice 19; shared = as any process (the "
        "method before). Several, comma-separated, each get their segments in every "
        "round, e.g. --attacker-cpu=idle,shared",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="alternate alone and hostile segments this many times (each --seconds/rounds "
        "long), so both conditions see the machine's load at the same moments",
    )
    args, _ = parser.parse_known_args(argv)
    settings = {
        "connection.request.read.timeout.ms": str(READ_TIMEOUT_MS),
        "queued.max.request.bytes": str(BUDGET),
        "max.connections.per.ip": "1000",
    }
    modes: list[str] = args.attacker_cpu
    # The gateway's loop lag probe (odradek.loop_lag), read per phase.
    os.environ["ODRADEK_LOOP_LAG_PROBE_MS"] = "1"
    with temporary_cluster("odradek-bench-hostile-", settings=settings) as cluster:
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        gateway = next(s for s in cluster.services if s.spec.kind == "gateway")
        pid = gateway.process.pid
        topic = f"hostile-{uuid.uuid4().hex[:6]}"
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
        del admin  # else it outlives the cluster, logging failed reconnects
        time.sleep(1.0)
        baseline = _rss_mib(pid)
        metrics_port = gateway.ports["metrics"]
        # Segments alternate (alone, hostile, alone, ...): on a machine shared with other
        # work, its load drifts over a minute, and two phases run one after the other
        # compared the load of two moments as much as the attack (ratios of 0.7-12x
        # for the same code). Each condition's segments are pooled. With several
        # placements of the hostile process, each round runs them in turn after its
        # segment alone, starting with another one each round.
        seconds = args.seconds / args.rounds
        conditions: list[str | None] = [None, *modes]
        segments: dict[str | None, list[Phase]] = {c: [] for c in conditions}
        lag: dict[str | None, dict[tuple[str, str], float]] = {c: {} for c in conditions}
        metadata_answered: dict[str, float] = dict.fromkeys(modes, 0.0)
        for round_ in range(args.rounds):
            shift = round_ % len(modes)
            for condition in [None, *modes[shift:], *modes[:shift]]:
                # The whole /metrics page held the gateway's loop ~6 ms per scrape (a stall
                # sample named it): scraped outside the lag probe's counts.
                metadata_before = _answered(metrics_port, "Metadata")
                segment = asyncio.run(
                    _phase(host, int(port), topic, args, pid, condition, seconds, metrics_port)
                )
                segments[condition].append(segment)
                _add_delta(lag[condition], {}, segment.lag)
                if condition is not None:
                    metadata_answered[condition] += (
                        _answered(metrics_port, "Metadata") - metadata_before
                    )
                    # the connections the hostile process left are the gateway's to drop
                    # before the next segment starts
                    time.sleep(SETTLE_S)
        links = _data_links(metrics_port)
    pooled = {c: _pooled(segments[c]) for c in conditions}
    alone = pooled[None]
    n_hostile = sum(args.hostile.values())

    def label(condition: str | None) -> str:
        return "alone" if condition is None else f"{n_hostile} hostile, {condition}"

    print(
        f"{args.good} clients x {args.rate:g} one-record acks=1 produces/s, {args.seconds:g} s "
        f"per phase in {args.rounds} alternating segment(s) each; gateway RSS at start {baseline:.0f} MiB, budget "
        f"(queued.max.request.bytes) {BUDGET // (1 << 20)} MiB"
    )
    print(
        f"hostile mix: {args.hostile}; attacker CPU placement(s) run: {', '.join(modes)} "
        "(idle = SCHED_IDLE, nice = nice 19, shared = as any process, the method before)"
    )
    print(
        f"{'phase':<22} {'answers':>8} {'p50 ms':>8} {'p99 ms':>8} {'peak RSS MiB':>13} "
        f"{'gateway CPU':>12} {'runq wait':>10} {'clients CPU':>12} {'clients runq':>13} "
        f"{'hostile CPU':>12} {'hostile runq':>13} "
        f"{'machine idle':>13} {'loop late ms':>14} {'loop busy ms':>14} "
        f"{'gc runs by gen':>16} {'gc > 5 ms':>10} {'TCP retrans/TLP':>16}"
    )
    for condition in conditions:
        ph = pooled[condition]
        lat = ph.latencies
        print(
            f"{label(condition):<22} {len(lat):>8} {_pct(lat, 0.5):>8.1f} "
            f"{_pct(lat, 0.99):>8.1f} "
            f"{ph.peak_rss_mib:>13.0f} {ph.gateway_cpu:>11.0%} {ph.gateway_runq:>9.0%} "
            f"{ph.clients_cpu:>11.0%} {ph.clients_runq:>12.0%} {ph.hostile_cpu:>11.0%} "
            f"{ph.hostile_runq:>12.0%} "
            f"{ph.machine_idle:>12.0%} {_stalls({}, lag[condition])}"
            f" {f'{ph.tcp_retransmits}/{ph.tcp_loss_probes}':>16}"
        )
    print(
        "loop late ms: the gateway's 1 ms loop lag probe (odradek.loop_lag) late by more "
        "than 5/20/50 ms, that many times; loop busy ms: of those, how many had the loop's "
        "thread on the CPU for more than 5/20/50 ms of it (the loop working, not waiting "
        "for a CPU)"
    )
    print(
        "TCP retrans/TLP: segments retransmitted in this network namespace (other "
        "processes' too) and of those tail loss probes: on loopback an ACK later than "
        "the probe timeout (~200 ms with one segment in flight), a request waiting as long"
    )
    print(
        "runq wait: time the gateway's loop thread was ready to run but waited for a CPU "
        "(/proc schedstat), per second; clients CPU: the well-behaved clients' process; "
        "clients runq: its loop thread's wait for a CPU (the clients time every answer on "
        "that loop: a wait there is in their latencies, whatever the gateway did); "
        "hostile runq: the hostile process's wait for a CPU (under SCHED_IDLE, the time "
        "it yielded the CPU to everything else)"
    )
    print(
        "the gateway's data link connections to the storage node by transport: "
        f"{links or 'none'} (unix: the node's socket on this host, docs/data-link.md)"
    )
    for condition in conditions:
        print(
            f"gateway's own Produce time, {label(condition)} (handler start to response "
            f"ready, the storage round trip included; bucket bounds): p50 "
            f"{_request_pct(lag[condition], 0.5)}, p99 {_request_pct(lag[condition], 0.99)}"
        )
    print(
        "attack volume achieved, per second (connections opened, bytes handed to the "
        "transport, oversize attempts, trickle bytes, never-read Metadata requests "
        "written; the gateway's Metadata answers; connections the gateway cut by kind):"
    )
    for mode in modes:
        ph = pooled[mode]
        per_s = max(ph.seconds, 1e-9)
        volume = "  ".join(f"{key} {ph.volume.get(key, 0) / per_s:,.1f}" for key in VOLUME)
        cut = ", ".join(f"{kind} {count / per_s:.1f}" for kind, count in sorted(ph.cuts.items()))
        print(
            f"  {mode:<7} {volume}  Metadata answers {metadata_answered[mode] / per_s:,.0f}"
            f"  cut: {cut or 'none'}"
        )
    for mode in modes:
        ph = pooled[mode]
        ratio = _pct(ph.latencies, 0.99) / max(_pct(alone.latencies, 0.99), 1e-9)
        print(
            f"p99 with hostile ({mode}) / alone: {ratio:.2f}x (goal <= 1.5x); peak RSS "
            f"{ph.peak_rss_mib:.0f} MiB vs start + budget {baseline + BUDGET / (1 << 20):.0f} MiB"
        )
    # What sets each p99: a steady cost spreads the slow requests over the segments; an
    # episode (every client late together) puts them in one second of one segment.
    for condition in conditions:
        ph = pooled[condition]
        worst, slow = _worst_second(ph, _pct(ph.latencies, 0.99))
        by_segment = " / ".join(f"{_pct(seg.latencies, 0.99):.0f}" for seg in segments[condition])
        print(
            f"p99 of {label(condition)}: by segment {by_segment} ms; of the {slow} requests "
            f"at or over the pooled p99, {worst} were sent within one second"
        )
