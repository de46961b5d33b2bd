"""The strict decoder: zero-copy records, every length checked before use, and
bounded work for hostile lengths."""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.decoder import MAX_DECODED_ITEMS
from odradek.protocol.exceptions import InvalidRequestError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import RequestHeader, parse_request_header
from odradek.protocol.messages import (
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
    decode_request,
    decode_request_body,
    encode_body,
    encode_request,
    expects_response,
)

MIB = 1 << 20


def _produce(version: int, records: bytes, acks: int = -1) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=30000,
        topic_data=[T(name="t", partition_data=[T.PartitionProduceData(index=0, records=records)])],
    )


def _split(wire: bytes | bytearray) -> tuple[RequestHeader, memoryview]:
    (frame,) = FrameDecoder().feed(wire)
    header, offset = parse_request_header(frame)
    return header, memoryview(frame)[offset:]


def test_1mib_produce_v9_records_are_a_view_of_the_frame() -> None:
    records = bytes(range(256)) * (MIB // 256)
    header, body = _split(encode_request(ApiKey.PRODUCE, 9, 1, "p", _produce(9, records)))
    decode_request(header, body)  # compile the decoder outside the measurement
    tracemalloc.start()
    started = time.perf_counter()
    request = decode_request(header, body)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    part = request.topic_data[0].partition_data[0]
    assert isinstance(part.records, memoryview)
    assert part.records.obj is body.obj  # same buffer: not copied
    assert part.records == records
    assert peak < 64 * 1024
    # The buffer identity and the memory peak prove there is no copy; the clock only
    # catches pathological slowness (generous: a loaded 2-core machine, tracemalloc on).
    assert elapsed < 0.5, elapsed


def test_acks_0_expects_no_response() -> None:
    header = RequestHeader(api_key=ApiKey.PRODUCE, api_version=3, correlation_id=1)
    assert not expects_response(header, _produce(3, b"x", acks=0))
    assert expects_response(header, _produce(3, b"x", acks=1))


@pytest.mark.parametrize("version", [3, 9])
def test_every_truncation_and_any_trailing_byte_is_rejected(version: int) -> None:
    body = bytes(encode_body(_produce(version, b"abcdefgh"), version))
    for cut in range(len(body)):
        with pytest.raises(InvalidRequestError):
            decode_request_body(ApiKey.PRODUCE, version, body[:cut])
    with pytest.raises(InvalidRequestError, match="trailing"):
        decode_request_body(ApiKey.PRODUCE, version, body + b"\x00")


def test_requests_ignore_trailing_bytes_like_kafka() -> None:
    # librdkafka 2.16 sends Metadata v12 "all topics" with three bytes after the tags.
    frame = bytes.fromhex("0003000c00000001") + b"\x00\x03rdk\x00" + bytes.fromhex("00000000010000")
    header, body = _split(struct.pack(">i", len(frame)) + frame)
    request = decode_request(header, body)
    assert request.topics is None and request.allow_auto_topic_creation is False


def test_the_error_carries_the_correlation_id() -> None:
    header, body = _split(encode_request(ApiKey.PRODUCE, 3, 987, "p", _produce(3, b"abc")))
    with pytest.raises(InvalidRequestError) as info:
        decode_request(header, body[:-1])
    assert (info.value.correlation_id, info.value.api_key, info.value.api_version) == (987, 0, 3)


def _bounded(fn: object) -> InvalidRequestError:
    """Run ``fn``; it must fail as InvalidRequestError fast and without allocating.

    Measured on a second run: the first compiles the message version's decoder (the
    compiler's memory, ~260 KB on Debian's CPython 3.11.2, is not the decode's), which
    a test run alone or first would otherwise count."""
    with pytest.raises(InvalidRequestError):
        fn()  # type: ignore[operator]
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(InvalidRequestError) as info:
        fn()  # type: ignore[operator]
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 1.0, elapsed  # generous: a loaded 2-core machine, tracemalloc on
    assert peak < 256 * 1024
    return info.value


def test_huge_array_count_is_rejected_before_allocating() -> None:
    # Produce v3: transactional_id, acks, timeout, topic_data count = 2**31 - 1
    body = struct.pack(">hhii", -1, 1, 1000, 2**31 - 1) + b"\x00" * 64
    exc = _bounded(lambda: decode_request_body(ApiKey.PRODUCE, 3, body))
    assert "cannot fit" in str(exc)


def test_huge_primitive_array_count_is_rejected() -> None:
    # Metadata v0 topics: [] of strings
    body = struct.pack(">i", 2**31 - 1) + b"\x00\x01a"
    _bounded(lambda: decode_request_body(ApiKey.METADATA, 0, body))


def test_huge_compact_count_is_rejected() -> None:
    # Produce v9: compact transactional_id null, acks, timeout, topic_data count 2**32-2
    body = b"\x00" + struct.pack(">hi", 1, 1000) + b"\xff\xff\xff\xff\x0f" + b"\x00" * 64
    _bounded(lambda: decode_request_body(ApiKey.PRODUCE, 9, body))


def test_huge_string_and_bytes_lengths_are_rejected() -> None:
    string_too_long = struct.pack(">hhii", -1, 1, 1000, 1) + struct.pack(">h", 32000) + b"t"
    _bounded(lambda: decode_request_body(ApiKey.PRODUCE, 3, string_too_long))
    records_too_long = (
        struct.pack(">hhii", -1, 1, 1000, 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 1, 0, 2**31 - 1)
        + b"abc"
    )
    _bounded(lambda: decode_request_body(ApiKey.PRODUCE, 3, records_too_long))


def test_endless_varint_costs_nothing() -> None:
    # a compact length made of a megabyte of continuation bytes
    body = b"\xff" * MIB
    exc = _bounded(lambda: decode_request_body(ApiKey.PRODUCE, 9, body))
    assert "varint" in str(exc)


def test_compact_string_longer_than_0x7fff_is_invalid() -> None:
    name = b"x" * 0x8000
    length = 0x8001  # compact: length + 1, as an unsigned varint
    varint = bytes([(length & 0x7F) | 0x80, ((length >> 7) & 0x7F) | 0x80, length >> 14])
    body = b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02" + varint + name + b"\x00" * 8
    with pytest.raises(InvalidRequestError, match="invalid length"):
        decode_request_body(ApiKey.PRODUCE, 9, body)


def test_null_only_where_the_schema_allows_it() -> None:
    # Produce v3: transactional_id is nullable, the topic name is not
    ok = struct.pack(">hhii", -1, 1, 1000, 0)
    assert decode_request_body(ApiKey.PRODUCE, 3, ok).transactional_id is None
    bad = struct.pack(">hhiih", -1, 1, 1000, 1, -1) + struct.pack(">i", 0)
    with pytest.raises(InvalidRequestError, match="non-nullable"):
        decode_request_body(ApiKey.PRODUCE, 3, bad)
    # Metadata v1: a null topic array means "all topics"; v0 cannot be null
    assert decode_request_body(ApiKey.METADATA, 1, struct.pack(">i", -1)).topics is None
    with pytest.raises(InvalidRequestError):
        decode_request_body(ApiKey.METADATA, 0, struct.pack(">i", -1))


def test_invalid_utf8_is_replaced_like_java() -> None:
    body = struct.pack(">i", 1) + struct.pack(">h", 2) + b"\xff\xfe"
    request = decode_request_body(ApiKey.METADATA, 0, body)
    assert request.topics[0].name == "\ufffd\ufffd"


def _metadata_v9(tags: bytes) -> bytes:
    # compact topics array with one topic: name "t" + per-topic tags; then flags; tags
    return b"\x02" + b"\x02t" + b"\x00" + b"\x01\x00\x00" + tags


def test_unknown_tags_are_kept_and_known_tags_must_fit_exactly() -> None:
    request = decode_request_body(ApiKey.METADATA, 9, _metadata_v9(b"\x01\x07\x02hi"))
    assert isinstance(request, MetadataRequest)
    assert request.unknown_tags == {"_7": b"hi"}
    with pytest.raises(InvalidRequestError):
        decode_request_body(ApiKey.METADATA, 9, _metadata_v9(b"\x01\x07\x05hi"))
    with pytest.raises(InvalidRequestError):
        decode_request_body(ApiKey.METADATA, 9, _metadata_v9(b"\x05\x07\x02hi"))


def test_known_tag_must_use_exactly_its_announced_size() -> None:
    # Fetch v12: the only top-level tag is 0, ClusterId (compact nullable string)
    body = bytes(encode_body(FetchRequest(cluster_id="c", topics=[]), 12))
    section = b"\x01" + b"\x00" + b"\x02" + b"\x02c"  # count, tag 0, size 2, "c"
    assert body.endswith(section)
    assert decode_request_body(ApiKey.FETCH, 12, body).cluster_id == "c"
    oversized = body[: -len(section)] + b"\x01\x00\x03\x02cx"  # claims 3, string uses 2
    with pytest.raises(InvalidRequestError, match="used 2 of 3"):
        decode_request_body(ApiKey.FETCH, 12, oversized)


def _elect_leaders_v2(partitions_per_topic: list[int]) -> bytes:
    """ElectLeaders v2 body: election type, compact topic_partitions[] of {topic "",
    compact partitions[] int32, tags}, timeout, tags."""
    body = b"\x00" + _uvarint(len(partitions_per_topic) + 1)
    for count in partitions_per_topic:
        body += b"\x01" + _uvarint(count + 1) + b"\x00\x00\x00\x01" * count + b"\x00"
    return body + struct.pack(">i", 1000) + b"\x00"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_flexible_array_of_tiny_structs_is_refused_past_the_item_cap() -> None:
    # 600,000 entries of 3 bytes (1.8 MB) decoded to ~80 MB of objects (45x its size,
    # measured with tracemalloc before the cap); now refused before any is built.
    entries = MAX_DECODED_ITEMS + 100_000
    body = b"\x00" + _uvarint(entries + 1) + b"\x01\x01\x00" * entries
    body += struct.pack(">i", 1000) + b"\x00"
    header = RequestHeader(api_key=ApiKey.ELECT_LEADERS, api_version=2, correlation_id=7)
    exc = _bounded(lambda: decode_request(header, body))
    assert "items" in str(exc) and exc.correlation_id == 7


def test_item_cap_counts_nested_arrays_together_and_resets_per_message() -> None:
    under = _elect_leaders_v2([MAX_DECODED_ITEMS // 2 - 10] * 2)
    for _ in range(2):  # the budget is per message: a second decode gets all of it again
        request = decode_request_body(ApiKey.ELECT_LEADERS, 2, under)
        assert sum(len(t.partitions) for t in request.topic_partitions) == MAX_DECODED_ITEMS - 20
    over = _elect_leaders_v2([MAX_DECODED_ITEMS // 2] * 2)  # + the 2 topic entries
    with pytest.raises(InvalidRequestError, match="items"):
        decode_request_body(ApiKey.ELECT_LEADERS, 2, over)
