"""Consumer-group benchmarks against a local cluster (started here unless
``--bootstrap`` names one):

1. offset commits per second with ``--groups`` (100) groups committing concurrently,
   each over its own connection, one partition per commit (acks=all to
   ``__consumer_offsets``), next to the peer path in the same run: Produce acks=-1 of
   one small record per request from as many connections (gateway -> storage, no
   coordinator or offset store hop);
2. rebalance time of a ``--members`` (10) member group: forming it from nothing, and
   a full rebalance after one member rejoins with new metadata (every member learns
   it from its heartbeat, rejoins, and gets its assignment from SyncGroup).

    python -m bench groups [--groups 100] [--seconds 5] [--members 10] [--bootstrap H:P]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import struct
import sys
import time
from typing import Any

from odradek.protocol.consumer_protocol import encode_assignment, encode_subscription
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    CreateTopicsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    ProduceRequest,
    SyncGroupRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version
from odradek.records.record import BatchBuilder

_ids = itertools.count(1)


class Conn:
    """One Kafka connection, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, bootstrap: str) -> Conn:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    async def call(self, request: Any, version: int) -> Any:
        cid = next(_ids)
        self.writer.write(encode_request(request.API_KEY, version, cid, "bench", request))
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        payload = await self.reader.readexactly(size)
        _, pos = parse_response_header(payload, response_header_version(request.API_KEY, version))
        return decode_response(request.API_KEY, version, payload[pos:])

    def close(self) -> None:
        self.writer.close()


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    conn = await Conn.open(bootstrap)
    T = CreateTopicsRequest.CreatableTopic
    await conn.call(
        CreateTopicsRequest(
            topics=[
                T(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=30000,
            validate_only=False,
        ),
        4,
    )
    conn.close()


async def wait_coordinator(conn: Conn, group: str) -> None:
    for _ in range(300):
        r = await conn.call(FindCoordinatorRequest(key=group, key_type=0), 3)
        if r.error_code == 0:
            hb = await conn.call(
                HeartbeatRequest(group_id=group, generation_id=-1, member_id="probe"), 0
            )
            if hb.error_code not in (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.NOT_COORDINATOR,
            ):
                return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"no coordinator for {group}")


# -- 1. commits per second ------------------------------------------------------------------
async def commit_rate(
    bootstrap: str, topic: str, groups: int, seconds: float
) -> tuple[float, list[float]]:
    conns = [await Conn.open(bootstrap) for _ in range(groups)]
    names = [f"bench-commit-{i}" for i in range(groups)]
    await asyncio.gather(*(wait_coordinator(c, g) for c, g in zip(conns, names, strict=True)))
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    counts = [0] * groups

    async def run(i: int) -> None:
        offset = 0
        while time.perf_counter() < stop:
            offset += 1
            req = OffsetCommitRequest(
                group_id=names[i],
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    T(
                        name=topic,
                        partitions=[
                            P(
                                partition_index=i % 6,
                                committed_offset=offset,
                                committed_leader_epoch=-1,
                                committed_metadata=None,
                            )
                        ],
                    )
                ],
            )
            started = time.perf_counter()
            r = await conns[i].call(req, 8)
            latencies.append(time.perf_counter() - started)
            if r.topics[0].partitions[0].error_code == 0:
                counts[i] += 1

    started = time.perf_counter()
    await asyncio.gather(*(run(i) for i in range(groups)))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    return sum(counts) / elapsed, latencies


async def produce_rate(bootstrap: str, topic: str, conns_n: int, seconds: float) -> float:
    conns = [await Conn.open(bootstrap) for _ in range(conns_n)]
    T = ProduceRequest.TopicProduceData
    stop = time.perf_counter() + seconds
    counts = [0] * conns_n

    async def run(i: int) -> None:
        while time.perf_counter() < stop:
            b = BatchBuilder()
            b.append(int(time.time() * 1000), b"key-0123456789", b"value-0123456789abcdef")
            req = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    T(
                        name=topic,
                        partition_data=[T.PartitionProduceData(index=i % 6, records=b.build())],
                    )
                ],
            )
            r = await conns[i].call(req, 9)
            if r.responses[0].partition_responses[0].error_code == 0:
                counts[i] += 1

    started = time.perf_counter()
    await asyncio.gather(*(run(i) for i in range(conns_n)))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    return sum(counts) / elapsed


# -- 2. rebalance time ----------------------------------------------------------------------
class Member:
    def __init__(self, conn: Conn, group: str, topic: str) -> None:
        self.conn = conn
        self.group = group
        self.topic = topic
        self.member_id = ""
        self.generation = -1
        self.metadata = encode_subscription([topic])

    async def join_and_sync(self) -> None:
        P = JoinGroupRequest.JoinGroupRequestProtocol
        while True:
            r = await self.conn.call(
                JoinGroupRequest(
                    group_id=self.group,
                    session_timeout_ms=30000,
                    rebalance_timeout_ms=30000,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=[P(name="range", metadata=self.metadata)],
                    reason=None,
                ),
                7,
            )
            self.member_id = r.member_id
            if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                continue
            if r.error_code:
                raise RuntimeError(f"JoinGroup: error {r.error_code}")
            self.generation = r.generation_id
            assignments = []
            if r.leader == self.member_id:
                members = sorted(m.member_id for m in r.members)
                A = SyncGroupRequest.SyncGroupRequestAssignment
                assignments = [
                    A(member_id=m, assignment=encode_assignment({self.topic: [i % 6]}))
                    for i, m in enumerate(members)
                ]
            s = await self.conn.call(
                SyncGroupRequest(
                    group_id=self.group,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=assignments,
                ),
                5,
            )
            if s.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if s.error_code:
                raise RuntimeError(f"SyncGroup: error {s.error_code}")
            return

    async def heartbeat_until_rebalance(self, interval: float) -> None:
        while True:
            r = await self.conn.call(
                HeartbeatRequest(
                    group_id=self.group,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=None,
                ),
                4,
            )
            if r.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                return
            await asyncio.sleep(interval)


async def rebalance_times(
    bootstrap: str, topic: str, n: int, rounds: int, heartbeat_s: float
) -> tuple[list[float], list[float]]:
    forming, rebalancing = [], []
    for round_ in range(rounds):
        group = f"bench-rebalance-{round_}-{time.time_ns()}"
        conns = [await Conn.open(bootstrap) for _ in range(n)]
        await wait_coordinator(conns[0], group)
        members = [Member(c, group, topic) for c in conns]
        started = time.perf_counter()
        await asyncio.gather(*(m.join_and_sync() for m in members))
        forming.append(time.perf_counter() - started)
        generation = members[0].generation
        # One member changes its subscription: everyone rejoins.
        members[0].metadata = encode_subscription([topic, "other"])
        started = time.perf_counter()
        await asyncio.gather(
            members[0].join_and_sync(),
            *(_follow(m, heartbeat_s) for m in members[1:]),
        )
        rebalancing.append(time.perf_counter() - started)
        assert all(m.generation > generation for m in members)
        for c in conns:
            c.close()
    return forming, rebalancing


async def _follow(member: Member, heartbeat_s: float) -> None:
    await member.heartbeat_until_rebalance(heartbeat_s)
    await member.join_and_sync()


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"median {statistics.median(values) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"


async def _run(bootstrap: str, args: argparse.Namespace) -> None:
    topic = f"bench-groups-{time.time_ns()}"
    await create_topic(bootstrap, topic, 6)
    await asyncio.sleep(0.5)
    rate, latencies = await commit_rate(bootstrap, topic, args.groups, args.seconds)
    peer = await produce_rate(bootstrap, topic, args.groups, args.seconds)
    print(
        f"offset commits: {rate:,.0f}/s with {args.groups} groups committing concurrently "
        f"(latency {_ms(latencies)})"
    )
    print(
        f"peer, Produce acks=-1 of one record per request over {args.groups} connections: {peer:,.0f}/s"
    )
    print(f"ratio commits/produce: {rate / peer:.2f}")
    forming, rebalancing = await rebalance_times(
        bootstrap, topic, args.members, args.rounds, args.heartbeat_ms / 1000
    )
    print(f"{args.members}-member group, forming from empty: {_ms(forming)} ({args.rounds} rounds)")
    print(
        f"{args.members}-member group, full rebalance (heartbeat every {args.heartbeat_ms} ms): {_ms(rebalancing)}"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench groups")
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, default=100)
    parser.add_argument("--bootstrap", help="an existing cluster (default: start one here)")
    args = parser.parse_args(argv)
    if args.bootstrap:
        asyncio.run(_run(args.bootstrap, args))
        return
    from bench.local_cluster import temporary_cluster

    with temporary_cluster(
        "bench-groups-", settings={"group.initial.rebalance.delay.ms": "0"}
    ) as cluster:
        asyncio.run(_run(cluster.bootstrap_servers, args))


if __name__ == "__main__":
    main(sys.argv[1:])
