"""Wire codec hot paths: decode a 1 MiB ProduceRequest v9, encode a 1 MiB
FetchResponse, each next to kafka-python's own codec on the same input (a ratio
against a peer in one run, as DESIGN.md asks).

    python bench/bench_protocol.py [--size BYTES] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import RequestHeader, parse_request_header
from odradek.protocol.messages import (
    FetchResponse,
    ProduceRequest,
    decode_request,
    encode_request,
    encode_response,
)


def _best(fn: Callable[[], object], rounds: int) -> float:
    """Best time of ``rounds`` runs, in microseconds (the least disturbed run)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best * 1e6


def _produce(size: int, partitions: int) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    records = bytes(range(256)) * (size // 256 // partitions)
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            T(
                name="bench",
                partition_data=[
                    T.PartitionProduceData(index=i, records=records) for i in range(partitions)
                ],
            )
        ],
    )


def _fetch(size: int, partitions: int) -> FetchResponse:
    R = FetchResponse.FetchableTopicResponse
    records = bytes(range(256)) * (size // 256 // partitions)
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            R(
                topic="bench",
                partitions=[
                    R.PartitionData(
                        partition_index=i,
                        error_code=0,
                        high_watermark=1000,
                        last_stable_offset=1000,
                        log_start_offset=0,
                        records=records,
                    )
                    for i in range(partitions)
                ],
            )
        ],
    )


def _decode_produce(size: int, partitions: int, rounds: int) -> tuple[str, float, float]:
    request = _produce(size, partitions)
    (frame,) = FrameDecoder().feed(encode_request(ApiKey.PRODUCE, 9, 1, "bench", request))
    header, offset = parse_request_header(frame)
    body = memoryview(frame)[offset:]
    raw_body = bytes(body)
    ours = _best(lambda: decode_request(header, body), rounds)
    theirs = _best(lambda: ProduceRequest.decode(raw_body, version=9), rounds)
    return f"decode ProduceRequest v9, {partitions} partition(s)", ours, theirs


def _encode_fetch(size: int, partitions: int, rounds: int) -> tuple[str, float, float]:
    response = _fetch(size, partitions)
    header = RequestHeader(api_key=ApiKey.FETCH, api_version=12, correlation_id=1)
    ours = _best(lambda: encode_response(header, response), rounds)
    response.with_header(correlation_id=1)
    response._version = 12  # its API_VERSION setter fails once a response has a header
    theirs = _best(lambda: response.encode(header=True, framed=True), rounds)
    return f"encode FetchResponse v12, {partitions} partition(s)", ours, theirs


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20, help="record bytes per message")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args(argv)

    rows: list[tuple[str, float, float]] = []
    for partitions in (1, 16):
        rows.append(_decode_produce(args.size, partitions, args.rounds))
        rows.append(_encode_fetch(args.size, partitions, args.rounds))

    print(f"{args.size} record bytes per message, best of {args.rounds} rounds")
    print(f"{'':48} {'odradek':>10} {'kafka-python':>13} {'ratio':>7}")
    for name, ours, theirs in rows:
        print(f"{name:48} {ours:8.1f}us {theirs:11.1f}us {ours / theirs:7.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
