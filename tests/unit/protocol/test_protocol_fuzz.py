"""Hostile input: random and mutated frames through FrameDecoder + header parse +
body decode raise only ProtocolError subclasses, quickly, whatever the bytes."""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import request_sample, supported_versions

from odradek.protocol.exceptions import ProtocolError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import decode_request, encode_request

SEEDS: list[bytes] = [
    bytes(encode_request(key, version, 1000 + i, "fuzz", request_sample(key, version, seed=i)))[4:]
    for i, (key, version) in enumerate(supported_versions())
]

_pos = st.integers(min_value=0, max_value=1 << 20)
MUTATION = st.one_of(
    st.tuples(st.just("flip"), _pos, st.integers(1, 255)),
    st.tuples(st.just("insert"), _pos, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), _pos, st.integers(1, 16)),
    st.tuples(st.just("truncate"), _pos),
    st.tuples(st.just("extend"), st.binary(min_size=1, max_size=16)),
    st.tuples(
        st.just("int32"),
        _pos,
        st.sampled_from([0x7FFFFFFF, -2, -1, 0, 0x10000, 0x7FFF, 0xFFFF, -0x8000]),
    ),
    st.tuples(st.just("int16"), _pos, st.sampled_from([0x7FFF, -2, -1, 0, 0x100])),
    st.tuples(st.just("ff-run"), _pos, st.integers(1, 64)),
)


def _mutate(payload: bytes, mutations: list[tuple[Any, ...]]) -> bytes:
    data = bytearray(payload)
    for m in mutations:
        kind = m[0]
        at = m[1] % (len(data) + 1) if kind not in ("extend",) else 0
        if kind == "flip" and data:
            data[at % len(data)] ^= m[2]
        elif kind == "insert":
            data[at:at] = m[2]
        elif kind == "delete":
            del data[at : at + m[2]]
        elif kind == "truncate":
            del data[at:]
        elif kind == "extend":
            data += m[1]
        elif kind == "int32":
            data[at : at + 4] = struct.pack(">i", m[2])
        elif kind == "int16":
            data[at : at + 2] = struct.pack(">h", m[2])
        elif kind == "ff-run":
            data[at : at + m[2]] = b"\xff" * m[2]
    return bytes(data)


def _consume(stream: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    try:
        for i in range(0, len(stream), chunk):
            for frame in decoder.feed(stream[i : i + chunk]):
                try:
                    header, offset = parse_request_header(frame)
                    decode_request(header, memoryview(frame)[offset:])
                except ProtocolError:
                    pass
    except ProtocolError:
        pass


FUZZ = settings(
    max_examples=1000,
    deadline=1000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    mutations=st.lists(MUTATION, min_size=1, max_size=4),
    chunk=st.integers(1, 4096),
)
def test_mutated_requests(seed: int, mutations: list[tuple[Any, ...]], chunk: int) -> None:
    payload = _mutate(SEEDS[seed], mutations)
    _consume(struct.pack(">i", len(payload)) + payload, chunk)


@FUZZ
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    mutations=st.lists(MUTATION, min_size=1, max_size=3),
    chunk=st.integers(1, 4096),
)
def test_mutated_streams_including_size_prefixes(
    seed: int, mutations: list[tuple[Any, ...]], chunk: int
) -> None:
    stream = struct.pack(">i", len(SEEDS[seed])) + SEEDS[seed]
    _consume(_mutate(stream * 2, mutations), chunk)


@settings(max_examples=300, deadline=1000)
@given(data=st.binary(max_size=512), chunk=st.integers(1, 64))
def test_random_bytes(data: bytes, chunk: int) -> None:
    _consume(data, chunk)


@settings(max_examples=300, deadline=1000)
@given(header=st.binary(min_size=0, max_size=24), body=st.binary(max_size=256))
def test_random_payload_behind_a_valid_size(header: bytes, body: bytes) -> None:
    payload = header + body
    _consume(struct.pack(">i", len(payload)) + payload, 1 << 20)


@settings(max_examples=300, deadline=1000)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    body=st.binary(max_size=256),
)
def test_random_body_behind_a_real_header(seed: int, body: bytes) -> None:
    # a real (api_key, version) header, so random bodies reach every decoder
    _, offset = parse_request_header(SEEDS[seed])
    payload = SEEDS[seed][:offset] + body
    _consume(struct.pack(">i", len(payload)) + payload, 1 << 20)
