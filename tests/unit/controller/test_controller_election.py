"""Controller election, fencing and publishing against a real embedded store (in process)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from helpers.waiting import wait_until_async

from odradek.controller.cluster_state import NodeInfo, NodeKind, NodeState
from odradek.controller.controller import Controller, ControllerSettings
from odradek.controller.embedded_store import EmbeddedStore
from odradek.controller.errors import ControllerError, NotControllerError
from odradek.controller.etcd_store import EtcdStore
from odradek.controller.model import TopicSpec
from odradek.controller.store import MetadataStore
from odradek.protocol.errors import ErrorCode


def settings(node_id: int, session_timeout_ms: int = 400) -> ControllerSettings:
    return ControllerSettings(
        node_id=node_id,
        heartbeat_interval_ms=50,
        session_timeout_ms=session_timeout_ms,
        lease_ttl_ms=600,
    )


OpenStore = Callable[[], Awaitable[MetadataStore]]


@pytest.fixture(params=["embedded", "etcd"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenStore]:
    """Stores two controllers share: one embedded store object, or etcd clients of one etcd."""
    opened: list[MetadataStore] = []
    if request.param == "embedded":
        shared = await EmbeddedStore.open(tmp_path / "store")
        opened.append(shared)

        async def embedded() -> MetadataStore:
            return shared

        yield embedded
    else:
        server = request.getfixturevalue("etcd_server")
        root = f"/t{id(request)}"

        async def etcd() -> MetadataStore:
            store = await EtcdStore.connect([server.endpoint], wait=10)
            opened.append(store)
            return store

        request.node.etcd_root = root
        yield etcd
    for store in opened:
        await store.close()


def settings_in(request: pytest.FixtureRequest, node_id: int, **kw: int) -> ControllerSettings:
    s = settings(node_id, **kw)
    s.root = getattr(request.node, "etcd_root", "/odradek")
    return s


async def test_one_active_standby_takes_over_and_stale_writes_are_fenced(
    open_store: OpenStore, request: pytest.FixtureRequest
) -> None:
    store = await open_store()
    a = Controller(store, settings_in(request, 3000))
    b = Controller(await open_store(), settings_in(request, 3001))
    await a.start()
    assert await a.wait_settled(5)
    await b.start()
    assert await b.wait_settled(5)
    assert a.active and not b.active and b.healthy
    with pytest.raises(NotControllerError):
        await b.create_topics([TopicSpec("t")])
    await a.register_node(NodeInfo(100, NodeKind.STORAGE))
    [created] = await a.create_topics([TopicSpec("t", 2, 1)])
    assert created.error_code == 0
    cluster_id, version = a.metadata().cluster_id, a.metadata().version

    # A loses its lease (e.g. a long pause): B takes over with a higher epoch ...
    await store.revoke(a._lease)
    await wait_until_async(lambda: b.active, "the standby to take over", timeout=5)
    assert b.epoch == a.epoch + 1
    assert b.metadata().cluster_id == cluster_id and b.metadata().version > version
    assert b.model is not None and b.model.topics["t"].topic_id == created.topic_id
    # ... and anything A still tries to write is fenced; A steps down.
    if a.active:
        with pytest.raises(NotControllerError):
            await a.create_topics([TopicSpec("late", 1, 1)])
    await wait_until_async(lambda: not a.active, "the old controller to step down", timeout=5)
    assert "late" not in b.model.topics
    await a.stop()
    await b.stop()


async def test_registrations_are_leased_keys_renewed_by_heartbeats(
    open_store: OpenStore, request: pytest.FixtureRequest
) -> None:
    store = await open_store()
    c = Controller(store, settings_in(request, 3000, session_timeout_ms=1000))
    await c.start()
    assert await c.wait_settled(5)
    key = c.key_brokers
    node = await c.register_node(NodeInfo(100, NodeKind.STORAGE, host="h", grpc_port=7))
    other = await c.register_node(NodeInfo(101, NodeKind.STORAGE))
    kv = await store.get(f"{key}100")
    assert kv is not None and kv.lease != 0
    assert json.loads(kv.value)["incarnation"] == node.incarnation
    for _ in range(30):  # 3 x the session: heartbeats keep node 100's lease (and key) alive
        c.heartbeat(100, node.incarnation)
        await asyncio.sleep(0.1)  # the scenario: a heartbeat every 100 ms
    assert await store.get(f"{key}100") is not None
    assert c.model is not None and c.model.nodes[100].state is NodeState.ONLINE
    # 101 never heartbeated: fenced, its key gone with it.
    assert c.model.nodes[101].state is NodeState.OFFLINE
    assert await store.get(f"{key}101") is None
    # A re-registration replaces the key under a new lease.
    again = await c.register_node(NodeInfo(101, NodeKind.STORAGE))
    kv101 = await store.get(f"{key}101")
    assert kv101 is not None and json.loads(kv101.value)["incarnation"] == again.incarnation
    assert again.incarnation > other.incarnation
    await c.stop()


async def test_a_registration_whose_lease_runs_out_fences_the_node(
    open_store: OpenStore, request: pytest.FixtureRequest
) -> None:
    store = await open_store()
    # A long heartbeat session: only the vanished key can fence the node this fast.
    c = Controller(store, settings_in(request, 3000, session_timeout_ms=60000))
    await c.start()
    assert await c.wait_settled(5)
    await c.register_node(NodeInfo(100, NodeKind.STORAGE))
    assert c.registrations is not None
    lease = c.registrations.sessions[100].lease
    await store.revoke(lease)  # e.g. the lease expired while nobody vouched for the node
    await wait_until_async(
        lambda: c.model is not None and c.model.nodes[100].state is NodeState.OFFLINE,
        "node 100 fenced",
        timeout=5,
    )
    await c.stop()


async def test_a_new_controller_adopts_live_registrations(
    open_store: OpenStore, request: pytest.FixtureRequest
) -> None:
    a = Controller(await open_store(), settings_in(request, 3000, session_timeout_ms=60000))
    await a.start()
    assert await a.wait_settled(5)
    node = await a.register_node(NodeInfo(100, NodeKind.STORAGE))
    assert a.registrations is not None
    lease = a.registrations.sessions[100].lease
    b = Controller(await open_store(), settings_in(request, 3001, session_timeout_ms=60000))
    await b.start()
    assert await b.wait_settled(5)
    await a.stop()  # a clean handover: the lease is still running
    await wait_until_async(
        lambda: b.active and b.registrations is not None, "the new active controller", timeout=10
    )
    assert b.registrations is not None and b.registrations.sessions[100].lease == lease
    b.heartbeat(100, node.incarnation)
    assert b.model is not None and b.model.nodes[100].state is NodeState.ONLINE
    await b.stop()


async def test_watchers_get_each_version_or_skip_to_the_latest(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    c = Controller(store, settings(3000))
    await c.start()
    await c.wait_settled(5)
    await c.register_node(NodeInfo(100, NodeKind.STORAGE))
    fast = c.watch(0)
    first = await fast.next()
    assert first is not None and first.version == c.metadata().version
    await c.create_topics([TopicSpec("a", 1, 1)])
    got = await fast.next()
    assert got is not None and [t.name for t in got.topics] == ["a"]
    slow = c.watch(got.version)
    for name in ("b", "c", "d"):
        await c.create_topics([TopicSpec(name, 1, 1)])
    latest = await slow.next()  # skipped the intermediate versions
    assert latest is not None and latest.version == c.metadata().version
    assert [t.name for t in latest.topics] == ["a", "b", "c", "d"]
    await c.stop()
    pending = await fast.next()  # what it had not read yet, then the end of the stream
    assert pending is not None and pending.version == latest.version
    assert await fast.next() is None
    await store.close()


async def test_heartbeats_sessions_and_incarnations(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    c = Controller(store, settings(3000, session_timeout_ms=800))
    await c.start()
    await c.wait_settled(5)
    node = await c.register_node(NodeInfo(100, NodeKind.STORAGE))
    with pytest.raises(ControllerError) as info:
        c.heartbeat(100, node.incarnation + 1)
    assert info.value.code is ErrorCode.STALE_BROKER_EPOCH
    for _ in range(20):  # heartbeating keeps it online past the session timeout
        assert c.heartbeat(100, node.incarnation) is False
        await asyncio.sleep(0.06)  # the scenario: a heartbeat every 60 ms
    assert c.model is not None and c.model.nodes[100].state is NodeState.ONLINE
    await wait_until_async(
        lambda: c.model is not None and c.model.nodes[100].state is NodeState.OFFLINE,
        "node 100 fenced after its session timeout",
        timeout=5,
    )
    with pytest.raises(ControllerError):
        c.heartbeat(100, node.incarnation)  # fenced: must register again
    again = await c.register_node(NodeInfo(100, NodeKind.STORAGE))
    assert again.incarnation > node.incarnation
    await c.stop()
    await store.close()


async def test_restart_keeps_state_and_versions_move_forward(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    c = Controller(store, settings(3000, session_timeout_ms=60000))
    await c.start()
    await c.wait_settled(5)
    node = await c.register_node(NodeInfo(100, NodeKind.STORAGE))
    await c.create_topics([TopicSpec("t", 3, 1)])
    first, _ = await c.allocate_producer_ids(100, node.incarnation)
    before = c.metadata()
    await c.stop()
    await store.close()

    store = await EmbeddedStore.open(tmp_path)
    c = Controller(store, settings(3000, session_timeout_ms=60000))
    await c.start()
    await c.wait_settled(5)
    after = c.metadata()
    assert after.cluster_id == before.cluster_id and after.version > before.version
    assert after.controller_epoch == before.controller_epoch + 1
    assert [t.topic_id for t in after.topics] == [t.topic_id for t in before.topics]
    c.heartbeat(100, node.incarnation)  # the registration survived: no re-register storm
    second, _ = await c.allocate_producer_ids(100, node.incarnation)
    assert second >= first + 1000
    await c.stop()
    await store.close()
