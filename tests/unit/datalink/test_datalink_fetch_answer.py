"""The Fetch answer on the data link (odradek.datalink.client.fetch_answer), read the
same way by gateways and replica fetchers: records pair with partitions in order, and an
answer whose blobs and partitions do not pair up is a DataLinkError, never records
handed to the wrong partition."""

from __future__ import annotations

import pytest

from odradek.datalink.client import DataLinkError, fetch_answer, fetch_request
from odradek.datalink.frame import FETCH, OK, Frame, encode, parse
from odradek.rpc.v1 import storage_pb2


def _answer(partitions: list[str], blobs: list[bytes]) -> bytes:
    response = storage_pb2.FetchResponse(
        partitions=[storage_pb2.FetchPartitionResult(topic=t, partition=0) for t in partitions]
    )
    return b"".join(bytes(b) for b in encode(7, OK, response.SerializeToString(), blobs))


def _read(data: bytes) -> Frame:
    return parse(data[4:])  # the size field is the stream's, not the frame's


def test_records_pair_with_their_partitions_in_order() -> None:
    response, records = fetch_answer(_read(_answer(["a", "b", "c"], [b"AA", b"", b"CCC"])))
    assert [p.topic for p in response.partitions] == ["a", "b", "c"]
    assert [bytes(r) for r in records] == [b"AA", b"", b"CCC"]


def test_blobs_that_do_not_pair_up_are_refused() -> None:
    with pytest.raises(DataLinkError, match="2 records blobs for 3 partitions"):
        fetch_answer(_read(_answer(["a", "b", "c"], [b"AA", b"CCC"])))


def test_the_request_is_a_fetch_frame() -> None:
    request = storage_pb2.FetchRequest(replica_id=2, max_wait_ms=500)
    kind, meta = fetch_request(request)
    assert kind == FETCH
    assert storage_pb2.FetchRequest.FromString(meta) == request
