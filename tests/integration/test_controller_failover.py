"""Several controllers on etcd, one active: kill -9 the active one while a producer writes.

Three controller processes share a real etcd (started by the launcher, ``--etcd``);
the active one holds the leased ``/odradek/controller`` key. After kill -9 a standby
must take over within 2 x ``controller.lease.ttl.ms``, the producer must keep getting
acknowledgements throughout, and the new controller must do a controller's work
(create a topic, elect a new leader when a storage node dies). Node registrations are
leased keys in etcd.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable

import pytest
from fault_tools import (
    NumberedProducer,
    active_controllers,
    cluster_metadata,
    create_topic,
    explain,
    partition_state,
    read_everything,
    verify,
    wait_full_isr,
)
from helpers.waiting import wait_until

from odradek.controller.etcd_store import EtcdStore
from odradek.tools.etcd_server import etcd_binary
from odradek.tools.launcher import Cluster

LEASE_TTL_MS = 3000

pytestmark = pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed")


@pytest.fixture
def cluster(cluster_factory: Callable[..., Cluster]) -> Cluster:
    return cluster_factory(
        storage_nodes=3,
        replication_factor=3,
        controllers=3,
        etcd=True,
        with_groups=False,
        settings={"controller.lease.ttl.ms": str(LEASE_TTL_MS), "min.insync.replicas": "2"},
    )


def registrations(cluster: Cluster) -> dict[int, dict[str, int]]:
    assert cluster.etcd is not None
    endpoint = cluster.etcd.endpoint

    async def read() -> dict[int, dict[str, int]]:
        store = await EtcdStore.connect([endpoint], wait=5)
        try:
            kvs = await store.range("/odradek/brokers/ids/")
            return {int(kv.key.rsplit("/", 1)[1]): json.loads(kv.value) for kv in kvs if kv.lease}
        finally:
            await store.close()

    return asyncio.run(read())


def test_standby_takes_over_within_two_lease_ttls_while_producing(
    cluster: Cluster, unique_topic: str
) -> None:
    doc = json.loads(cluster.cluster_file.read_text())
    assert doc["etcd"]["pid"] > 0 and len(doc["controller_address"].split(",")) == 3
    active = active_controllers(cluster)
    assert len(active) == 1, active
    [(old_name, old_md)] = active.items()
    assert {100, 101, 102} <= set(registrations(cluster))  # leased /brokers/ids/N keys

    create_topic(cluster.bootstrap_servers, unique_topic, 2, 3)
    wait_full_isr(cluster, unique_topic, 2)
    producer = NumberedProducer(cluster.bootstrap_servers, unique_topic, rate=300).start()
    try:
        wait_until(lambda: producer.acked_count() > 200, "the first acks", timeout=20)
        svc = cluster.service(old_name)
        os.kill(svc.process.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        svc.process.wait(10)
        acked_at_kill = producer.acked_count()
        new: dict[str, object] = {}

        def taken_over() -> bool:
            new.update(active_controllers(cluster, timeout=0.5))
            return bool(new)

        wait_until(taken_over, "a standby to take over", timeout=2 * LEASE_TTL_MS / 1000.0 + 2)
        took = time.monotonic() - killed_at
        assert took <= 2 * LEASE_TTL_MS / 1000.0, f"takeover took {took:.1f}s"
        [(new_name, new_md)] = active_controllers(cluster).items()
        assert new_name != old_name
        assert new_md.controller_epoch > old_md.controller_epoch  # type: ignore[attr-defined]
        assert new_md.cluster_id == old_md.cluster_id  # type: ignore[attr-defined]
        # The producer never needed the controller: it kept being acknowledged.
        wait_until(
            lambda: producer.acked_count() > acked_at_kill + 300, "acks after failover", timeout=20
        )

        # The new controller works: a topic, and a leader election after a storage kill -9.
        create_topic(cluster.bootstrap_servers, unique_topic + "-after", 1, 3)
        leader = partition_state(cluster, unique_topic, 0).leader
        storage = cluster.service(f"storage-{leader}")
        os.kill(storage.process.pid, signal.SIGKILL)
        storage.process.wait(10)
        wait_until(
            lambda: partition_state(cluster, unique_topic, 0).leader not in (-1, leader),
            "a new leader elected by the new controller",
        )
        cluster.restart(f"storage-{leader}")
        cluster.restart(old_name)  # comes back as a standby
        assert list(active_controllers(cluster)) == [new_name]
        acked = producer.acked_count()
        wait_until(lambda: producer.acked_count() > acked + 300, "acks after the restarts")
    finally:
        producer.stop()
    assert not producer.errors, producer.errors
    wait_full_isr(cluster, unique_topic, 2)
    assert {100, 101, 102} <= set(registrations(cluster))
    problems = verify(producer.acked, read_everything(cluster.bootstrap_servers, unique_topic, 2))
    assert not problems, (problems[:20], explain(cluster, unique_topic, problems, producer))
    assert cluster_metadata(cluster).controller_id != 0
