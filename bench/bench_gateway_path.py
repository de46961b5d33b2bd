"""CPU per record of the gateway's one-record Produce and long-poll Fetch, in one process.

The gateway (a real ``Gateway`` and its listener, on this process's loop) is measured
alone: a storage node (real logs, RF1, its data link on TCP and a Unix socket) runs in a
child process, and a Kafka client in another child: on one connection it sends one
one-record acks=-1 Produce v9 at a time (librdkafka's ``linger.ms=0``), and on a second
connection a consumer long-polls Fetch v12 at the next offset, sent before the record
is produced, as the latency loop of ``bench broker`` has it. The figure is this
process's CPU (``time.process_time``) per record: the gateway's reads, dispatch, data
link calls and writes for one Produce and one parked Fetch, without the storage node's
or the client's CPU, and without the other sessions' load swinging a backlog (issue 18).
Run it alternately from two checkouts.

    python -m bench gateway_path [--records=2000 --rounds=5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOPIC = "bench"


def _storage_child() -> None:
    """A storage node leading ``bench`` (RF1); prints its ports, runs until stdin closes."""
    from bench.bench_produce_path import _Node, _publish

    async def run() -> None:
        node = _Node(1, Path(tempfile.mkdtemp(prefix="bench-gateway-path-")))
        await node.start()
        _publish([node])
        sock = node.socket
        print(
            json.dumps(
                {
                    "grpc": node.port,
                    "data": node.data_port,
                    "socket": sock.SerializeToString().hex() if sock is not None else "",
                }
            ),
            flush=True,
        )
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        await node.stop()

    asyncio.run(run())


def _frame(api_key: int, version: int, request: object) -> bytes:
    from odradek.protocol.messages import encode_request

    return bytes(encode_request(api_key, version, 7, "bench", request))  # type: ignore[arg-type]


def _read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        got = sock.recv(4 - len(head))
        if not got:
            raise ConnectionError("gateway closed")
        head += got
    (size,) = struct.unpack(">i", head)
    body = bytearray()
    while len(body) < size:
        got = sock.recv(size - len(body))
        if not got:
            raise ConnectionError("gateway closed")
        body += got
    return bytes(body)


def _client_child(port: int, records: int, rounds: int) -> None:
    """The closed loop: per record, a Fetch parked at the next offset, then the Produce;
    both answers read. A line on stdout after each round."""
    from bench.batches import plain_builder
    from odradek.protocol.messages import FetchRequest, ProduceRequest

    builder = plain_builder(1 << 30)
    builder.append(0, int(time.time() * 1000), None, b"x" * 100, [])
    batch = bytes(builder.build())
    data = ProduceRequest.TopicProduceData
    produce = _frame(
        0,
        9,
        ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=30_000,
            topic_data=[
                data(name=TOPIC, partition_data=[data.PartitionProduceData(index=0, records=batch)])
            ],
        ),
    )
    T = FetchRequest.FetchTopic

    def fetch(offset: int) -> bytes:
        return _frame(
            1,
            12,
            FetchRequest(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    T(
                        topic=TOPIC,
                        partitions=[
                            T.FetchPartition(
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=offset,
                                last_fetched_epoch=-1,
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
            ),
        )

    producer = socket.create_connection(("127.0.0.1", port))
    consumer = socket.create_connection(("127.0.0.1", port))
    for s in (producer, consumer):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    offset = 0
    for _ in range(rounds + 1):  # the first round warms up
        for _ in range(records):
            consumer.sendall(fetch(offset))
            time.sleep(0.0002)  # let the fetch park at the leader first
            producer.sendall(produce)
            _read_frame(producer)
            answer = _read_frame(consumer)
            if len(answer) < 100:
                raise SystemExit(f"fetch at {offset} came back without the record")
            offset += 1
        print("round", flush=True)


async def _run(records: int, rounds: int, count_tasks: bool) -> list[float]:
    from odradek.config import Config
    from odradek.gateway.connection import KafkaListener
    from odradek.gateway.gateway import DEFAULTS, Gateway
    from odradek.rpc.v1 import common_pb2

    storage = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.bench_gateway_path",
        "--child=storage",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert storage.stdout is not None and storage.stdin is not None
    ports = json.loads(await storage.stdout.readline())
    gateway = Gateway(
        Config(
            DEFAULTS,
            overrides={
                "node.id": "0",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "controller.address": "127.0.0.1:9",
            },
        )
    )
    online = common_pb2.ONLINE
    await gateway.metadata.update(
        common_pb2.ClusterMetadata(
            version=1,
            cluster_id="bench",
            nodes=[
                common_pb2.Node(node_id=0, kind=common_pb2.GATEWAY, host="127.0.0.1", state=online),
                common_pb2.Node(
                    node_id=1,
                    kind=common_pb2.STORAGE,
                    host="127.0.0.1",
                    grpc_port=ports["grpc"],
                    data_port=ports["data"],
                    data_socket=common_pb2.DataSocket.FromString(bytes.fromhex(ports["socket"]))
                    if ports["socket"]
                    else None,
                    state=online,
                ),
            ],
            topics=[
                common_pb2.Topic(
                    name=TOPIC,
                    partitions=[
                        common_pb2.Partition(
                            partition=0, replicas=[1], isr=[1], leader=1, leader_epoch=0
                        )
                    ],
                )
            ],
        )
    )
    listener = KafkaListener(
        "127.0.0.1", 0, gateway.dispatch, gateway.limits, answer_at_once=gateway.answer_at_once
    )
    port = await listener.start()
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.bench_gateway_path",
        "--child=client",
        f"--port={port}",
        f"--records={records}",
        f"--rounds={rounds}",
        stdout=asyncio.subprocess.PIPE,
    )
    assert client.stdout is not None
    tasks = [0]
    if count_tasks:  # (a task factory in Python: the CPU figures are not comparable then)
        loop = asyncio.get_running_loop()

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
            tasks[0] += 1
            return asyncio.Task(coro, loop=loop, **kw)

        loop.set_task_factory(factory)
    per_record: list[float] = []
    cpu, wall = time.process_time(), time.perf_counter()
    times = os.times()
    for round_ in range(rounds + 1):
        line = await client.stdout.readline()
        if not line:
            raise SystemExit("the client stopped early")
        now_cpu, now_wall, now_times = time.process_time(), time.perf_counter(), os.times()
        if count_tasks:
            print(f"  round {round_}: {tasks[0] / records:.3f} tasks per record", flush=True)
            tasks[0] = 0
        if round_:
            per_record.append((now_cpu - cpu) / records * 1e6)
            system = (now_times.system - times.system) / records * 1e6
            print(
                f"  round {round_}: {per_record[-1]:.0f} us gateway CPU per record "
                f"({system:.0f} us of it in the kernel), "
                f"{(now_wall - wall) / records * 1e6:.0f} us per record",
                flush=True,
            )
        cpu, wall, times = now_cpu, now_wall, now_times
    await client.wait()
    await listener.stop(0.5)
    await gateway.storage.close()
    storage.stdin.close()
    await asyncio.wait_for(storage.wait(), 10)
    return per_record


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench gateway_path", description=__doc__)
    parser.add_argument("--records", type=int, default=2000, help="records per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--count-tasks", type=int, default=0, help="1: count the gateway's tasks per record"
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        import uvloop  # the services' loop (odradek.service)

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    if args.child == "storage":
        _storage_child()
        return
    if args.child == "client":
        _client_child(args.port, args.records, args.rounds)
        return
    per_record = asyncio.run(_run(args.records, args.rounds, bool(args.count_tasks)))
    print(
        "one-record acks=-1 Produce v9 and a parked Fetch v12 per record through the gateway: "
        f"median {statistics.median(per_record):.0f} us, min {min(per_record):.0f} us "
        "of gateway CPU per record"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
