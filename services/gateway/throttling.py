"""Client quotas applied to a handled request: what KafkaApis does before it sends a
response (``sendResponseMaybeThrottle``, Produce's and Fetch's callbacks).

- Produce: the request's size is recorded against ``producer_byte_rate`` and, unless
  acks=0, its handling time against ``request_percentage``; the larger throttle wins.
- Fetch: the response's record bytes against ``consumer_byte_rate`` and the handling
  time against ``request_percentage``; when either throttles, the bytes are taken
  back and the answer is an empty response carrying only the throttle time (Kafka's
  ``getThrottledResponse``: the consumer fetches the same offsets again later).
- Every other API (but the SASL exchange): the handling time against
  ``request_percentage``.

A throttle time > 0 goes into the response's ``throttle_time_ms`` and mutes the
connection for that long (KIP-219, :meth:`KafkaConnection.mute`); the response
itself goes out at once.
"""

from __future__ import annotations

from prometheus_client import Counter

from odradek.gateway.client_quotas import (
    ClientQuotaManager,
    ClientQuotas,
    ThreadTime,
    Who,
    thread_time_percentage,
)
from odradek.gateway.connection import ConnectionContext
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import FetchResponse, Message, ProduceRequest

THROTTLED = Counter(
    "odradek_gateway_throttled_requests_total",
    "Responses answered with a throttle time (client quotas), by quota type.",
    ["quota_type"],
)


def fetch_response_bytes(response: FetchResponse) -> int:
    return sum(len(p.records or b"") for t in response.responses for p in t.partitions)


async def apply_quotas(
    quotas: ClientQuotas,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: Message,
    response: Message | None,
    request_bytes: int,
    clock: ThreadTime | None,
) -> Message | None:
    """The response to send (a throttled Fetch's is emptied), with its throttle time.

    While the connection is throttled by an earlier request, this one waits before it
    is measured: Kafka handles one request per connection at a time and would not have
    read it before the throttle passed, so its bytes count from then on."""
    if not ctx.unmuted.is_set():
        await ctx.unmuted.wait()
    who = Who.of(ctx.principal, header.client_id)
    now = quotas.now_ms()
    key = header.api_key
    rq = quotas.resolve(quotas.request, who) if clock is not None else None
    produce_acks0 = (
        key == ApiKey.PRODUCE and isinstance(request, ProduceRequest) and not (request.acks)
    )
    request_ms = 0
    if rq is not None and clock is not None and not produce_acks0:
        request_ms = quotas.request.record(rq, thread_time_percentage(clock.elapsed_ns()), now)
    winner: ClientQuotaManager = quotas.request
    winner_q = rq
    throttle = request_ms
    if key == ApiKey.PRODUCE:
        bq = quotas.resolve(quotas.produce, who)
        bandwidth_ms = quotas.produce.record(bq, request_bytes, now)
        if bandwidth_ms > request_ms:
            winner, winner_q, throttle = quotas.produce, bq, bandwidth_ms
    elif key == ApiKey.FETCH and isinstance(response, FetchResponse):
        bq = quotas.resolve(quotas.fetch, who)
        size = fetch_response_bytes(response) if bq is not None else 0
        bandwidth_ms = quotas.fetch.record(bq, size, now)
        if bandwidth_ms > request_ms:
            winner, winner_q, throttle = quotas.fetch, bq, bandwidth_ms
        if throttle > 0:
            quotas.fetch.unrecord(bq, size, now)
            response = FetchResponse(
                throttle_time_ms=throttle, error_code=0, session_id=0, responses=[]
            )
    if throttle <= 0:
        return response
    winner.throttled(winner_q, throttle)
    THROTTLED.labels(winner.quota_type).inc()
    if ctx.mute is not None:
        ctx.mute(throttle)
    _set_throttle(response, throttle)
    return response


def _set_throttle(response: Message | None, throttle: int) -> None:
    """The larger of ``throttle`` and what the handler set (controller mutations)."""
    if response is not None and hasattr(response, "throttle_time_ms"):
        throttle = max(throttle, int(getattr(response, "throttle_time_ms", 0) or 0))
        setattr(response, "throttle_time_ms", throttle)  # noqa: B010 (not every message has it)


THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


class MutationQuota:
    """One CreateTopics, CreatePartitions or DeleteTopics request against
    ``controller_mutation_rate`` (KIP-599; Kafka's Strict/PermissiveControllerMutationQuota).

    Strict (the versions that know THROTTLING_QUOTA_EXCEEDED): a topic is refused while
    the client's token bucket is below zero, else its partitions are taken (the bucket
    may go below zero then); the response carries the throttle time only when a topic
    was refused. Permissive (older versions): everything is taken and the response
    carries the time until the bucket is back at zero. The partitions of a topic the
    controller then refuses are given back."""

    def __init__(
        self, quotas: ClientQuotas, ctx: ConnectionContext, header: RequestHeader, strict_since: int
    ) -> None:
        self.quotas = quotas
        self.ctx = ctx
        self.q = quotas.resolve(quotas.mutation, Who.of(ctx.principal, header.client_id))
        self.strict = header.api_version >= strict_since
        self.throttle = 0

    def admit(self, partitions: int) -> bool:
        """False: refuse this topic with THROTTLING_QUOTA_EXCEEDED."""
        if self.q is None:
            return True
        now = self.quotas.now_ms()
        if self.strict:
            wait = self.quotas.mutation.throttle_ms(self.q, now)
            if wait > 0:
                self.throttle = max(self.throttle, wait)
                return False
        self.quotas.mutation.record(self.q, max(0, partitions), now)
        return True

    def give_back(self, partitions: int) -> None:
        if self.q is not None and partitions > 0:
            self.quotas.mutation.record(self.q, -partitions, self.quotas.now_ms())

    def finish(self, response: Message) -> None:
        """Put the throttle time in ``response`` and mute the connection for it."""
        if self.q is None:
            return
        if not self.strict:
            self.throttle = self.quotas.mutation.throttle_ms(self.q, self.quotas.now_ms())
        if self.throttle <= 0:
            return
        self.quotas.mutation.throttled(self.q, self.throttle)
        THROTTLED.labels(self.quotas.mutation.quota_type).inc()
        if self.ctx.mute is not None:
            self.ctx.mute(self.throttle)
        _set_throttle(response, self.throttle)
