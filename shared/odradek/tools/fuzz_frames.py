"""Fuzz a running gateway with generated and mutated Kafka request frames.

``python -m odradek.tools.fuzz_frames --bootstrap HOST:PORT --frames N [--seed S]``

Seeds are one request per API key and version the gateway advertises (ApiVersions),
each a default-constructed request of that version plus richer ones (Produce with a
real batch, Metadata naming topics); mutations flip bits, write boundary integers
(-1, 0, 2^31-1, -2^31 ...) over 1/2/4-byte fields, truncate, extend, insert, splice
two seeds, and change the header's API key or version. The size prefix always
matches the body, so every frame is complete and the gateway must either answer it
or close the connection.

Several connections run at once; each sends a short burst of frames (seeds as they
are, which real handlers answer, a few mutated, and one mutated last, which is
usually what closes the connection) and then an ApiVersions v0 probe. Responses come in request order, so the probe's answer (or the
connection closing) proves every frame of the burst was dealt with; no answer within
``probe_timeout`` is a *hung* connection. A connection the gateway keeps open carries
the next burst; a closed one is reopened. Frames that decode as valid requests of APIs
that may legitimately wait (Fetch long polls, JoinGroup/SyncGroup rebalances) are
skipped: their valid forms are what real clients exercise; their malformed forms
are still sent.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import struct
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    ProduceRequest,
    decode_request,
    decode_response,
    encode_request,
    request_class,
)
from odradek.records.record import BatchBuilder

PROBE_CID = 0x7FFF_FFF0
_INTERESTING_8 = (0x00, 0x01, 0x7F, 0x80, 0xFF)
_INTERESTING_16 = (0, 1, -1, 0x7FFF, -0x8000)
_INTERESTING_32 = (0, 1, -1, 0x7FFF_FFFF, -0x8000_0000, 0x10000, 0x7FFF_FFF0)
# A valid request of these may wait for a long time by design.
WAITING_APIS = frozenset({ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP})
_FRAME = struct.Struct(">i")


@dataclass
class FuzzReport:
    frames: int = 0
    skipped: int = 0
    bursts: int = 0
    probes_answered: int = 0
    closed_by_server: int = 0
    hung: int = 0
    seconds: float = 0.0
    per_api: Counter[int] = field(default_factory=Counter)
    hung_examples: list[str] = field(default_factory=list)

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        return (
            f"{self.frames} frames ({self.skipped} skipped) over {len(self.per_api)} API keys "
            f"in {self.seconds:.1f}s = {self.frames_per_second:.0f} frames/s; "
            f"{self.bursts} bursts, {self.probes_answered} probes answered, "
            f"{self.closed_by_server} connections closed by the gateway, {self.hung} hung"
        )


def _frame(body: bytes) -> bytes:
    return _FRAME.pack(len(body)) + body


def _seed_requests(key: ApiKey, topic: str) -> list[object]:
    cls = request_class(key)
    out: list[object] = [cls()]
    if key == ApiKey.METADATA:
        out.append(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]))
    elif key == ApiKey.PRODUCE:
        builder = BatchBuilder()
        for i in range(3):
            builder.append(int(time.time() * 1000), b"k%d" % i, b"fuzz-value-%d" % i)
        records = builder.build()
        P = ProduceRequest.TopicProduceData
        out.append(
            ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout_ms=1000,
                topic_data=[
                    P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])
                ],
            )
        )
    return out


def build_seeds(
    served: Mapping[int, tuple[int, int]], topic: str = "fuzz-seed"
) -> list[tuple[int, int, bytes]]:
    """(api key, version, request body without the size prefix) for every served version."""
    seeds: list[tuple[int, int, bytes]] = []
    for raw_key, (low, high) in sorted(served.items()):
        try:
            key = ApiKey(raw_key)
            requests = _seed_requests(key, topic)
        except (ValueError, KeyError):
            continue
        for version in range(low, high + 1):
            for request in requests:
                try:
                    frame = encode_request(key, version, 1, "fuzz", request)  # type: ignore[arg-type]
                except Exception:  # a seed that cannot encode at this version
                    continue
                seeds.append((key, version, frame[4:]))
    return seeds


def mutate(rng: random.Random, body: bytes, seeds: Sequence[tuple[int, int, bytes]]) -> bytes:
    """One to three mutations of a request body (header included)."""
    buf = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(10)
        n = len(buf)
        if op == 0 and n:  # bit flips
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(n)
                buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.choice(_INTERESTING_8)
        elif op == 2 and n >= 2:
            i = rng.randrange(n - 1)
            struct.pack_into(">h", buf, i, rng.choice(_INTERESTING_16))
        elif op == 3 and n >= 4:
            i = rng.randrange(n - 3)
            struct.pack_into(">i", buf, i, rng.choice(_INTERESTING_32))
        elif op == 4 and n > 8:  # truncate
            del buf[rng.randrange(8, n) :]
        elif op == 5:  # extend
            buf += rng.randbytes(rng.randint(1, 64))
        elif op == 6 and n:  # insert
            i = rng.randrange(n)
            buf[i:i] = rng.randbytes(rng.randint(1, 16))
        elif op == 7 and n > 8:  # splice with another seed's tail
            other = rng.choice(seeds)[2]
            i = rng.randrange(8, n)
            j = rng.randrange(min(8, len(other)), len(other) + 1)
            buf[i:] = other[j:]
        elif op == 8 and n >= 4:  # another version of the same API
            struct.pack_into(">h", buf, 2, rng.randint(-1, 20))
        elif op == 9 and n >= 2:  # another API key
            struct.pack_into(">h", buf, 0, rng.choice(seeds)[0])
    return bytes(buf)


def _waits(body: bytes) -> bool:
    """A valid request of an API that may hold the connection by design."""
    try:
        header, offset = parse_request_header(memoryview(body))
        if header.api_key not in WAITING_APIS:
            return False
        decode_request(header, memoryview(body)[offset:])
    except Exception:  # undecodable: send it
        return False
    return True


def _probe() -> bytes:
    return encode_request(
        ApiKey.API_VERSIONS,
        0,
        PROBE_CID,
        "fuzz-probe",
        ApiVersionsRequest(),
    )


async def served_versions(host: str, port: int) -> dict[int, tuple[int, int]]:
    """What the gateway advertises (ApiVersions v0)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(encode_request(ApiKey.API_VERSIONS, 0, 1, "fuzz", ApiVersionsRequest()))
        (size,) = _FRAME.unpack(await reader.readexactly(4))
        body = await reader.readexactly(size)
        response = decode_response(ApiKey.API_VERSIONS, 0, memoryview(body)[4:])
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}  # type: ignore[attr-defined]
    finally:
        writer.close()


class _Connection:
    """One fuzzing connection, reopened whenever the gateway closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def burst(self, frames: list[bytes], probe_timeout: float, report: FuzzReport) -> None:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.reader, self.writer
        assert reader is not None
        loop = asyncio.get_running_loop()
        try:
            writer.write(b"".join(frames) + _probe())
            deadline = loop.time() + probe_timeout
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                head = await asyncio.wait_for(reader.readexactly(4), remaining)
                (size,) = _FRAME.unpack(head)
                body = await asyncio.wait_for(reader.readexactly(size), remaining)
                if len(body) >= 4 and _FRAME.unpack_from(body)[0] == PROBE_CID:
                    report.probes_answered += 1
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            report.closed_by_server += 1
            self.close()
        except TimeoutError:
            report.hung += 1
            if len(report.hung_examples) < 5:
                report.hung_examples.append(" ".join(f[4:12].hex() for f in frames))
            self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def fuzz(
    host: str,
    port: int,
    frames: int,
    *,
    seed: int = 0,
    concurrency: int = 8,
    burst: int = 4,
    probe_timeout: float = 30.0,
    progress: float = 0.0,
) -> FuzzReport:
    """Send ``frames`` generated/mutated frames; see the module docstring."""
    served = await served_versions(host, port)
    seeds = build_seeds(served)
    rng = random.Random(seed)
    report = FuzzReport()
    start = time.monotonic()
    next_progress = start + progress if progress else float("inf")
    sent = 0

    def next_burst() -> list[bytes]:
        nonlocal sent
        out: list[bytes] = []
        while len(out) < burst and sent < frames:
            key, _version, body = rng.choice(seeds)
            if len(out) == burst - 1 or rng.random() < 0.1:
                body = mutate(rng, body, seeds)
            sent += 1
            if _waits(body):
                report.skipped += 1
                continue
            report.per_api[key] += 1
            out.append(_frame(body))
        return out

    async def worker() -> None:
        nonlocal next_progress
        conn = _Connection(host, port)
        while sent < frames:
            batch = next_burst()
            if not batch:
                continue
            report.frames += len(batch)
            report.bursts += 1
            await conn.burst(batch, probe_timeout, report)
            if time.monotonic() >= next_progress:
                report.seconds = time.monotonic() - start
                print(f"  {report.summary()}", flush=True)
                next_progress = time.monotonic() + progress
        conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    report.seconds = time.monotonic() - start
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.tools.fuzz_frames")
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT of a gateway")
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    host, port = args.bootstrap.rsplit(":", 1)
    report = asyncio.run(
        fuzz(
            host, int(port), args.frames, seed=args.seed, concurrency=args.concurrency, progress=10
        )
    )
    print(report.summary())
    return 1 if report.hung else 0


if __name__ == "__main__":
    sys.exit(main())
