"""Web console page times on a large cluster: ``--topics`` (1,000) topics of
``--partitions`` (10) partitions each, and ``--groups`` (50) consumer groups with
committed offsets on ``--group-partitions`` (100) partitions each, on a local cluster
started here (the console included, as ``odradek up`` starts it).

Reports, for the Topics page, the Consumer groups page, the Overview and one topic's
page: the first (cold) and median/p90 of ``--repeats`` (10) full page loads over HTTP
(the server renders everything; the browser only adds the page's CSS), and the ratio
of the median to the 1 s target.

    python -m bench console [--topics=1000] [--partitions=10] [--groups=50] [--repeats=10]
                            [--storage-nodes=2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from odradek.kafka_client import ClientConfig, KafkaClient, check
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.messages import request_class
from odradek.tools.launcher import Cluster, ClusterOptions

TARGET_S = 1.0


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench console")
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=10)
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--group-partitions", type=int, default=100)
    p.add_argument("--repeats", type=int, default=10)
    # Each partition keeps its .log/.index/.timeindex open: 10,000 partitions on one node
    # need ~30,000 descriptors, over this machine's 20,000 (ulimit -n), so spread them.
    p.add_argument("--storage-nodes", type=int, default=2)
    p.add_argument("--batch", type=int, default=50, help="topics per CreateTopics request")
    return p.parse_args(argv)


async def create_topics(client: KafkaClient, names: list[str], partitions: int, batch: int) -> None:
    cls = request_class(ApiKey.CREATE_TOPICS)
    started = time.perf_counter()
    for i in range(0, len(names), batch):
        chunk = names[i : i + batch]
        request = cls(
            topics=[
                cls.CreatableTopic(
                    name=n,
                    num_partitions=partitions,
                    replication_factor=-1,
                    assignments=[],
                    configs=[],
                )
                for n in chunk
            ],
            timeout_ms=120_000,
            validate_only=False,
        )
        response = await client.send(ApiKey.CREATE_TOPICS, request)
        for t in response.topics:
            if t.error_code != 36:  # TOPIC_ALREADY_EXISTS: a rerun on the same cluster
                check(t.error_code, t.error_message)
        # Paced: the storage node opens partitions one by one (~tens per second here) and
        # its heartbeats starve if thousands queue up, so each batch waits to be served.
        await wait_until_served(client, chunk, quiet=True)
        done = i + len(chunk)
        rate = done * partitions / (time.perf_counter() - started)
        print(f"  created {done}/{len(names)} topics ({rate:.0f} partitions/s)", flush=True)


async def commit_groups(
    client: KafkaClient, groups: list[str], topics: list[str], partitions: int, per_group: int
) -> None:
    from odradek.console.groups import find_coordinators

    cls = request_class(ApiKey.OFFSET_COMMIT)
    coordinators = await find_coordinators(client, groups)
    tps = [(t, p) for t in topics for p in range(partitions)]
    for n, group in enumerate(groups):
        chosen = tps[(n * per_group) % len(tps) :][:per_group]
        by_topic: dict[str, list[int]] = {}
        for t, p in chosen:
            by_topic.setdefault(t, []).append(p)
        request = cls(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                cls.OffsetCommitRequestTopic(
                    name=t,
                    partitions=[
                        cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=0, committed_leader_epoch=-1
                        )
                        for p in ps
                    ],
                )
                for t, ps in by_topic.items()
            ],
        )
        await client.send(ApiKey.OFFSET_COMMIT, request, coordinators[group])
    print(f"  committed offsets for {len(groups)} groups x {per_group} partitions", flush=True)


async def wait_until_served(
    client: KafkaClient,
    topics: list[str] | None = None,
    timeout_s: float = 900.0,
    quiet: bool = False,
) -> None:
    """Until every partition answers ListOffsets: the storage nodes have loaded them all."""
    from odradek.console.offsets import LATEST, list_offsets, partitions_of

    started = time.perf_counter()
    while True:
        client.invalidate()
        metadata = await client.metadata(topics)
        tps = partitions_of(metadata)
        found = await list_offsets(client, dict.fromkeys(tps, LATEST), metadata)
        served = sum(1 for r in found.values() if not r.error)
        if not quiet:
            print(f"  {served}/{len(tps)} partitions served", flush=True)
        if served == len(tps):
            if not quiet:
                elapsed = time.perf_counter() - started
                print(f"  every partition served after {elapsed:.0f}s", flush=True)
            return
        if time.perf_counter() - started > timeout_s:
            raise SystemExit(f"only {served}/{len(tps)} partitions served after {timeout_s:.0f}s")
        await asyncio.sleep(0.5 if quiet else 5)


def load(url: str) -> tuple[float, int, str]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as resp:
        body = resp.read()
        timing = resp.headers.get("Server-Timing", "")
    return time.perf_counter() - started, len(body), timing


def measure(name: str, url: str, repeats: int) -> None:
    cold, size, _ = load(url)
    times = sorted(load(url)[0] for _ in range(repeats))
    median = statistics.median(times)
    p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
    print(
        f"{name:<16} cold {cold * 1000:7.0f} ms   median {median * 1000:7.0f} ms   "
        f"p90 {p90 * 1000:7.0f} ms   {size / 1024:6.0f} KiB   median/target {median / TARGET_S:.2f}",
        flush=True,
    )


def main(argv: list[str]) -> None:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        cluster = Cluster(
            ClusterOptions(
                data_dir=Path(tmp),
                port=0,
                storage_nodes=args.storage_nodes,
                start_timeout=120.0,
                # A storage node busy opening partitions must not be declared dead.
                settings={"broker.session.timeout.ms": "60000"},
            )
        )
        print("starting a local cluster ...", flush=True)
        cluster.start()
        try:
            topics = [f"bench-{i:04d}" for i in range(args.topics)]
            groups = [f"bench-group-{i:03d}" for i in range(args.groups)]

            async def setup() -> None:
                client = KafkaClient(
                    ClientConfig(tuple(cluster.bootstrap_servers.split(",")), request_timeout_s=180)
                )
                try:
                    started = time.perf_counter()
                    await create_topics(client, topics, args.partitions, args.batch)
                    print(
                        f"  {args.topics} topics / {args.topics * args.partitions} partitions "
                        f"created in {time.perf_counter() - started:.1f}s",
                        flush=True,
                    )
                    await wait_until_served(client)
                    await commit_groups(
                        client, groups, topics, args.partitions, args.group_partitions
                    )
                finally:
                    await client.close()

            asyncio.run(setup())
            base = cluster.console_url.rstrip("/")
            print(
                f"console page times ({args.topics} topics, {args.topics * args.partitions} "
                f"partitions, {args.groups} groups), {args.repeats} loads each:",
                flush=True,
            )
            measure("topics", f"{base}/topics", args.repeats)
            measure("topics ?q=", f"{base}/topics?q=bench-00", args.repeats)
            measure("groups", f"{base}/groups", args.repeats)
            measure("overview", f"{base}/", args.repeats)
            measure("topic page", f"{base}/topics/{topics[0]}", args.repeats)
            measure("group page", f"{base}/groups/{groups[0]}", args.repeats)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
