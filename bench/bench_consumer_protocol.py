"""KIP-848 consumer groups against a local cluster (started here unless ``--bootstrap``
names one), measured in one run next to the classic protocol:

1. settle time: a ``--members`` (10) member group on a ``--partitions`` (30) partition
   topic is stable; one more member joins; time until every partition is owned by
   exactly one of the members again and each owns some. librdkafka (confluent-kafka)
   with ``group.protocol=consumer`` (server-side ``uniform`` assignor) against the
   classic protocol with ``cooperative-sticky``, both with the same heartbeat interval
   (``--heartbeat-ms``, 500). Reported as a ratio consumer/classic (goal <= 0.5).
2. heartbeats per second one coordinator shard sustains: ``--hb-members`` (50)
   members of one group (so one shard) each heartbeating back to back over its own
   connection for ``--seconds`` (5), raw ConsumerGroupHeartbeat v1 requests; the peer
   is classic Heartbeat v4 of a stable classic group of as many members.

    python -m bench consumer_protocol [--members 10] [--rounds 3] [--heartbeat-ms 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from typing import Any

from bench.bench_groups import Conn, Member, create_topic, wait_coordinator
from odradek.protocol.messages import ConsumerGroupHeartbeatRequest, HeartbeatRequest


def _consumer(bootstrap: str, group: str, protocol: str, heartbeat_ms: int) -> Any:
    from confluent_kafka import Consumer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "latest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config.update(
            {
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": heartbeat_ms,
            }
        )
    return Consumer(config)


def _settled(consumers: list[Any], partitions: int) -> bool:
    owned = [{tp.partition for tp in c.assignment()} for c in consumers]
    flat = sorted(p for o in owned for p in o)
    return flat == list(range(partitions)) and all(owned)


def _poll_until_settled(consumers: list[Any], partitions: int, timeout: float = 120.0) -> float:
    started = time.perf_counter()
    while not _settled(consumers, partitions):
        for c in consumers:
            c.poll(0)
        time.sleep(0.005)
        if time.perf_counter() - started > timeout:
            raise RuntimeError("the group never settled")
    return time.perf_counter() - started


def settle_time(
    bootstrap: str, topic: str, protocol: str, members: int, partitions: int, heartbeat_ms: int
) -> float:
    group = f"bench-{protocol}-{uuid.uuid4().hex[:8]}"
    consumers = [_consumer(bootstrap, group, protocol, heartbeat_ms) for _ in range(members)]
    try:
        for c in consumers:
            c.subscribe([topic])
        _poll_until_settled(consumers, partitions)
        # Let the group go quiet before the measured change.
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            for c in consumers:
                c.poll(0)
            time.sleep(0.01)
        joining = _consumer(bootstrap, group, protocol, heartbeat_ms)
        consumers.append(joining)
        joining.subscribe([topic])
        return _poll_until_settled(consumers, partitions)
    finally:
        for c in consumers:
            c.close()


async def heartbeat_rate(bootstrap: str, topic: str, members: int, seconds: float) -> float:
    group = f"bench-hb-{uuid.uuid4().hex[:8]}"
    conns = [await Conn.open(bootstrap) for _ in range(members)]
    await wait_coordinator(conns[0], group)
    epochs: dict[int, int] = {}
    for i, conn in enumerate(conns):
        r = await conn.call(
            ConsumerGroupHeartbeatRequest(
                group_id=group,
                member_id=f"m{i}",
                member_epoch=0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=[topic],
            ),
            1,
        )
        if r.error_code:
            raise RuntimeError(f"join: error {r.error_code}")
        epochs[i] = r.member_epoch
    count = 0
    stop = time.perf_counter() + seconds

    async def beat(i: int, conn: Conn) -> None:
        nonlocal count
        while time.perf_counter() < stop:
            r = await conn.call(
                ConsumerGroupHeartbeatRequest(
                    group_id=group, member_id=f"m{i}", member_epoch=epochs[i]
                ),
                1,
            )
            if r.error_code == 0:
                epochs[i] = r.member_epoch
            count += 1

    started = time.perf_counter()
    await asyncio.gather(*(beat(i, c) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    return count / elapsed


async def classic_heartbeat_rate(bootstrap: str, topic: str, members: int, seconds: float) -> float:
    """The peer: classic Heartbeat requests of a stable classic group of as many members."""
    group = f"bench-classic-hb-{uuid.uuid4().hex[:8]}"
    conns = [await Conn.open(bootstrap) for _ in range(members)]
    await wait_coordinator(conns[0], group)
    group_members = [Member(c, group, topic) for c in conns]
    await asyncio.gather(*(m.join_and_sync() for m in group_members))
    count = 0
    stop = time.perf_counter() + seconds

    async def beat(m: Member) -> None:
        nonlocal count
        while time.perf_counter() < stop:
            await m.conn.call(
                HeartbeatRequest(
                    group_id=group,
                    generation_id=m.generation,
                    member_id=m.member_id,
                    group_instance_id=None,
                ),
                4,
            )
            count += 1

    started = time.perf_counter()
    await asyncio.gather(*(beat(m) for m in group_members))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    return count / elapsed


def _run(bootstrap: str, args: argparse.Namespace) -> None:
    topic = f"bench-kip848-{time.time_ns()}"
    asyncio.run(create_topic(bootstrap, topic, args.partitions))
    time.sleep(1.0)
    consumer_times, classic_times = [], []
    for _ in range(args.rounds):
        consumer_times.append(
            settle_time(
                bootstrap, topic, "consumer", args.members, args.partitions, args.heartbeat_ms
            )
        )
        classic_times.append(
            settle_time(
                bootstrap, topic, "classic", args.members, args.partitions, args.heartbeat_ms
            )
        )
    c_med = statistics.median(consumer_times)
    k_med = statistics.median(classic_times)
    print(
        f"settle after 1 member joins a {args.members}-member group ({args.partitions} "
        f"partitions, heartbeat {args.heartbeat_ms} ms, {args.rounds} rounds, median):"
    )
    print(f"  consumer protocol (KIP-848, uniform): {c_med * 1000:.0f} ms  {_list(consumer_times)}")
    print(f"  classic cooperative-sticky:           {k_med * 1000:.0f} ms  {_list(classic_times)}")
    print(f"  ratio consumer/classic: {c_med / k_med:.2f} (goal <= 0.5)")
    rate = asyncio.run(heartbeat_rate(bootstrap, topic, args.hb_members, args.seconds))
    peer = asyncio.run(classic_heartbeat_rate(bootstrap, topic, args.hb_members, args.seconds))
    print(
        f"ConsumerGroupHeartbeat on one shard: {rate:,.0f}/s "
        f"({args.hb_members} members back to back, {args.seconds:.0f} s)"
    )
    print(f"  peer, classic Heartbeat of a {args.hb_members}-member group: {peer:,.0f}/s")
    print(f"  ratio consumer/classic heartbeats: {rate / peer:.2f}")


def _list(values: list[float]) -> str:
    return "[" + ", ".join(f"{v * 1000:.0f}" for v in values) + "]"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench consumer_protocol")
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--hb-members", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--bootstrap", help="an existing cluster (default: start one here)")
    args, _ = parser.parse_known_args(argv)
    if args.bootstrap:
        _run(args.bootstrap, args)
        return
    from bench.local_cluster import temporary_cluster

    settings = {
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.heartbeat.interval.ms": str(args.heartbeat_ms),
    }
    with temporary_cluster("bench-kip848-", settings=settings) as cluster:
        _run(cluster.bootstrap_servers, args)


if __name__ == "__main__":
    main(sys.argv[1:])
