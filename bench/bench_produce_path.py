"""CPU per replicated record of the storage nodes' Produce path, in one process.

Three storage nodes (real logs, their data links on Unix sockets, followers fetching
from the leader over them) run on one event loop; a data link client sends one
one-record acks=-1 Produce at a time to the leader (a closed loop, as a gateway
forwards librdkafka's ``linger.ms=0`` requests), and with ``--consumer=1`` a consumer
long-polls the leader on the same connection, as a gateway does. The figure is the
CPU of the whole process (``time.process_time``) per record: the leader's Produce,
acks=-1 wait and parked fetches, both followers' fetch rounds and appends, the client
(the same in every build). In one process the figure is steadier than per-process CPU
of a cluster on a shared machine, and it is what docs/data-link.md compares builds
with (issue 18): run it alternately from two checkouts.

    python -m bench produce_path [--records=1000 --rounds=5 --nodes=3 --consumer=1]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.batches import plain_builder
from odradek.controller_client import ControllerClient
from odradek.datalink.client import DataLinkConnection, fetch_answer
from odradek.datalink.frame import FETCH, PRODUCE, meta_bytes
from odradek.datalink.same_host import SameHostLinks
from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.rpc.server import RpcServer
from odradek.rpc.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from odradek.storage.data_link import DataLinkServer
from odradek.storage.node import StorageNode
from odradek.storage.service import serve_data_socket
from odradek.storage.servicer import StorageServicer
from odradek.storage.settings import StorageSettings

TOPIC = "bench"
TOPIC_ID = uuid.UUID("00000000-0000-4000-8000-000000000018").bytes


def _batch(value: bytes) -> bytes:
    builder = plain_builder(1 << 30)
    builder.append(0, int(time.time() * 1000), None, value, [])
    return bytes(builder.build())


class _Node:
    """A storage node on this loop: gRPC (unused by the loop), data link on TCP and on
    a Unix socket, as ``odradek up`` starts one."""

    def __init__(self, node_id: int, root: Path) -> None:
        self.node_id = node_id
        self.dir = root / f"node-{node_id}"
        self.root = root

    async def start(self) -> None:
        self.logs = LogManager([self.dir], self.node_id, "bench", {})
        settings = StorageSettings(
            node_id=self.node_id,
            host="127.0.0.1",
            grpc_port=0,
            metrics_port=0,
            controller_address="127.0.0.1:9",  # the loop publishes metadata itself
            log_dirs=[self.dir],
            replica_lag_time_max_ms=60_000,
            replica_fetch_wait_max_ms=500,
        )
        self.node = StorageNode(
            settings, self.logs, ControllerClient("127.0.0.1:9"), incarnation=lambda: 1
        )
        servicer = StorageServicer()
        servicer.handlers = self.node.handlers
        self.rpc = RpcServer("127.0.0.1", 0)
        storage_pb2_grpc.add_StorageServicer_to_server(servicer, self.rpc.server)
        self.port = await self.rpc.start()
        self.link = DataLinkServer("127.0.0.1", 0, lambda: servicer.handlers)
        self.data_port = await self.link.start()
        path = self.root / f"link-{self.node_id}" / "data.sock"
        self.socket = serve_data_socket(self.link, self.node_id, path)
        self.node.start()

    async def stop(self) -> None:
        await self.link.stop(0.1)
        await self.rpc.stop(grace=0)
        await self.node.stop()
        self.logs.close_without_shutdown()


def _publish(nodes: list[_Node]) -> None:
    raw = common_pb2.ClusterMetadata(
        version=1, cluster_id="bench", controller_id=3000, controller_epoch=1
    )
    for n in nodes:
        raw.nodes.append(
            common_pb2.Node(
                node_id=n.node_id,
                kind=common_pb2.STORAGE,
                host="127.0.0.1",
                grpc_port=n.port,
                data_port=n.data_port,
                data_socket=n.socket,
                state=common_pb2.ONLINE,
            )
        )
    ids = [n.node_id for n in nodes]
    raw.topics.append(
        common_pb2.Topic(
            name=TOPIC,
            topic_id=TOPIC_ID,
            configs={"min.insync.replicas": str(min(2, len(ids)))},
            partitions=[
                common_pb2.Partition(
                    partition=0,
                    replicas=ids,
                    isr=ids,
                    leader=ids[0],
                    leader_epoch=0,
                    partition_epoch=1,
                )
            ],
        )
    )
    snapshot = Snapshot.build(raw)
    for n in nodes:
        n.node.apply(snapshot)


async def _run(records: int, rounds: int, node_count: int, consumer: bool) -> list[float]:
    root = Path(tempfile.mkdtemp(prefix="bench-produce-path-"))
    nodes = [_Node(i, root) for i in range(1, node_count + 1)]
    for n in nodes:
        await n.start()
    _publish(nodes)
    await asyncio.sleep(1.0)  # followers connect and start fetching
    conn = await SameHostLinks().open(1, nodes[0].socket, lambda: DataLinkConnection(1 << 24))
    assert conn is not None, "the leader's Unix socket refused the client"
    head = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        ordering_lane=7,
        partitions=[storage_pb2.ProducePartition(topic=TOPIC, partition=0)],
    ).SerializeToString()
    consumed = 0
    stop = False

    async def consume() -> None:
        nonlocal consumed
        offset = 0
        while not stop:
            request = storage_pb2.FetchRequest(
                replica_id=-1,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=1 << 20,
                partitions=[
                    storage_pb2.FetchPartition(
                        topic=TOPIC,
                        partition=0,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=-1,
                        last_fetched_epoch=-1,
                    )
                ],
            ).SerializeToString()
            response, blobs = fetch_answer(await conn.call(FETCH, request, [], 5.0))
            if len(blobs[0]):
                offset = consumed = response.partitions[0].high_watermark

    task = asyncio.ensure_future(consume()) if consumer else None
    batch = _batch(b"%d" % time.time_ns())
    per_record = []
    for round_ in range(rounds + 1):  # the first round warms up
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(records):
            frame = await conn.call(PRODUCE, head, [bytearray(batch)], 30.0)
            answer = storage_pb2.ProduceResponse.FromString(meta_bytes(frame))
            assert answer.partitions[0].error_code == 0, answer
        while task is not None and consumed < (round_ + 1) * records:
            await asyncio.sleep(0.0005)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if round_:
            per_record.append(cpu / records * 1e6)
            print(
                f"  round {round_}: {per_record[-1]:.0f} us CPU per record, "
                f"{wall / records * 1e6:.0f} us per round trip",
                flush=True,
            )
    stop = True
    if task is not None:
        await asyncio.wait_for(task, 2.0)
    conn.close()
    for n in nodes:
        await n.stop()
    return per_record


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench produce_path", description=__doc__)
    parser.add_argument("--records", type=int, default=1000, help="records per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=3, help="replicas (1 leader + followers)")
    parser.add_argument("--consumer", type=int, default=1, help="1: a consumer long-polls")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        import uvloop  # the services' loop (odradek.service)

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    per_record = asyncio.run(_run(args.records, args.rounds, args.nodes, bool(args.consumer)))
    print(
        f"acks=-1 RF{args.nodes}, one record per Produce"
        f"{', a consumer long-polling' if args.consumer else ''}: "
        f"median {statistics.median(per_record):.0f} us, min {min(per_record):.0f} us "
        "of CPU per record (the whole process)"
    )
