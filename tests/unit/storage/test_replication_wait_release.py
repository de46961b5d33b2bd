"""An answered acks=-1 wait lets go of its request at once, without the cyclic collector.

The services run the cyclic collector rarely (odradek.gc_tuning). A ReplicationWait
and its partition registrations referred to each other; once answered, the pair (and
through the answer callback the request's record blobs, views of a 4 MiB data link
receive buffer each) stayed alive until a full collection: a storage node under an
acks=all RF 3 load grew by about half of what it replicated between collections, and
every receive buffer came back as fresh pages (issue 18).
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_storage_replica_manager import snapshot

from odradek.log.manager import LogManager
from odradek.protocol.errors import ErrorCode
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.replication_wait import ReplicationWait

ME = 1


class _Request:
    """Stands for what an answer callback keeps: the request and its record blobs."""


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    replicas = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    replicas.apply(snapshot(1, [(0, [ME, 2, 3], ME, 0)]))
    yield replicas
    logs.shutdown()


@pytest.fixture
def no_cyclic_collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _waits() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is ReplicationWait)


@pytest.mark.usefixtures("no_cyclic_collector")
@pytest.mark.parametrize("ending", ["timeout", "new leader epoch"])
async def test_an_answered_wait_is_freed_by_reference_counting(
    replicas: ReplicaManager, ending: str
) -> None:
    leader = replicas.get("t", 0)
    assert leader is not None and leader.is_leader
    loop = asyncio.get_running_loop()
    request = _Request()
    kept = weakref.ref(request)
    answers: list[list[ErrorCode]] = []

    def answered(codes: list[ErrorCode], request: _Request = request) -> None:
        answers.append(codes)

    required = leader.log.log_end_offset + 1  # not replicated yet: registers and waits
    wait = ReplicationWait([(leader, required, leader.leader_epoch)], 60_000, loop, answered)
    del request, answered
    assert not answers and len(leader.replication_waiters) == 1 and _waits() == 1
    if ending == "timeout":
        wait.expire()
        assert answers == [[ErrorCode.REQUEST_TIMED_OUT]]
        # The registration is still in the partition's heap until the high watermark
        # passes it, but the request is no longer reachable from it.
        assert kept() is None
        del wait
        leader.replication_waiters.wake_up_to(required)
    else:
        # A new leader epoch wakes every registration (Partition.make_leader).
        replicas.apply(snapshot(2, [(0, [ME, 2, 3], ME, 1)]))
        await asyncio.sleep(0)  # the wake-up's re-check, a loop callback
        assert answers == [[ErrorCode.NOT_LEADER_OR_FOLLOWER]]
        del wait
    assert len(leader.replication_waiters) == 0
    assert kept() is None
    assert _waits() == 0, "the answered wait is alive until a cyclic collection"
