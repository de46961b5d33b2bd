"""Client quotas, pure parts: Kafka's validation and describe filter
(odradek.client_quotas), KIP-55 precedence, the sampled rate and throttle time of
Kafka's ClientQuotaManager (odradek.gateway.client_quotas), and the controller's
persistence (odradek.controller.quota_state)."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client_quotas import (
    CLIENT_ID,
    USER,
    DescribeError,
    Entity,
    alter,
    describe,
    entity,
    resolve,
)
from odradek.controller.model import ClusterModel
from odradek.controller.quota_state import ClientQuotaState
from odradek.gateway.client_quotas import (
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    Rate,
    ThreadTime,
    Who,
    timed,
)
from odradek.protocol.errors import ErrorCode

INVALID = int(ErrorCode.INVALID_REQUEST)


def _user(name: str | None) -> Entity:
    return entity([(USER, name)])


def _client(name: str | None) -> Entity:
    return entity([(CLIENT_ID, name)])


def _both(user: str | None, client: str | None) -> Entity:
    return entity([(USER, user), (CLIENT_ID, client)])


def _error(quotas: dict[Entity, dict[str, float]], e: Entity, ops: list) -> tuple[int, str]:
    ((_, err),) = alter(quotas, [(e, ops)])
    return (err.code, err.message) if err else (0, "")


def test_alter_refuses_what_kafka_refuses() -> None:
    quotas: dict[Entity, dict[str, float]] = {}
    assert _error(quotas, _user("a"), [("foo", 1.0)]) == (INVALID, "Invalid configuration key foo")
    assert _error(quotas, _user("a"), [("producer_byte_rate", -5.0)]) == (
        INVALID,
        "Quota producer_byte_rate must be greater than 0",
    )
    assert _error(quotas, _user("a"), [("producer_byte_rate", 0.0)])[0] == INVALID
    assert (
        _error(quotas, entity([("ip", "1.2.3.4")]), [("connection_creation_rate", 1.0)])[0]
        == INVALID
    )
    assert _error(quotas, _user("a"), [("consumer_byte_rate", 1.5)]) == (
        INVALID,
        "consumer_byte_rate cannot be a fractional value.",
    )
    assert _error(quotas, entity([("group", "g")]), [("producer_byte_rate", 1.0)]) == (
        INVALID,
        "Unhandled client quota entity type: group",
    )
    assert _error(quotas, entity([]), [("producer_byte_rate", 1.0)]) == (
        INVALID,
        "Invalid empty client quota entity",
    )
    assert _error(quotas, _user(""), [("producer_byte_rate", 1.0)]) == (
        INVALID,
        "Empty user not supported",
    )
    assert (
        _error(quotas, _user("a"), [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)])[0]
        == INVALID
    )
    assert quotas == {}  # nothing refused was stored
    # request_percentage is a double; removing an unknown key is not an error (Kafka).
    assert _error(quotas, _user("a"), [("request_percentage", 12.5), ("nothing", None)]) == (0, "")
    assert quotas == {_user("a"): {"request_percentage": 12.5}}


def test_alter_validate_only_and_removal() -> None:
    quotas: dict[Entity, dict[str, float]] = {}
    assert alter(quotas, [(_client("c"), [("producer_byte_rate", 100.0)])], validate_only=True) == [
        (_client("c"), None)
    ]
    assert quotas == {}
    alter(quotas, [(_client("c"), [("producer_byte_rate", 100.0)])])
    alter(quotas, [(_client("c"), [("producer_byte_rate", None)])])
    assert quotas == {}  # an entity with no value left is gone


def test_an_entity_named_twice_changes_nothing() -> None:
    quotas: dict[Entity, dict[str, float]] = {}
    results = alter(
        quotas,
        [
            (_user("a"), [("producer_byte_rate", 1.0)]),
            (_user("a"), [("consumer_byte_rate", 1.0)]),
            (_user("b"), [("producer_byte_rate", 2.0)]),
        ],
    )
    assert [(e, err.code if err else 0) for e, err in results] == [
        (_user("a"), INVALID),
        (_user("b"), 0),
    ]
    assert quotas == {_user("b"): {"producer_byte_rate": 2.0}}


def test_precedence_is_kip_55() -> None:
    key = "producer_byte_rate"
    levels = [
        (_both("u", "c"), ("u", "c")),
        (_both("u", None), ("u", "c")),
        (_user("u"), ("u", "")),
        (_both(None, "c"), ("u", "c")),
        (_both(None, None), ("u", "c")),
        (_user(None), ("u", "")),
        (_client("c"), ("", "c")),
        (_client(None), ("", "c")),
    ]
    quotas = {e: {key: float(i + 1)} for i, (e, _) in enumerate(levels)}
    # Remove the most specific one at a time: the next level takes over.
    for i, (e, tags) in enumerate(levels):
        got = resolve(quotas, key, "u", "c")
        assert got is not None and (got.bound, (got.user, got.client_id)) == (i + 1, tags)
        del quotas[e]
    assert resolve(quotas, key, "u", "c") is None
    # Per key: another key's quota does not hide this one.
    quotas = {_both("u", "c"): {"consumer_byte_rate": 5.0}, _client("c"): {key: 7.0}}
    got = resolve(quotas, key, "u", "c")
    assert got is not None and got.bound == 7.0
    # An empty client id matches only the user levels.
    assert resolve({_client(None): {key: 1.0}}, key, "u", "") is None
    assert Who.of("User:alice", None) == Who("alice", "")


def test_describe_filters_as_kafka() -> None:
    quotas = {
        _user("a"): {"producer_byte_rate": 1.0},
        _user(None): {"producer_byte_rate": 2.0},
        _both("a", "c"): {"consumer_byte_rate": 3.0},
        _client("c"): {"request_percentage": 4.0},
    }
    everything = describe(quotas, [], strict=False)
    assert len(everything) == 4
    exact = describe(quotas, [(USER, 0, "a")], strict=False)
    assert sorted(e for e, _ in exact) == sorted([_user("a"), _both("a", "c")])
    assert [e for e, _ in describe(quotas, [(USER, 0, "a")], strict=True)] == [_user("a")]
    assert [e for e, _ in describe(quotas, [(USER, 1, None)], strict=True)] == [_user(None)]
    with pytest.raises(DescribeError) as bad:
        describe(quotas, [("group", 0, "x")], strict=False)
    assert bad.value.code == ErrorCode.UNSUPPORTED_VERSION
    for components in (
        [(USER, 0, None)],
        [(USER, 1, "x")],
        [(USER, 2, "x")],
        [(USER, 7, None)],
        [(USER, 0, "a"), (USER, 1, None)],
        [("", 0, "a")],
        [("ip", 2, None), (USER, 2, None)],
    ):
        with pytest.raises(DescribeError) as bad:
            describe(quotas, components, strict=False)
        assert bad.value.code == ErrorCode.INVALID_REQUEST, components


def test_rate_counts_at_least_n_minus_one_windows() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1000.0, 0)
    # 1000 bytes at t=0: divided by 10 whole windows, not by 0 s.
    assert rate.window_size(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    rate.record(1000.0, 15_000)  # the first sample has expired (11 windows)
    assert rate.measure(15_000) == pytest.approx(100.0)


def test_throttle_time_is_kafkas() -> None:
    m = ClientQuotaManager("Produce", "producer_byte_rate", samples=11, window_s=1)
    q = resolve({_user(None): {"producer_byte_rate": 100.0}}, "producer_byte_rate", "u", "c")
    assert m.record(q, 1000.0, 0) == 0  # exactly the bound over 10 windows
    # 3000 bytes in 10 s against 100/s: (300 - 100) / 100 * 10000 ms.
    assert m.record(q, 2000.0, 0) == 20_000
    assert m.record(None, 1e12, 0) == 0  # no quota, nothing measured
    assert m.max_value_in_window(q) == pytest.approx(1000.0)
    # request_percentage throttles are capped at one window.
    r = ClientQuotaManager("Request", "request_percentage", 11, 1, max_throttle_ms=1000)
    assert r.record(q, 1e6, 0) == 1000


def test_controller_mutation_bucket_is_kafkas() -> None:
    m = ControllerMutationQuotaManager(samples=11, window_s=1)
    q = resolve(
        {_user(None): {"controller_mutation_rate": 2.0}}, "controller_mutation_rate", "u", ""
    )
    assert q is not None
    assert m.throttle_ms(q, 0) == 0  # a full bucket: 11 s * 2/s = 22 partitions
    m.record(q, 30, 0)
    assert m.throttle_ms(q, 0) == 4000  # 8 partitions short at 2/s
    assert m.throttle_ms(q, 4000) == 0  # refilled
    assert m.throttle_ms(q, 100_000) == 0  # never more than the burst


def test_timed_counts_only_running_steps() -> None:
    async def work() -> int:
        await asyncio.sleep(0.2)
        return 7

    async def main() -> tuple[int, int]:
        clock = ThreadTime()
        got = await timed(work(), clock)
        return got, clock.total_ns

    got, spent = asyncio.run(main())
    assert got == 7 and spent < 50_000_000  # the 200 ms sleep is not counted


def test_quotas_persist_in_the_model() -> None:
    model = ClusterModel()
    model.client_quotas.alter([(_both("a", None), [("producer_byte_rate", 1024.0)])], False)
    records = model.take_changes()
    assert "client_quotas" in records
    again = ClusterModel()
    again.load(records)
    assert again.client_quotas.quotas == {_both("a", None): {"producer_byte_rate": 1024.0}}
    state = ClientQuotaState()
    state.alter([(_user("x"), [("producer_byte_rate", 5.0)])], validate_only=True)
    assert not state.dirty
