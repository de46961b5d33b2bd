"""The hand-encoded Fetch messages (services/storage/fetch_wire.py) are byte for byte
what protobuf serializes, over the values a storage node sends: defaults, negative
offsets and epochs (ten-byte varints), large offsets, errors, a diverging epoch,
aborted transactions, several partitions, unicode topic names."""

from __future__ import annotations

import random

from odradek.rpc.v1 import storage_pb2
from odradek.storage.fetch_wire import FetchAsk, FetchResult, fetch_request, fetch_response

_VALUES = [0, 1, -1, 127, 128, 300, -2, 2**31 - 1, -(2**31), 2**40 + 5, 2**63 - 1, -(2**63)]
_INT32 = [v for v in _VALUES if -(2**31) <= v < 2**31]
_TOPICS = ["t", "bench-latency-1234", "", "tópico-ü", "x" * 200]


def _result(rng: random.Random) -> tuple[FetchResult, storage_pb2.FetchPartitionResult]:
    ours = FetchResult(
        rng.choice(_TOPICS),
        rng.choice(_INT32),
        rng.choice([0, 0, 1, 6, 74, -1]),
        rng.choice(_VALUES),
        rng.choice(_VALUES),
        rng.choice(_VALUES),
        rng.choice(_INT32),
        rng.choice(_VALUES),
    )
    theirs = storage_pb2.FetchPartitionResult(
        topic=ours.topic,
        partition=ours.partition,
        error_code=ours.error_code,
        high_watermark=ours.high_watermark,
        last_stable_offset=ours.last_stable_offset,
        log_start_offset=ours.log_start_offset,
        current_leader_epoch=ours.current_leader_epoch,
        log_end_offset=ours.log_end_offset,
    )
    if rng.random() < 0.3:
        ours.diverging = (rng.choice(_INT32), rng.choice(_VALUES))
        theirs.diverging_epoch.epoch, theirs.diverging_epoch.end_offset = ours.diverging
    if rng.random() < 0.3:
        ours.aborted = [
            (rng.choice(_VALUES), rng.choice(_VALUES)) for _ in range(rng.randint(1, 3))
        ]
        for producer_id, first_offset in ours.aborted:
            theirs.aborted_transactions.add(producer_id=producer_id, first_offset=first_offset)
    return ours, theirs


def test_fetch_responses_match_protobuf() -> None:
    rng = random.Random(18)
    for _ in range(2000):
        pairs = [_result(rng) for _ in range(rng.randint(0, 4))]
        code = rng.choice([0, 0, 0, 1, -1])
        expected = storage_pb2.FetchResponse(error_code=code, partitions=[t for _, t in pairs])
        encoded = fetch_response([o for o, _ in pairs], code)
        assert encoded == expected.SerializeToString()
        assert storage_pb2.FetchResponse.FromString(encoded) == expected


def test_fetch_requests_match_protobuf() -> None:
    rng = random.Random(20)
    for _ in range(2000):
        asks = [
            FetchAsk(
                rng.choice(_TOPICS),
                rng.choice(_INT32),
                rng.choice(_VALUES),
                rng.choice(_INT32),
                rng.choice(_INT32),
                rng.choice(_VALUES),
                rng.choice(_INT32),
            )
            for _ in range(rng.randint(0, 4))
        ]
        head = {
            "replica_id": rng.choice(_INT32),
            "replica_incarnation": rng.choice(_VALUES),
            "max_wait_ms": rng.choice(_INT32),
            "min_bytes": rng.choice(_INT32),
            "max_bytes": rng.choice(_INT32),
            "isolation_level": rng.choice([0, 1]),
        }
        expected = storage_pb2.FetchRequest(
            **head,
            partitions=[
                storage_pb2.FetchPartition(
                    topic=a.topic,
                    partition=a.partition,
                    fetch_offset=a.fetch_offset,
                    partition_max_bytes=a.partition_max_bytes,
                    current_leader_epoch=a.current_leader_epoch,
                    log_start_offset=a.log_start_offset,
                    last_fetched_epoch=a.last_fetched_epoch,
                )
                for a in asks
            ],
        )
        assert fetch_request(**head, partitions=asks) == expected.SerializeToString()
