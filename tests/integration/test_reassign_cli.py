"""``odradek reassign`` and ``odradek cluster`` as a user runs them, against one cluster
that grows: three storage nodes (two log directories each), then a fourth added while
it runs (filled by the rebalance the Helm chart runs after an upgrade, drained again
past the guard it runs before one). Real subprocesses, real files, output checked line by line against
kafka-reassign-partitions.sh's wording.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from odradek.tools.launcher import Cluster, ClusterOptions

SETTINGS = {
    "broker.heartbeat.interval.ms": "200",
    "broker.session.timeout.ms": "2000",
    "auto.leader.rebalance.enable": "false",
    "log.retention.check.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        ClusterOptions(
            data_dir=tmp_path_factory.mktemp("reassign-cli") / "data",
            port=0,
            storage_nodes=3,
            log_dirs=2,
            replication_factor=2,
            settings=SETTINGS,
        )
    )
    c.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        admin.create_topics(
            [
                NewTopic(
                    "alpha",
                    replica_assignments={p: [100 + p % 3, 100 + (p + 1) % 3] for p in range(6)},
                ),
                NewTopic("beta", replica_assignments={0: [100, 101], 1: [101, 102]}),
            ]
        )
        admin.close()
        producer = KafkaProducer(bootstrap_servers=c.bootstrap_servers, acks="all", linger_ms=10)
        for i in range(6000):
            producer.send("alpha" if i % 4 else "beta", b"v" * 300)
        producer.flush()
        producer.close()
        yield c
    finally:
        c.stop()


def odradek(
    cluster: Cluster, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args, "--bootstrap-server", cluster.bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


def replicas(cluster: Cluster) -> dict[tuple[str, int], list[int]]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        return {
            (t["name"], p["partition_index"]): list(p["replica_nodes"])
            for t in admin.describe_topics(["alpha", "beta"])
            for p in t["partitions"]
        }
    finally:
        admin.close()


def broker_config(cluster: Cluster, broker: int, name: str) -> str | None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        result = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(broker))], config_filter="modified"
        )
        (per_resource,) = result.values()
        entry = per_resource[str(broker)].get(name)
        return None if entry is None else entry["value"]
    finally:
        admin.close()


def test_generate_execute_verify_with_a_throttle(cluster: Cluster, tmp_path: Path) -> None:
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "beta"}], "version": 1}))
    out = odradek(
        cluster,
        "reassign",
        "--generate",
        "--topics-to-move-json-file",
        str(topics),
        "--broker-list",
        "101,102",
    )
    assert out.returncode == 0, out.stderr
    current, proposed = out.stdout.split("\n\nProposed partition reassignment configuration\n")
    assert current.startswith("Current partition replica assignment\n{")
    plan = json.loads(proposed)
    assert plan["version"] == 1 and [p["partition"] for p in plan["partitions"]] == [0, 1]
    assert all(sorted(p["replicas"]) == [101, 102] for p in plan["partitions"])
    assert all(p["log_dirs"] == ["any", "any"] for p in plan["partitions"])
    file = tmp_path / "plan.json"
    file.write_text(proposed)

    out = odradek(
        cluster,
        "reassign",
        "--execute",
        "--reassignment-json-file",
        str(file),
        "--throttle",
        "5000000",
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert "Save this to use as the --reassignment-json-file option during rollback" in lines
    assert (
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed." in lines
    )
    assert "The inter-broker throttle limit was set to 5000000 B/s" in lines
    assert lines[-1] == "Successfully started partition reassignments for beta-0,beta-1"
    assert broker_config(cluster, 101, "leader.replication.throttled.rate") == "5000000"

    out = odradek(
        cluster,
        "reassign",
        "--verify",
        "--reassignment-json-file",
        str(file),
        "--wait",
        "--progress-interval-ms",
        "200",
    )
    assert out.returncode == 0, out.stderr
    assert "Reassignment of partition beta-0 is completed." in out.stdout
    assert "Reassignment of partition beta-1 is completed." in out.stdout
    assert "Clearing broker-level throttles on brokers 100,101,102" in out.stdout
    assert "Clearing topic-level throttles on topic beta" in out.stdout
    assert broker_config(cluster, 101, "leader.replication.throttled.rate") is None
    assert {tp: sorted(r) for tp, r in replicas(cluster).items() if tp[0] == "beta"} == {
        ("beta", 0): [101, 102],
        ("beta", 1): [101, 102],
    }
    out = odradek(cluster, "reassign", "--list")
    assert out.stdout == "No partition reassignments found.\n"


def test_bad_input_answers_like_kafkas_tool(cluster: Cluster, tmp_path: Path) -> None:
    def execute(partitions: list[dict[str, object]]) -> subprocess.CompletedProcess[str]:
        file = tmp_path / "bad.json"
        file.write_text(json.dumps({"version": 1, "partitions": partitions}))
        return odradek(cluster, "reassign", "--execute", "--reassignment-json-file", str(file))

    out = execute([{"topic": "beta", "partition": 0, "replicas": [101, 999]}])
    assert (out.returncode, out.stderr.strip()) == (1, "Unknown broker id 999")
    out = execute([{"topic": "beta", "partition": 0, "replicas": [101, 101]}])
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "Partition replica lists may not contain duplicate entries: beta-0 contains multiple "
        "entries for 101"
    )
    out = execute([{"topic": "beta", "partition": 9, "replicas": [101]}])
    assert (out.returncode, out.stderr.strip()) == (1, "Unable to find partition: beta-9")
    out = odradek(cluster, "reassign", "--list", "--verify")
    assert out.returncode == 1
    assert "Command must include exactly one action: --generate, --execute" in out.stderr
    out = odradek(cluster, "reassign", "--verify", "--throttle", "10")
    assert out.returncode == 1 and 'can\'t be used with action "--verify"' in out.stderr


def test_log_dirs_in_the_reassignment_file_move_a_replica_between_directories(
    cluster: Cluster, tmp_path: Path
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    (answer,) = admin.describe_log_dirs(brokers=[100])
    admin.close()
    holding = {
        d["log_dir"]: {
            (t["name"], p["partition_index"]) for t in d["topics"] for p in t["partitions"]
        }
        for d in answer["log_dirs"]
    }
    (current,) = [d for d, held in holding.items() if ("alpha", 0) in held]
    (other,) = [d for d in holding if d != current]
    now = replicas(cluster)[("alpha", 0)]
    file = tmp_path / "dirs.json"
    file.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": "alpha",
                        "partition": 0,
                        "replicas": now,
                        "log_dirs": [other if b == 100 else "any" for b in now],
                    }
                ],
            }
        )
    )
    out = odradek(
        cluster,
        "reassign",
        "--execute",
        "--reassignment-json-file",
        str(file),
        "--replica-alter-log-dirs-throttle",
        "100000000",
    )
    assert out.returncode == 0, out.stderr
    assert (
        f"Successfully started moving log directory to {other} for replica alpha-0 with broker 100 "
        in out.stdout
    )
    deadline = time.monotonic() + 60
    while True:
        out = odradek(cluster, "reassign", "--verify", "--reassignment-json-file", str(file))
        if "Reassignment of replica alpha-0-100 completed successfully." in out.stdout:
            break
        assert time.monotonic() < deadline, out.stdout
        time.sleep(0.5)
    assert "Clearing broker-level throttles" in out.stdout


@pytest.mark.slow  # tens of seconds: in make test-slow, which CI runs
def test_scale_out_rebalance_then_decommission(cluster: Cluster) -> None:
    """The Helm chart's scaling flow by hand: the pre-upgrade guard, the post-upgrade
    filler waiting for the new node, then a drain of the highest id before a scale-down."""
    out = odradek(cluster, "cluster", "rebalance", "--only-if-empty-brokers")
    assert (out.returncode, out.stdout) == (0, "Every broker holds replicas: nothing to fill.\n")
    out = odradek(cluster, "cluster", "scale-down-check", "--storage-nodes", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("No storage node from id 103 on holds replicas")
    out = odradek(cluster, "cluster", "scale-down-check", "--storage-nodes", "2")
    assert out.returncode == 1
    assert "Storage node 102 holds " in out.stdout
    assert "odradek cluster decommission --node 102" in out.stdout
    out = odradek(
        cluster, "cluster", "rebalance", "--expect-brokers", "9", "--broker-wait-ms", "300"
    )
    assert out.returncode == 1 and "Only 3 of 9 brokers came online" in out.stderr

    # Started before the node exists, as the post-upgrade Job is while pods start.
    filler = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek",
            "cluster",
            "rebalance",
            "--expect-brokers",
            "4",
            "--only-if-empty-brokers",
            "--dry-run",
            "--bootstrap-server",
            cluster.bootstrap_servers,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert filler.stdout is not None
        assert filler.stdout.readline() == "Waiting for 4 brokers; 3 online.\n"
        cluster.add_storage_node()  # 103 joins with nothing
        stdout, stderr = filler.communicate(timeout=180)
    finally:
        if filler.poll() is None:
            filler.kill()
    assert filler.returncode == 0, stderr
    assert "Broker(s) 103 hold no replicas: filling them." in stdout
    assert "Proposed partition reassignment configuration" in stdout

    out = odradek(
        cluster,
        "cluster",
        "rebalance",
        "--expect-brokers",
        "4",
        "--only-if-empty-brokers",
        "--progress-interval-ms",
        "200",
        "--throttle",
        "20000000",
    )
    assert out.returncode == 0, out.stderr
    assert "Broker(s) 103 hold no replicas: filling them." in out.stdout
    assert "Progress: " in out.stdout and out.stdout.rstrip().endswith("Rebalance complete.")
    counts: dict[int, int] = {}
    for r in replicas(cluster).values():
        for b in r:
            counts[b] = counts.get(b, 0) + 1
    assert counts.get(103, 0) > 0
    out = odradek(cluster, "cluster", "rebalance", "--only-if-empty-brokers")
    assert (out.returncode, out.stdout) == (0, "Every broker holds replicas: nothing to fill.\n")

    # Scaling back down to 3 removes the highest id: the guard refuses until it is drained.
    out = odradek(cluster, "cluster", "scale-down-check", "--storage-nodes", "3")
    assert out.returncode == 1 and "Storage node 103 holds " in out.stdout
    out = odradek(cluster, "cluster", "decommission", "--node", "103", "--check")
    assert out.returncode == 1 and "still holds" in out.stdout
    out = odradek(
        cluster, "cluster", "decommission", "--node", "103", "--progress-interval-ms", "200"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("Node 103 holds no replicas; it can be removed.")
    assert all(103 not in r for r in replicas(cluster).values())
    out = odradek(cluster, "cluster", "decommission", "--node", "103", "--check")
    assert (out.returncode, out.stdout.strip()) == (
        0,
        "Node 103 holds no replicas; it can be removed.",
    )
    out = odradek(cluster, "cluster", "scale-down-check", "--storage-nodes", "3")
    assert out.returncode == 0, out.stdout + out.stderr
