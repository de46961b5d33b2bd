"""The metadata store contract (both backends: embedded and a real etcd), then the
embedded store's own journal recovery and kill -9 safety."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from helpers.waiting import wait_until_async

from odradek.config import ConfigError
from odradek.controller.embedded_store import JOURNAL, SNAPSHOT, EmbeddedStore
from odradek.controller.etcd_store import EtcdStore
from odradek.controller.journal import decode_entry, encode_entry, scan_journal
from odradek.controller.store import (
    CompactedError,
    Compare,
    Delete,
    EventType,
    LeaseNotFoundError,
    MetadataStore,
    Put,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
)
from odradek.controller.store_url import parse_url, store_target
from odradek.tools.etcd_server import EtcdServer


class Backend:
    """Opens stores of one kind; every test starts from an empty key space."""

    kind = ""

    async def open(self, **embedded: Any) -> MetadataStore:
        raise NotImplementedError

    async def compact(self, store: MetadataStore, revision: int) -> None:
        """Drop watch history before ``revision`` (embedded: open with a small history)."""


class EmbeddedBackend(Backend):
    kind = "embedded"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def open(self, **embedded: Any) -> MetadataStore:
        return await EmbeddedStore.open(self.path, **embedded)


class EtcdBackend(Backend):
    kind = "etcd"

    def __init__(self, server: EtcdServer) -> None:
        self.server = server
        self.first = True

    async def open(self, **embedded: Any) -> MetadataStore:
        store = await EtcdStore.connect([self.server.endpoint], wait=10.0)
        if self.first:  # a clean slate: no keys, no leases from earlier tests
            self.first = False
            client = store._client
            assert client.lease is not None
            for lease in (await client.lease.leases()).leases:
                await store.revoke(lease.ID)
            await store.delete("", prefix=True)
        return store

    async def compact(self, store: MetadataStore, revision: int) -> None:
        assert isinstance(store, EtcdStore) and store._client.kv is not None
        await store._client.kv.compact(revision, physical=True)


@pytest.fixture(params=["embedded", "etcd"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "embedded":
        yield EmbeddedBackend(tmp_path / "store")
    else:
        yield EtcdBackend(request.getfixturevalue("etcd_server"))


# ---------------------------------------------------------------------- the contract


async def test_put_get_range_revisions(backend: Backend) -> None:
    store = await backend.open()
    base = store.revision
    assert await store.put("/a/1", b"one") == base + 1
    assert await store.put("/a/2", "two") == base + 2
    assert await store.put("/a/1", b"uno") == base + 3
    kv = await store.get("/a/1")
    assert kv is not None
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (
        b"uno",
        base + 1,
        base + 3,
        2,
    )
    assert [k.key for k in await store.range("/a/")] == ["/a/1", "/a/2"]
    assert [k.key for k in await store.range("")] == ["/a/1", "/a/2"]
    assert await store.delete("/a/", prefix=True) == 2
    assert store.revision == base + 4  # one delete, one revision
    assert await store.delete("/missing") == 0
    assert await store.put("/b", b"") == base + 5  # deleting nothing wrote nothing
    assert await store.get("/a/1") is None
    await store.close()


async def test_txn_compares_fence_a_stale_writer(backend: Backend) -> None:
    store = await backend.open()
    base = await store.put("/controller_epoch", b"1")
    fenced = [Compare.value_equals("/controller_epoch", "1")]
    ok = await store.txn(fenced, [Put.of("/t/x", "a"), Delete("/t/old")], [Put.of("/lost", "b")])
    assert ok.succeeded and ok.revision == base + 1
    await store.put("/controller_epoch", b"2")  # a newer controller took over
    stale = await store.txn(fenced, [Put.of("/t/y", "a")])
    assert not stale.succeeded and stale.revision == base + 2
    assert await store.get("/t/y") is None and await store.get("/lost") is None
    assert (await store.txn([Compare.missing("/nope")], [])).succeeded
    assert not (await store.txn([Compare.exists("/nope")], [])).succeeded
    assert not (await store.txn([Compare.value_equals("/nope", "")], [])).succeeded
    assert (await store.txn([Compare.mod_revision_equals("/t/x", base + 1)], [])).succeeded
    assert (await store.txn([Compare.mod_revision_equals("/nope", 0)], [])).succeeded
    await store.close()


async def test_leases_expire_revoke_and_die_with_their_holder(backend: Backend) -> None:
    store = await backend.open()
    short = await store.grant(1)
    long = await store.grant(30)
    await store.put("/nodes/1", b"a", lease=short)
    await store.put("/nodes/2", b"b", lease=long)
    await store.put("/plain", b"c")
    kv = await store.get("/nodes/1")
    assert kv is not None and kv.lease == short
    with pytest.raises(LeaseNotFoundError):
        await store.put("/nodes/3", b"x", lease=12345)
    with pytest.raises(LeaseNotFoundError):
        await store.txn([], [Put.of("/nodes/3", b"x", 12345)])
    for _ in range(6):  # keepalive holds the key past its TTL
        await asyncio.sleep(0.3)  # the scenario: a keepalive every 300 ms
        assert await store.keepalive(short) == 1
    assert await store.get("/nodes/1") is not None

    async def expired() -> bool:
        return await store.get("/nodes/1") is None

    # Unrenewed, the 1 s lease ends (etcd checks expiry twice a second).
    await wait_until_async(expired, "the unrenewed lease's key to go", timeout=10)
    with pytest.raises(LeaseNotFoundError):
        await store.keepalive(short)
    lease = await store.grant(30)
    await store.put("/nodes/4", b"d", lease=lease)
    await store.revoke(lease)
    await store.revoke(lease)  # unknown leases are ignored
    assert await store.get("/nodes/4") is None
    await store.close()

    # Nobody keeps the long lease alive any more: its key goes (embedded: at reopen,
    # as a new etcd session; etcd: when the TTL runs out, which a test cannot wait for).
    reopened = await backend.open()
    if backend.kind == "etcd":
        await reopened.revoke(long)
    assert await reopened.get("/nodes/2") is None
    assert await reopened.get("/plain") is not None
    await reopened.close()


async def test_watch_replays_history_then_follows(backend: Backend) -> None:
    store = await backend.open(history=100)
    first = await store.put("/t/a", b"1")
    await store.put("/other", b"x")
    await store.put("/t/b", b"2")
    watch = store.watch("/t/", start_revision=first)
    await store.delete("/t/a")
    events = [await anext(watch) for _ in range(3)]
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in events] == [
        (EventType.PUT, "/t/a", first),
        (EventType.PUT, "/t/b", first + 2),
        (EventType.DELETE, "/t/a", first + 3),
    ]
    assert events[2].kv.value == b"" and events[2].kv.version == 0
    live = store.watch("/t/")  # from now: a write right after the call is not missed
    await store.put("/t/c", b"3")
    await store.put("/u", b"elsewhere")
    got = await anext(live)
    assert (got.kv.key, got.kv.value, got.kv.version) == ("/t/c", b"3", 1)
    live.cancel()
    with pytest.raises(StopAsyncIteration):
        await anext(live)
    watch.cancel()
    await store.close()


async def test_watch_from_compacted_history_is_refused(backend: Backend) -> None:
    store = await backend.open(history=2)
    first = 0
    for i in range(5):
        revision = await store.put(f"/k{i}", b"v")
        first = first or revision
    await backend.compact(store, store.revision)
    old = store.watch("", start_revision=first)
    with pytest.raises(CompactedError):
        await anext(old)
    await store.close()


async def test_a_closed_store_refuses_work(backend: Backend) -> None:
    store = await backend.open()
    await store.close()
    with pytest.raises(StoreError):
        await store.put("/a", b"1")


# ---------------------------------------------------------------------- etcd only


def test_etcd_urls() -> None:
    target = parse_url("etcd://etcd-0:2379,etcd-1:2379/odradek")
    assert target.endpoints == ["etcd-0:2379", "etcd-1:2379"] and target.root == "/odradek"
    assert parse_url("etcd://127.0.0.1:2379").root == ""
    for bad in ("etcd://", "file:///x", "etcd://host", "etcd://host:port"):
        with pytest.raises(ValueError):
            parse_url(bad)
    assert store_target("file:///var/lib/c") == Path("/var/lib/c")
    assert store_target("./data/controller") == Path("data/controller")
    assert store_target("etcd://127.0.0.1:2379") == parse_url("etcd://127.0.0.1:2379")
    for bad in ("zk://host:2181", "etcd://host"):
        with pytest.raises(ConfigError):
            store_target(bad)


async def test_etcd_unreachable_is_a_store_error_not_a_hang(tmp_path: Path) -> None:
    from odradek.tools.launcher import free_port

    store = await EtcdStore.connect([f"127.0.0.1:{free_port()}"], timeout=0.5)
    with pytest.raises(StoreError):
        await store.put("/a", b"1")
    await store.close()
    with pytest.raises(StoreError):
        await EtcdStore.connect([f"127.0.0.1:{free_port()}"], timeout=0.3, wait=0.5)


# ---------------------------------------------------------------------- embedded only


async def test_state_survives_reopen_and_snapshots(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path, snapshot_every=7)
    for i in range(30):
        await store.put(f"/k/{i % 5}", f"v{i}".encode())
    await store.put("/bin", bytes(range(256)))
    expected = {kv.key: kv for kv in await store.range("")}
    revision = store.revision
    await store.close()
    assert (tmp_path / SNAPSHOT).exists()
    reopened = await EmbeddedStore.open(tmp_path, snapshot_every=7)
    assert reopened.revision == revision
    assert {kv.key: kv for kv in await reopened.range("")} == expected
    assert await reopened.put("/k/0", b"next") == revision + 1
    await reopened.close()


async def test_torn_last_line_is_dropped(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    await store.put("/a", b"1")
    await store.put("/b", b"2")
    await store.close()
    journal = tmp_path / JOURNAL
    whole = journal.read_bytes()
    half_line = encode_entry(3, [Put.of("/c", "3")])[:25]
    journal.write_bytes(whole + half_line)
    store = await EmbeddedStore.open(tmp_path)
    assert store.truncated_bytes == len(half_line)
    assert store.revision == 2 and await store.get("/c") is None
    assert await store.put("/c", b"3") == 3  # appends after the cut, not after garbage
    await store.close()
    store = await EmbeddedStore.open(tmp_path)
    assert (await store.get("/c")) is not None and store.truncated_bytes == 0
    await store.close()


async def test_corrupt_last_line_with_newline_is_dropped(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    await store.put("/a", b"1")
    await store.close()
    line = bytearray(encode_entry(2, [Put.of("/b", "2")]))
    line[12] ^= 0x01  # flip a bit inside the JSON: the CRC no longer matches
    (tmp_path / JOURNAL).write_bytes((tmp_path / JOURNAL).read_bytes() + bytes(line))
    store = await EmbeddedStore.open(tmp_path)
    assert store.revision == 1
    await store.close()


async def test_corruption_before_good_lines_is_refused(tmp_path: Path) -> None:
    good = [encode_entry(i, [Put.of(f"/k{i}", "v")]) for i in (1, 2, 3)]
    bad = bytearray(good[1])
    bad[5] = ord("X")
    (tmp_path / JOURNAL).write_bytes(good[0] + bytes(bad) + good[2])
    with pytest.raises(StoreCorruptError):
        await EmbeddedStore.open(tmp_path)


def test_journal_line_round_trip_and_scan() -> None:
    ops: list[Put | Delete] = [
        Put.of("/x", b"\xff\x00binary", 7),
        Delete("/y"),
        Put.of("/z", "text"),
    ]
    line = encode_entry(42, ops)
    assert line.endswith(b"\n") and json.loads(line)["rev"] == 42
    assert decode_entry(line) == (42, ops)
    scan = scan_journal(line + line[:10])
    assert scan.torn and scan.good_length == len(line) and len(scan.entries) == 1
    assert not scan_journal(line).torn


async def test_a_cancelled_write_still_completes_consistently(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    cancelled = 0
    for delay in (0, 0.0001, 0.0005):
        task = asyncio.get_running_loop().create_task(store.put("/a", b"1"))
        await asyncio.sleep(delay)  # before, or somewhere inside, the journal write
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            cancelled += 1
    assert cancelled >= 1
    revision = await store.put("/b", b"2")
    assert revision == 4 and (await store.get("/a")) is not None
    await store.close()
    reopened = await EmbeddedStore.open(tmp_path)  # journal and memory agreed: replay is clean
    assert reopened.revision == 4
    await reopened.close()


async def test_second_opener_is_locked_out(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path)
    with pytest.raises(StoreLockedError):
        await EmbeddedStore.open(tmp_path)
    await store.close()
    again = await EmbeddedStore.open(tmp_path)  # released on close
    await again.close()


async def test_watch_reports_compaction_and_overflow(tmp_path: Path) -> None:
    store = await EmbeddedStore.open(tmp_path, history=2, watch_queue=3)
    for i in range(5):
        await store.put(f"/k{i}", b"v")
    old = store.watch("", start_revision=1)
    with pytest.raises(CompactedError):
        await anext(old)
    slow = store.watch("")
    for i in range(5):
        await store.put(f"/k{i}", b"w")
    with pytest.raises(CompactedError):
        await anext(slow)
    await store.close()


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from odradek.controller.embedded_store import EmbeddedStore
    from odradek.controller.store import Put

    async def main() -> None:
        store = await EmbeddedStore.open(sys.argv[1], snapshot_every=40)
        i = 0
        while True:
            value = ("x" * (i % 300)).encode()
            # two keys per txn: after a crash both or neither must be there
            await store.txn([], [Put.of(f"/a/{i:06d}", value), Put.of(f"/b/{i:06d}", value)])
            print(i, flush=True)
            i += 1

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("acked_before_kill", [37, 150])
def test_kill_9_during_a_burst_keeps_every_acknowledged_write(
    tmp_path: Path, acked_before_kill: int
) -> None:
    data = tmp_path / "store"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(data)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    acked = -1
    try:
        for line in proc.stdout:
            acked = int(line)
            if acked >= acked_before_kill:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    for line in proc.stdout:  # acknowledgements already in the pipe when it died
        acked = int(line)
    assert acked >= acked_before_kill

    async def check() -> None:
        store = await EmbeddedStore.open(data)
        a = {kv.key[3:]: kv.value for kv in await store.range("/a/")}
        b = {kv.key[3:]: kv.value for kv in await store.range("/b/")}
        assert a == b  # no txn half-applied
        indexes = sorted(int(k) for k in a)
        assert indexes == list(range(len(indexes)))  # no holes
        assert indexes[-1] >= acked  # every acknowledged write is there
        assert store.revision == len(indexes)
        await store.close()

    asyncio.run(check())
