"""The common Produce request (one record, acks=-1, librdkafka's default producer) goes
through ``Gateway.dispatch`` without looking up an enum member on its class and without
calling ``typing.cast`` (issue 18).

On Python 3.11 ``ApiKey.PRODUCE`` or ``ErrorCode.X`` read from the class costs ~0.3-0.4
us, several times a plain global's; ``typing.cast`` is a function call at run time. The
dispatch, the Produce handler and the response encoding made eight of the first and
eight of the second per request (~5 us of the ~70 us the gateway's own Python took per
request, in-process). A call-count test: the answer is checked too, so a fast path that
skipped work it must do would fail here as well.
"""

from __future__ import annotations

import enum
import sys
from collections import Counter
from types import FrameType
from typing import Any

from gateway_testkit import (
    CORRELATION_ID,
    AppendingNode,
    offline_gateway,
    one_partition_metadata,
    produce_request,
)

from odradek.gateway.connection import ConnectionContext
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import parse_request_header, parse_response_header
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.versions import response_header_version
from odradek.records.record import BatchBuilder

_TYPE_GETATTRIBUTE = type.__getattribute__


async def test_one_record_produce_looks_up_no_enum_member_and_casts_nothing() -> None:
    async with offline_gateway(one_partition_metadata()) as gw:
        node = AppendingNode()
        gw.storage = node  # type: ignore[assignment]
        ctx = ConnectionContext(1, "test", None)

        members: Counter[str] = Counter()
        calls: Counter[str] = Counter()

        def member_lookup(cls: type, name: str) -> Any:
            value = _TYPE_GETATTRIBUTE(cls, name)
            if isinstance(value, enum.Enum) and type(value) is cls:
                members[f"{cls.__name__}.{name}"] += 1
            return value

        def profile(frame: FrameType, event: str, _arg: object) -> None:
            if event == "call" and frame.f_code.co_filename.endswith("typing.py"):
                calls[frame.f_code.co_name] += 1

        async def produce(value: bytes, *, counted: bool) -> Any:
            builder = BatchBuilder()
            builder.append(1, None, value)
            frame = encode_request(
                ApiKey.PRODUCE, 10, CORRELATION_ID, "rdkafka", produce_request(builder.build())
            )
            header, offset = parse_request_header(memoryview(frame)[4:])
            if counted:  # the gateway's part only, not this test's encoding and decoding
                enum.EnumType.__getattribute__ = member_lookup  # type: ignore[assignment,method-assign]
                sys.setprofile(profile)
            try:
                answer = await gw.dispatch(ctx, header, memoryview(frame)[4 + offset :])
            finally:
                if counted:
                    sys.setprofile(None)
                    del enum.EnumType.__getattribute__
            assert isinstance(answer, bytes)
            _, start = parse_response_header(
                memoryview(answer)[4:], response_header_version(ApiKey.PRODUCE, 10)
            )
            return decode_response(ApiKey.PRODUCE, 10, memoryview(answer)[4 + start :])

        await produce(b"warm", counted=False)  # caches filled: metrics, partition entries
        response = await produce(b"counted", counted=True)
        [topic] = response.responses
        [part] = topic.partition_responses
        assert (topic.name, part.index, part.error_code, part.base_offset) == ("orders", 0, 0, 1)
        assert b"counted" in node.seen[-1][1]
        assert members == Counter(), members
        assert calls["cast"] == 0, calls
